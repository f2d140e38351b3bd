#include "server/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/sentencepiece_model.h"
#include "server/tokenizer/tokenizer_config.h"
#include "server/tokenizer/truncation.h"
#include "server/util/utf8.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

void AppendSpecial(int32_t id, int32_t type_id, Encoding* out) {
  out->input_ids.push_back(id);
  out->token_type_ids.push_back(type_id);
  out->attention_mask.push_back(1);
  out->offsets.emplace_back(0, 0);
  out->sequence_ids.push_back(-1);
}

// Appends pieces[first, first + count).
void AppendText(const std::vector<SentencePieceSpan>& pieces, int first, int count,
                int32_t type_id, int8_t sequence_id, Encoding* out) {
  for (int i = first; i < first + count; ++i) {
    const SentencePieceSpan& piece = pieces[static_cast<size_t>(i)];
    out->input_ids.push_back(piece.id);
    out->token_type_ids.push_back(type_id);
    out->attention_mask.push_back(1);
    out->offsets.emplace_back(piece.begin, piece.end);
    out->sequence_ids.push_back(sequence_id);
  }
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<SentencePieceModel> model, TokenizerFamily family,
                     SpecialTokenIds ids, bool lower_case, int default_max_length)
    : model_(std::move(model)),
      family_(family),
      ids_(ids),
      lower_case_(lower_case),
      default_max_length_(default_max_length) {}

Tokenizer::~Tokenizer() = default;

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& model_dir,
                                                           TokenizerFamily family,
                                                           int default_max_length) {
  if (!IsDirectory(model_dir)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no such model directory"));
  }
  // Either name is a SentencePiece model; the family's usual one goes first.
  const std::string names[2] = {family == TokenizerFamily::kT5 ? "spiece.model" : "spm.model",
                                family == TokenizerFamily::kT5 ? "spm.model" : "spiece.model"};
  std::string spm_path;
  for (const std::string& name : names) {
    // Something else than a file under either name (a directory) is an error, not an absence.
    ASSIGN_OR_RETURN(const bool present, OptionalFileExists(JoinPath(model_dir, name)));
    if (present && spm_path.empty()) spm_path = JoinPath(model_dir, name);
  }
  if (spm_path.empty()) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no SentencePiece model (looked for ",
                                            names[0], " and ", names[1], ")"));
  }
  ASSIGN_OR_RETURN(TokenizerConfig config, ReadTokenizerConfig(model_dir, family));
  const int max_length = config.model_max_length.value_or(default_max_length);
  if (max_length <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, ": no max length: tokenizer_config.json sets no model_max_length and "
                   "default_max_length is ", default_max_length));
  }
  return Create(spm_path, family, config.special_tokens, config.do_lower_case, max_length);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadModelFile(const std::string& spm_path,
                                                                    TokenizerFamily family,
                                                                    int default_max_length) {
  if (default_max_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_max_length must be positive, got ", default_max_length));
  }
  return Create(spm_path, family, DefaultSpecialTokenNames(family), /*lower_case=*/false,
                default_max_length);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(const std::string& spm_path,
                                                             TokenizerFamily family,
                                                             const SpecialTokenNames& names,
                                                             bool lower_case,
                                                             int default_max_length) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> model, SentencePieceModel::Load(spm_path));
  const SentencePieceModel& vocab = *model;
  auto ids = ResolveSpecialTokenIds(
      family, names, [&vocab](std::string_view piece) { return vocab.PieceToId(piece); },
      vocab.reserved_ids(), vocab.vocab_size());
  if (!ids.ok()) {
    return absl::Status(ids.status().code(), absl::StrCat(spm_path, ": ", ids.status().message()));
  }
  return std::unique_ptr<Tokenizer>(
      new Tokenizer(std::move(model), family, *ids, lower_case, default_max_length));
}

int Tokenizer::NumSpecialTokens(bool pair) const {
  if (family_ == TokenizerFamily::kDeberta) return pair ? 3 : 2;
  return pair ? 2 : 1;
}

int Tokenizer::vocab_size() const { return model_->vocab_size(); }

std::string Tokenizer::IdToPiece(int id) const { return model_->IdToPiece(id); }

absl::StatusOr<std::vector<SentencePieceSpan>> Tokenizer::Pieces(std::string_view text,
                                                                 std::string_view what) const {
  RETURN_IF_ERROR(ValidateUtf8(text, what));
  if (!lower_case_) return model_->Encode(text);
  // ASCII only: lowering other scripts could change byte lengths and break the offsets, and
  // full Unicode case mapping would need tables this project does not carry.
  std::string lowered(text);
  for (char& c : lowered) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return model_->Encode(lowered);
}

