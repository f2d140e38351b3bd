#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// Room for SentencePiece's messages, which name a source location and the failed check.
constexpr size_t kErrorSize = 1024;

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Load(
    const std::string& path, const SentencePieceModuleOptions& module_options) {
  ASSIGN_OR_RETURN(std::shared_ptr<const SentencePieceModule> module, SentencePieceModule::Find(module_options));
  return Load(std::move(module), path);
}

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Load(
    std::shared_ptr<const SentencePieceModule> module, const std::string& path) {
  if (IsDirectory(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": is a directory, not a SentencePiece model"));
  }
  if (!FileExists(path)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such SentencePiece model file"));
  }
  char error[kErrorSize] = "";
  RelserveSpmModel* model = module->api().load(path.c_str(), error, sizeof(error));
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a valid SentencePiece model: ", error));
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(std::move(module), model));
}

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::LoadSerialized(
    std::string_view serialized, const std::string& source, const SentencePieceModuleOptions& module_options) {
  ASSIGN_OR_RETURN(std::shared_ptr<const SentencePieceModule> module, SentencePieceModule::Find(module_options));
  char error[kErrorSize] = "";
  RelserveSpmModel* model =
      module->api().load_serialized(serialized.data(), serialized.size(), error, sizeof(error));
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": SentencePiece refused the model built from it: ", error));
  }
  return std::unique_ptr<SentencePieceModel>(new SentencePieceModel(std::move(module), model));
}

SentencePieceModel::~SentencePieceModel() { module_->api().free_model(model_); }

absl::StatusOr<std::vector<SentencePieceSpan>> SentencePieceModel::Encode(
    std::string_view text) const {
  const RelserveSpmApi& api = module_->api();
  RelserveSpmPieces pieces{};
  char error[kErrorSize] = "";
  if (api.encode(model_, text.data(), text.size(), &pieces, error, sizeof(error)) != 0) {
    return absl::InternalError(absl::StrCat("SentencePiece encode failed: ", error));
  }
  std::vector<SentencePieceSpan> spans(pieces.size);
  for (size_t i = 0; i < pieces.size; ++i) {
    spans[i] = SentencePieceSpan{pieces.ids[i], pieces.begins[i], pieces.ends[i]};
  }
  api.free_pieces(&pieces);
  return spans;
}

int SentencePieceModel::vocab_size() const { return module_->api().vocab_size(model_); }

int SentencePieceModel::PieceToId(std::string_view piece) const {
  return module_->api().piece_to_id(model_, piece.data(), piece.size());
}

std::string SentencePieceModel::IdToPiece(int id) const {
  const RelserveSpmApi& api = module_->api();
  const size_t size = api.id_to_piece(model_, id, nullptr, 0);
  if (size == 0) return "";
  std::string piece(size + 1, '\0');  // the module always writes a terminating NUL
  api.id_to_piece(model_, id, piece.data(), piece.size());
  piece.resize(size);
  return piece;
}

RelserveSpmReservedIds SentencePieceModel::reserved_ids() const {
  RelserveSpmReservedIds ids{};
  module_->api().reserved_ids(model_, &ids);
  return ids;
}

}  // namespace relserve
