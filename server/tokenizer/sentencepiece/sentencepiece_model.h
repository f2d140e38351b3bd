#ifndef RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODEL_H_
#define RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/sentencepiece/sentencepiece_module.h"

namespace relserve {

// One SentencePiece piece of an encoded text and the bytes [begin, end) of the input it covers.
struct SentencePieceSpan {
  int32_t id = 0;
  int32_t begin = 0;
  int32_t end = 0;
};

// A SentencePiece model loaded inside librelserve_sentencepiece.so, seen from C++. Immutable
// after Load, so every const method may be called from many threads at once.
class SentencePieceModel {
 public:
  // Loads a serialized SentencePiece model through the module that SentencePieceModule::Find
  // picks for `module`. NOT_FOUND when the file does not exist, INVALID_ARGUMENT when it is not
  // a model.
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Load(const std::string& path,
                                                                  const SentencePieceModuleOptions& module = {});
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Load(
      std::shared_ptr<const SentencePieceModule> module, const std::string& path);
  // Loads a model from its serialized ModelProto (sentencepiece_model_proto.h builds one);
  // `source` names where it came from in messages. INVALID_ARGUMENT when SentencePiece
  // refuses it.
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> LoadSerialized(
      std::string_view serialized, const std::string& source, const SentencePieceModuleOptions& module = {});

  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;
  ~SentencePieceModel();

  // What SentencePieceProcessor::Encode gives: no special tokens. The text must be valid UTF-8
  // (SentencePiece would quietly map bad bytes to the unknown piece).
  absl::StatusOr<std::vector<SentencePieceSpan>> Encode(std::string_view text) const;

  int vocab_size() const;
  // The id of exactly this piece; -1 when the vocabulary lacks it.
  int PieceToId(std::string_view piece) const;
  // "" for an id outside the vocabulary.
  std::string IdToPiece(int id) const;
  // The unk/bos/eos/pad ids the model was trained with; -1 where it has none.
  RelserveSpmReservedIds reserved_ids() const;

 private:
  SentencePieceModel(std::shared_ptr<const SentencePieceModule> module, RelserveSpmModel* model)
      : module_(std::move(module)), model_(model) {}

  std::shared_ptr<const SentencePieceModule> module_;  // keeps the code behind model_ mapped
  RelserveSpmModel* model_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODEL_H_