absl::StatusOr<int> Tokenizer::MaxLength(const TokenizeOptions& opts, bool pair) const {
  if (opts.max_length < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_length must not be negative, got ", opts.max_length));
  }
  const int max_length = opts.max_length > 0 ? opts.max_length : default_max_length_;
  const int specials = NumSpecialTokens(pair);
  if (max_length < specials) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_length ", max_length, " cannot hold the ", specials, " special tokens of a ",
        TokenizerFamilyName(family_), pair ? " text pair" : " text"));
  }
  return max_length;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeRaw(std::string_view text) const {
  ASSIGN_OR_RETURN(std::vector<SentencePieceSpan> pieces, Pieces(text, "text"));
  std::vector<int32_t> ids(pieces.size());
  std::transform(pieces.begin(), pieces.end(), ids.begin(),
                 [](const SentencePieceSpan& piece) { return piece.id; });
  return ids;
}

absl::StatusOr<Encoding> Tokenizer::Encode(std::string_view text,
                                           const TokenizeOptions& opts) const {
  ASSIGN_OR_RETURN(const int max_length, MaxLength(opts, /*pair=*/false));
  ASSIGN_OR_RETURN(std::vector<SentencePieceSpan> pieces, Pieces(text, "text"));
  const size_t length = pieces.size() + static_cast<size_t>(NumSpecialTokens(false));
  if (!opts.truncate && length > static_cast<size_t>(max_length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "text is ", length, " tokens including special tokens, more than max_length ",
        max_length, ", and truncation is off"));
  }
  return Assemble(pieces, nullptr, max_length, opts.direction);
}

absl::StatusOr<Encoding> Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                               const TokenizeOptions& opts) const {
  ASSIGN_OR_RETURN(const int max_length, MaxLength(opts, /*pair=*/true));
  ASSIGN_OR_RETURN(std::vector<SentencePieceSpan> pieces_a, Pieces(a, "first text"));
  ASSIGN_OR_RETURN(std::vector<SentencePieceSpan> pieces_b, Pieces(b, "second text"));
  const size_t length =
      pieces_a.size() + pieces_b.size() + static_cast<size_t>(NumSpecialTokens(true));
  if (!opts.truncate && length > static_cast<size_t>(max_length)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "text pair is ", length, " tokens (", pieces_a.size(), " + ", pieces_b.size(),
        " + special tokens), more than max_length ", max_length, ", and truncation is off"));
  }
  return Assemble(pieces_a, &pieces_b, max_length, opts.direction);
}

Encoding Tokenizer::Assemble(const std::vector<SentencePieceSpan>& a,
                             const std::vector<SentencePieceSpan>* b, int max_length,
                             TruncationDirection direction) const {
  const bool pair = b != nullptr;
  const int specials = NumSpecialTokens(pair);
  // Inputs are capped at 2^31 bytes by the module, so the piece counts fit in an int.
  const int length_a = static_cast<int>(a.size());
  const int length_b = pair ? static_cast<int>(b->size()) : 0;
  const TruncatedLengths kept = TruncateLongestFirst(length_a, length_b, max_length - specials);
  const int first_a = FirstKeptToken(length_a, kept.first, direction);
  const int first_b = FirstKeptToken(length_b, kept.second, direction);

  Encoding out;
  const int64_t untruncated = int64_t{length_a} + length_b + specials;
  out.untruncated_length = static_cast<int32_t>(std::min<int64_t>(untruncated, INT32_MAX));
  out.truncated = kept.first < length_a || kept.second < length_b;
  const size_t total = static_cast<size_t>(kept.first + kept.second + specials);
  out.input_ids.reserve(total);
  out.token_type_ids.reserve(total);
  out.attention_mask.reserve(total);
  out.offsets.reserve(total);
  out.sequence_ids.reserve(total);

  if (family_ == TokenizerFamily::kDeberta) {
    AppendSpecial(ids_.cls, 0, &out);
    AppendText(a, first_a, kept.first, 0, 0, &out);
    AppendSpecial(ids_.sep, 0, &out);
    if (pair) {
      AppendText(*b, first_b, kept.second, 1, 1, &out);
      AppendSpecial(ids_.sep, 1, &out);
    }
  } else {
    // T5 has no token types: both texts get 0, as T5Tokenizer returns.
    AppendText(a, first_a, kept.first, 0, 0, &out);
    AppendSpecial(ids_.eos, 0, &out);
    if (pair) {
      AppendText(*b, first_b, kept.second, 0, 1, &out);
      AppendSpecial(ids_.eos, 0, &out);
    }
  }
  return out;
}

}  // namespace relserve
