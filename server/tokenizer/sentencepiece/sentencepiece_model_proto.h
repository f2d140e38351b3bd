#ifndef RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODEL_PROTO_H_
#define RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODEL_PROTO_H_

#include <string>
#include <vector>

namespace relserve {

// The parts of SentencePiece's ModelProto (sentencepiece_model.proto) that encoding reads, for
// a Unigram model assembled in memory rather than read from a .model file.
struct SentencePieceModelSpec {
  // ModelProto.SentencePiece.Type.
  enum class PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kByte = 6 };
  struct Piece {
    std::string piece;
    float score = 0.0f;
    PieceType type = PieceType::kNormal;
  };
  std::vector<Piece> pieces;  // by id; exactly one kUnknown
  // TrainerSpec: the pieces SentencePieceProcessor reports as unk/bos/eos/pad ids (each only
  // when a piece of that name exists with the right type), and byte fallback.
  std::string unk_piece = "<unk>";
  std::string bos_piece = "<s>";
  std::string eos_piece = "</s>";
  std::string pad_piece = "<pad>";
  bool byte_fallback = false;
  // NormalizerSpec.
  std::string normalizer_name = "identity";
  std::string precompiled_charsmap;  // raw bytes; empty: no character mapping
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

// The serialized ModelProto (protobuf wire format) of a Unigram model, which
// SentencePieceModel::LoadSerialized loads. Written by hand so that no protobuf runtime is
// needed outside the SentencePiece module.
std::string SerializeSentencePieceModel(const SentencePieceModelSpec& spec);

// A serialized ModelProto holding only normalizer_spec { add_dummy_prefix: false }: appended to
// a model's bytes it merges into that model's normalizer spec (protobuf's merge of
// concatenated messages), as T5Tokenizer with legacy=False does with MergeFrom.
std::string NoDummyPrefixOverride();

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODEL_PROTO_H_
