#include "server/tokenizer/sentencepiece/sentencepiece_model_proto.h"

#include <cstdint>
#include <cstring>

namespace relserve {
namespace {

// Field numbers of sentencepiece_model.proto.
constexpr int kModelPieces = 1;
constexpr int kModelTrainerSpec = 2;
constexpr int kModelNormalizerSpec = 3;
constexpr int kPiecePiece = 1;
constexpr int kPieceScore = 2;
constexpr int kPieceType = 3;
constexpr int kTrainerModelType = 3;
constexpr int kTrainerVocabSize = 4;
constexpr int kTrainerByteFallback = 35;
constexpr int kTrainerUnkPiece = 45;
constexpr int kTrainerBosPiece = 46;
constexpr int kTrainerEosPiece = 47;
constexpr int kTrainerPadPiece = 48;
constexpr int kNormalizerName = 1;
constexpr int kNormalizerCharsmap = 2;
constexpr int kNormalizerAddDummyPrefix = 3;
constexpr int kNormalizerRemoveExtraWhitespaces = 4;
constexpr int kNormalizerEscapeWhitespaces = 5;
constexpr uint64_t kUnigram = 1;

enum WireType : uint32_t { kVarint = 0, kFixed32 = 5, kLengthDelimited = 2 };

class ProtoWriter {
 public:
  void Varint(int field, uint64_t value) {
    Key(field, kVarint);
    RawVarint(value);
  }
  void Bool(int field, bool value) { Varint(field, value ? 1 : 0); }
  void Float(int field, float value) {
    Key(field, kFixed32);
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  void Bytes(int field, const std::string& value) {
    Key(field, kLengthDelimited);
    RawVarint(value.size());
    out_ += value;
  }
  const std::string& str() const { return out_; }

 private:
  void Key(int field, WireType type) {
    RawVarint((static_cast<uint64_t>(field) << 3) | type);
  }
  void RawVarint(uint64_t value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }

  std::string out_;
};

}  // namespace

std::string SerializeSentencePieceModel(const SentencePieceModelSpec& spec) {
  ProtoWriter model;
  for (const SentencePieceModelSpec::Piece& piece : spec.pieces) {
    ProtoWriter p;
    p.Bytes(kPiecePiece, piece.piece);
    p.Float(kPieceScore, piece.score);
    p.Varint(kPieceType, static_cast<uint64_t>(piece.type));
    model.Bytes(kModelPieces, p.str());
  }
  ProtoWriter trainer;
  trainer.Varint(kTrainerModelType, kUnigram);
  trainer.Varint(kTrainerVocabSize, spec.pieces.size());
  trainer.Bool(kTrainerByteFallback, spec.byte_fallback);
  trainer.Bytes(kTrainerUnkPiece, spec.unk_piece);
  trainer.Bytes(kTrainerBosPiece, spec.bos_piece);
  trainer.Bytes(kTrainerEosPiece, spec.eos_piece);
  trainer.Bytes(kTrainerPadPiece, spec.pad_piece);
  model.Bytes(kModelTrainerSpec, trainer.str());
  ProtoWriter normalizer;
  normalizer.Bytes(kNormalizerName, spec.normalizer_name);
  if (!spec.precompiled_charsmap.empty()) {
    normalizer.Bytes(kNormalizerCharsmap, spec.precompiled_charsmap);
  }
  normalizer.Bool(kNormalizerAddDummyPrefix, spec.add_dummy_prefix);
  normalizer.Bool(kNormalizerRemoveExtraWhitespaces, spec.remove_extra_whitespaces);
  normalizer.Bool(kNormalizerEscapeWhitespaces, spec.escape_whitespaces);
  model.Bytes(kModelNormalizerSpec, normalizer.str());
  return model.str();
}

std::string NoDummyPrefixOverride() {
  ProtoWriter normalizer;
  normalizer.Bool(kNormalizerAddDummyPrefix, false);
  ProtoWriter model;
  model.Bytes(kModelNormalizerSpec, normalizer.str());
  return model.str();
}

}  // namespace relserve
