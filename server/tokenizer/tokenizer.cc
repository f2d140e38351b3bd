#include "server/tokenizer/tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/tokenizer/added_tokens.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/tokenizer/files/tokenizer_files.h"
#include "server/tokenizer/files/tokenizer_json.h"
#include "server/tokenizer/files/tokenizer_json_model.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/special_token_table.h"
#include "server/tokenizer/text_chunks.h"
#include "server/tokenizer/text/mapped_text.h"
#include "server/tokenizer/text/unicode_chars.h"
#include "server/tokenizer/truncation.h"
#include "server/util/field_error.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

void AppendSpecial(int32_t id, int32_t type_id, Encoding* out) {
  out->input_ids.push_back(id);
  out->token_type_ids.push_back(type_id);
  out->attention_mask.push_back(1);
  out->offsets.emplace_back(0, 0);
  out->sequence_ids.push_back(-1);
}

// Appends tokens[first, first + count).
void AppendText(const std::vector<TokenSpan>& tokens, int first, int count, int32_t type_id,
                int8_t sequence_id, Encoding* out) {
  for (int i = first; i < first + count; ++i) {
    const TokenSpan& token = tokens[static_cast<size_t>(i)];
    out->input_ids.push_back(token.id);
    out->token_type_ids.push_back(type_id);
    out->attention_mask.push_back(1);
    out->offsets.emplace_back(token.begin, token.end);
    out->sequence_ids.push_back(sequence_id);
  }
}

// The id of the last of tokens[first, first + count); -1 when count is 0.
int32_t LastId(const std::vector<TokenSpan>& tokens, int first, int count) {
  return count > 0 ? tokens[static_cast<size_t>(first + count - 1)].id : -1;
}

// Whether side[i] is a special token left out because the text right before it already ends
// with its id (TemplatePiece::unless_text_ends_with_it: T5Tokenizer's _add_eos_if_not_present).
// last_ids: the last id of the first and the second text, -1 for an empty or absent text.
bool LeftOut(const std::vector<TemplatePiece>& side, size_t i, const int32_t (&last_ids)[2]) {
  const TemplatePiece& piece = side[i];
  if (!piece.unless_text_ends_with_it || piece.sequence >= 0 || piece.ids.size() != 1 || i == 0) {
    return false;
  }
  const int text = side[i - 1].sequence;
  return (text == 0 || text == 1) && last_ids[text] >= 0 && last_ids[text] == piece.ids[0];
}

int LeftOutCount(const std::vector<TemplatePiece>& side, const int32_t (&last_ids)[2]) {
  int n = 0;
  for (size_t i = 0; i < side.size(); ++i) n += LeftOut(side, i, last_ids) ? 1 : 0;
  return n;
}

// Whether a text cut at spaces tokenizes as the whole does (text_chunks.h): no added token holds
// a space, and no vocabulary piece has a "▁" (SentencePiece's space) after
// anything but another "▁" (pieces that span words, from a vocabulary trained without
// splitting on white space).
bool CutsAtWhiteSpace(const TextModel& model, const AddedTokens& added) {
  for (const AddedToken& token : added.tokens()) {
    for (char c : token.content) {
      if (IsCutSpace(c)) return false;
    }
  }
  static constexpr std::string_view kSpace = "\xe2\x96\x81";
  for (int id = 0; id < model.vocab_size(); ++id) {
    const std::string piece = model.IdToPiece(id);
    for (size_t at = piece.find(kSpace, 1); at != std::string::npos; at = piece.find(kSpace, at + 1)) {
      if (at < kSpace.size() || piece.compare(at - kSpace.size(), kSpace.size(), kSpace) != 0) return false;
    }
  }
  return true;
}

// Tokens of text[chunk.begin, chunk.end) (spans relative to the chunk) that the chunk keeps,
// appended with spans in the whole text.
void KeepChunkTokens(const std::vector<TokenSpan>& part, const TextChunk& chunk, std::vector<TokenSpan>* out) {
  for (TokenSpan token : part) {
    token.begin += static_cast<int32_t>(chunk.begin);
    token.end += static_cast<int32_t>(chunk.begin);
    const size_t begin = static_cast<size_t>(token.begin);
    if (begin < chunk.keep_begin) continue;
    if (chunk.keep_end != std::string::npos && begin >= chunk.keep_end) continue;
    out->push_back(token);
  }
}

// Tokens a text of an encoding under `max_length` may keep, and two more: enough to know that
// it is cut (or refused), and that a T5 </s> left out cannot make it fit.
size_t TokenLimit(int max_length, int specials) {
  return static_cast<size_t>(std::max(0, max_length - specials)) + 2;
}

// Assemble's max_length where nothing may be cut: truncation is off and the encoding fits.
constexpr int kNoTruncation = std::numeric_limits<int>::max();

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TextModel> model, const TokenizerFamilyDescriptor& family, SpecialTokenIds ids,
                     PostProcessorTemplate post_processor, std::unique_ptr<AddedTokens> added,
                     const TokenizerConfig& config, int default_max_length, int vocab_size)
    : model_(std::move(model)),
      descriptor_(&family),
      ids_(ids),
      template_(std::move(post_processor)),
      added_(std::move(added)),
      // T5Tokenizer and XLMRobertaTokenizer have no do_lower_case attribute, so transformers
      // lowers nothing for them.
      lower_case_(config.do_lower_case && family.has_do_lower_case),
      // PreTrainedTokenizer.tokenize lowers the text when the tokenizer has do_lower_case
      // (DebertaV2Tokenizer._tokenize lowers again, which changes nothing more).
      lower_case_outside_tokens_(lower_case_ && !(family.lowers_in_basic_tokenizer &&
                                                  !config.do_basic_tokenize)),
      add_prefix_space_(family.has_add_prefix_space &&
                        config.add_prefix_space.value_or(false)),
      default_max_length_(default_max_length),
      vocab_size_(vocab_size) {}

Tokenizer::~Tokenizer() = default;

absl::StatusOr<bool> Tokenizer::HasFiles(const std::string& model_dir, TokenizerFamily family) {
  return HasTokenizerFiles(model_dir, Describe(family));
}

std::string Tokenizer::FilesDescription(TokenizerFamily family) {
  return TokenizerFilesDescription(Describe(family));
}

SpecialTokenNames Tokenizer::DefaultSpecialTokens(TokenizerFamily family) {
  return DefaultSpecialTokenNames(Describe(family));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& model_dir,
                                                           TokenizerFamily family,
                                                           int default_max_length,
                                                           const SentencePieceModuleOptions& sentencepiece) {
  if (!IsDirectory(model_dir)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no such model directory"));
  }
  const TokenizerFamilyDescriptor& descriptor = Describe(family);
  ASSIGN_OR_RETURN(const TokenizerFiles files, FindTokenizerFiles(model_dir, descriptor));
  return LoadFiles(model_dir, files, descriptor, default_max_length, sentencepiece);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadTokenizerJson(
    const std::string& model_dir, TokenizerFamily family, int default_max_length,
    const SentencePieceModuleOptions& sentencepiece) {
  if (!IsDirectory(model_dir)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no such model directory"));
  }
  TokenizerFiles files;
  files.tokenizer_json = JoinPath(model_dir, kTokenizerJsonFile);
  return LoadFiles(model_dir, files, Describe(family), default_max_length, sentencepiece);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadFiles(const std::string& model_dir,
                                                                const TokenizerFiles& files,
                                                                const TokenizerFamilyDescriptor& family,
                                                                int default_max_length,
                                                                const SentencePieceModuleOptions& sentencepiece) {
  ASSIGN_OR_RETURN(TokenizerConfig config, ReadTokenizerConfig(model_dir, family));
  std::optional<TokenizerJson> json;
  if (!files.tokenizer_json.empty()) {
    ASSIGN_OR_RETURN(json, ReadTokenizerJson(files.tokenizer_json));
    RETURN_IF_ERROR(ApplyTokenizerJson(*json, family, files.tokenizer_json, &config));
  }
  const int max_length = config.model_max_length.value_or(default_max_length);
  if (max_length <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, ": no max length: tokenizer_config.json sets no model_max_length and "
                   "default_max_length is ", default_max_length));
  }
  return Create(files, json ? &*json : nullptr, family, config, max_length, sentencepiece);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::LoadModelFile(const std::string& path,
                                                                    TokenizerFamily family,
                                                                    int default_max_length,
                                                                    const SentencePieceModuleOptions& sentencepiece) {
  if (default_max_length <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("default_max_length must be positive, got ", default_max_length));
  }
  const TokenizerFamilyDescriptor& descriptor = Describe(family);
  if (descriptor.needs_every_vocab_file) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a ", descriptor.name, " tokenizer needs ",
                     absl::StrJoin(descriptor.vocab_files, " and "), ": load its directory"));
  }
  TokenizerFiles files;
  files.vocab = path;
  return Create(files, nullptr, descriptor, DefaultTokenizerConfig(descriptor), default_max_length, sentencepiece);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Create(const TokenizerFiles& files,
                                                             const TokenizerJson* json,
                                                             const TokenizerFamilyDescriptor& family,
                                                             const TokenizerConfig& config,
                                                             int default_max_length,
                                                             const SentencePieceModuleOptions& sentencepiece) {
  ASSIGN_OR_RETURN(LoadedTextModel loaded, family.load_text_model(files, json, config, sentencepiece));
  const std::string& source = json != nullptr ? files.tokenizer_json : files.vocab;
  auto with_source = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(source, ": ", status.message()));
  };
  auto table = BuildSpecialTokenTable(family, config, *loaded.model, loaded.reserved);
  if (!table.ok()) return with_source(table.status());
  PostProcessorTemplate post_processor;
  if (json != nullptr) {
    post_processor = TemplateFromJson(*json, family);
    if (absl::Status status = post_processor.Validate(table->vocab_size); !status.ok()) {
      return with_source(status);
    }
  } else {
    auto family_template = FamilyTemplate(family, table->ids);
    if (!family_template.ok()) return with_source(family_template.status());
    post_processor = *std::move(family_template);
  }
  auto added = std::make_unique<AddedTokens>(std::move(table->added));
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer(
      std::move(loaded.model), family, table->ids, std::move(post_processor), std::move(added),
      config, default_max_length, table->vocab_size));
  if (family.text_rules != nullptr) tokenizer->text_rules_ = family.text_rules(config, *tokenizer->model_);
  tokenizer->chunkable_ = CutsAtWhiteSpace(*tokenizer->model_, *tokenizer->added_);
  tokenizer->source_file_ = source.substr(source.find_last_of('/') + 1);
  return tokenizer;
}

int Tokenizer::NumSpecialTokens(bool pair) const { return template_.NumSpecialTokens(pair); }

std::string Tokenizer::IdToPiece(int id) const {
  if (id >= 0 && id < model_->vocab_size()) return model_->IdToPiece(id);
  for (const AddedToken& token : added_->tokens()) {
    if (token.id == id) return token.content;
  }
  return "";
}

int Tokenizer::TokenToId(std::string_view token) const {
  if (const AddedToken* added = added_->Find(token); added != nullptr) return added->id;
  const int id = model_->PieceToId(token);
  return id >= 0 && id < model_->vocab_size() && model_->IdToPiece(id) == token ? id : -1;
}

absl::StatusOr<std::vector<TokenSpan>> Tokenizer::Tokens(std::string_view text,
                                                         std::string_view what) const {
  RETURN_IF_ERROR(ValidateUtf8(text, what));
  MappedText mapped;
  // RobertaTokenizer.prepare_for_tokenization: a space before text that starts with none.
  size_t first = 0;
  if (add_prefix_space_ && !text.empty() &&
      !unicode::IsPythonSpace(unicode::DecodeUtf8(text, &first))) {
    mapped.Append(' ', 0, 0);
    MappedText rest = MappedText::Identity(text);
    mapped.AppendRange(rest, 0, rest.size());
  } else {
    mapped = MappedText::Identity(text);
  }
  if (lower_case_whole_text_) mapped = LowercaseChars(mapped);
  if (lower_case_outside_tokens_) mapped = added_->LowercaseOutside(mapped);
  if (text_rules_ != nullptr && !text.empty()) mapped = text_rules_->BeforeSplit(mapped);

  std::vector<TokenSpan> tokens;
  // For the family's rules: whether the first token came from the text model and the second is
  // a special token.
  bool first_from_model = false;
  bool second_is_special = false;
  for (const AddedTokens::Segment& segment : added_->Split(mapped)) {
    if (segment.token != nullptr) {
      const auto [begin, end] = segment.text.Span(0, segment.text.size());
      if (tokens.size() == 1) second_is_special = segment.token->special;
      tokens.push_back(TokenSpan{segment.token->id, begin, end});
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<TokenSpan> part, model_->Tokenize(segment.text));
    for (TokenSpan& token : part) {
      if (token.id < 0) token.id = ids_.unk;
      if (tokens.empty()) first_from_model = true;
      tokens.push_back(token);
    }
  }
  if (text_rules_ != nullptr) text_rules_->AfterSplit(first_from_model, second_is_special, &tokens);
  return tokens;
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
        descriptor_->name, pair ? " text pair" : " text"));
  }
  return max_length;
}

absl::StatusOr<Tokenizer::TextTokens> Tokenizer::BoundedTokens(std::string_view text, std::string_view what,
                                                               size_t limit, const TokenizeOptions& opts) const {
  const TruncationDirection cut = opts.direction;
  const size_t chunk_bytes = opts.chunk_bytes;
  TextTokens out;
  if (!chunkable_ || chunk_bytes == 0 || text.size() <= chunk_bytes) {
    // Read whole: every token is in hand, and the length is known.
    ASSIGN_OR_RETURN(out.tokens, Tokens(text, what));
    return out;
  }
  {
    RETURN_IF_ERROR(ValidateUtf8(text, what));
    // Chunks from the end that is kept, until more than `limit` tokens are in hand.
    const bool forward = cut == TruncationDirection::kRight;
    std::vector<std::vector<TokenSpan>> parts;  // backward: the last chunk's tokens first
    size_t have = 0;
    size_t keep = forward ? 0 : std::string::npos;
    size_t edge = forward ? 0 : text.size();
    for (;;) {
      const TextChunk chunk =
          forward ? ForwardChunk(text, keep, edge, chunk_bytes) : BackwardChunk(text, keep, edge, chunk_bytes);
      ASSIGN_OR_RETURN(const std::vector<TokenSpan> part,
                       Tokens(text.substr(chunk.begin, chunk.end - chunk.begin), what));
      parts.emplace_back();
      KeepChunkTokens(part, chunk, &parts.back());
      have += parts.back().size();
      if (chunk.last || have > limit) break;
      if (opts.keep_going) RETURN_IF_ERROR(opts.keep_going());
      std::tie(keep, edge) = forward ? NextForward(text, chunk) : NextBackward(text, chunk);
    }
    out.tokens.reserve(have);
    if (forward) {
      for (const auto& part : parts) out.tokens.insert(out.tokens.end(), part.begin(), part.end());
    } else {
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) out.tokens.insert(out.tokens.end(), it->begin(), it->end());
    }
  }
  if (out.tokens.size() > limit) {
    const size_t drop = out.tokens.size() - limit;
    if (cut == TruncationDirection::kRight) {
      out.tokens.resize(limit);
    } else {
      out.tokens.erase(out.tokens.begin(), out.tokens.begin() + static_cast<std::ptrdiff_t>(drop));
    }
    out.complete = false;
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::EncodeRaw(std::string_view text) const {
  ASSIGN_OR_RETURN(std::vector<TokenSpan> tokens, Tokens(text, "text"));
  std::vector<int32_t> ids(tokens.size());
  std::transform(tokens.begin(), tokens.end(), ids.begin(),
                 [](const TokenSpan& token) { return token.id; });
  return ids;
}

absl::StatusOr<Encoding> Tokenizer::Encode(std::string_view text,
                                           const TokenizeOptions& opts) const {
  ASSIGN_OR_RETURN(const int max_length, MaxLength(opts, /*pair=*/false));
  ASSIGN_OR_RETURN(TextTokens text_tokens,
                   BoundedTokens(text, "text", TokenLimit(max_length, NumSpecialTokens(false)), opts));
  const std::vector<TokenSpan>& tokens = text_tokens.tokens;
  const int32_t last_ids[2] = {LastId(tokens, 0, static_cast<int>(tokens.size())), -1};
  const size_t length = tokens.size() + static_cast<size_t>(NumSpecialTokens(false) -
                                                            LeftOutCount(template_.single, last_ids));
  if (!opts.truncate && (!text_tokens.complete || length > static_cast<size_t>(max_length))) {
    return WithFieldError(absl::InvalidArgumentError(absl::StrCat(
                              "text is ", text_tokens.complete ? "" : "more than ", length,
                              " tokens including special tokens, more than max_length ", max_length,
                              ", and truncation is off")),
                          FieldErrorKind::kTooLong, "");
  }
  // Truncation off cuts nothing, as transformers' truncation=False: the encoding fits, even
  // where it does only thanks to a special token left out.
  Encoding out = Assemble(tokens, nullptr, opts.truncate ? max_length : kNoTruncation, opts.direction);
  out.length_is_lower_bound = !text_tokens.complete;
  return out;
}

absl::StatusOr<Tokenizer::PairText> Tokenizer::TokenizeForPairs(std::string_view text, std::string_view what,
                                                                const TokenizeOptions& opts) const {
  ASSIGN_OR_RETURN(const int max_length, MaxLength(opts, /*pair=*/true));
  ASSIGN_OR_RETURN(TextTokens text_tokens,
                   BoundedTokens(text, what, TokenLimit(max_length, NumSpecialTokens(true)), opts));
  PairText out;
  out.tokens = std::move(text_tokens.tokens);
  out.complete = text_tokens.complete;
  out.max_length = max_length;
  out.cut = opts.direction;
  return out;
}

absl::StatusOr<Encoding> Tokenizer::EncodePair(std::string_view a, std::string_view b,
                                               const TokenizeOptions& opts) const {
  ASSIGN_OR_RETURN(const PairText first, TokenizeForPairs(a, "first text", opts));
  ASSIGN_OR_RETURN(const PairText second, TokenizeForPairs(b, "second text", opts));
  return EncodePair(first, second, opts);
}

absl::StatusOr<Encoding> Tokenizer::EncodePair(const PairText& a, const PairText& b,
                                               const TokenizeOptions& opts) const {
  ASSIGN_OR_RETURN(const int max_length, MaxLength(opts, /*pair=*/true));
  for (const PairText* text : {&a, &b}) {
    if (!text->complete && (text->max_length != max_length || text->cut != opts.direction)) {
      return absl::InternalError(absl::StrCat(
          "a text tokenized for pairs of max_length ", text->max_length,
          " is paired under other options (max_length ", max_length, ")"));
    }
  }
  const std::vector<TokenSpan>& tokens_a = a.tokens;
  const std::vector<TokenSpan>& tokens_b = b.tokens;
  const bool complete = a.complete && b.complete;
  const int32_t last_ids[2] = {LastId(tokens_a, 0, static_cast<int>(tokens_a.size())),
                               LastId(tokens_b, 0, static_cast<int>(tokens_b.size()))};
  const size_t length =
      tokens_a.size() + tokens_b.size() +
      static_cast<size_t>(NumSpecialTokens(true) - LeftOutCount(template_.pair, last_ids));
  // What a text too long to be read whole counts: at least.
  const auto count = [](const PairText& t) {
    return absl::StrCat(t.complete ? "" : "more than ", t.tokens.size());
  };
  if (!opts.truncate && (!complete || length > static_cast<size_t>(max_length))) {
    return WithFieldError(absl::InvalidArgumentError(absl::StrCat(
                              "text pair is ", complete ? "" : "more than ", length, " tokens (", count(a), " + ",
                              count(b), " + special tokens), more than max_length ", max_length,
                              ", and truncation is off")),
                          FieldErrorKind::kTooLong, "");
  }
  if (opts.truncate && opts.pair_truncation == PairTruncation::kOnlyFirst &&
      (!complete || length > static_cast<size_t>(max_length))) {
    // transformers' truncate_sequences refuses to cut the first text away entirely.
    const size_t to_remove = length - std::min(length, static_cast<size_t>(max_length));
    if (tokens_a.size() <= to_remove) {
      return absl::InvalidArgumentError(absl::StrCat(
          "text pair is ", complete ? "" : "more than ", length, " tokens (", count(a), " + ", count(b),
          " + special tokens), more than max_length ", max_length, ", and only the first text may be cut: the second "
          "leaves no room for any of it"));
    }
  }
  Encoding out = Assemble(tokens_a, &tokens_b, opts.truncate ? max_length : kNoTruncation, opts.direction,
                          opts.pair_truncation);
  out.length_is_lower_bound = !complete;
  return out;
}

Encoding Tokenizer::Assemble(const std::vector<TokenSpan>& a, const std::vector<TokenSpan>* b,
                             int max_length, TruncationDirection direction,
                             PairTruncation pair_truncation) const {
  const bool pair = b != nullptr;
  const std::vector<TemplatePiece>& side = pair ? template_.pair : template_.single;
  const int specials = NumSpecialTokens(pair);
  // Inputs are capped at 2^31 bytes, and no family makes more tokens than bytes plus one.
  const int length_a = static_cast<int>(a.size());
  const int length_b = pair ? static_cast<int>(b->size()) : 0;
  // As transformers' prepare_for_model: the texts are cut to leave room for every special
  // token of the template, a T5 </s> that will be left out included, and the template applies
  // to what is kept.
  const TruncatedLengths kept = pair_truncation == PairTruncation::kOnlyFirst
                                    ? TruncateOnlyFirst(length_a, length_b, max_length - specials)
                                    : TruncateLongestFirst(length_a, length_b, max_length - specials);
  const int first_a = FirstKeptToken(length_a, kept.first, direction);
  const int first_b = FirstKeptToken(length_b, kept.second, direction);
  const int32_t full_last[2] = {LastId(a, 0, length_a), pair ? LastId(*b, 0, length_b) : -1};
  const int32_t kept_last[2] = {LastId(a, first_a, kept.first),
                                pair ? LastId(*b, first_b, kept.second) : -1};

  Encoding out;
  const int64_t untruncated =
      int64_t{length_a} + length_b + specials - LeftOutCount(side, full_last);
  out.untruncated_length = static_cast<int32_t>(std::min<int64_t>(untruncated, INT32_MAX));
  out.truncated = kept.first < length_a || kept.second < length_b;
  const size_t total =
      static_cast<size_t>(kept.first + kept.second + specials - LeftOutCount(side, kept_last));
  out.input_ids.reserve(total);
  out.token_type_ids.reserve(total);
  out.attention_mask.reserve(total);
  out.offsets.reserve(total);
  out.sequence_ids.reserve(total);

  for (size_t i = 0; i < side.size(); ++i) {
    const TemplatePiece& piece = side[i];
    if (piece.sequence < 0) {
      if (LeftOut(side, i, kept_last)) continue;
      for (const int32_t id : piece.ids) AppendSpecial(id, piece.type_id, &out);
    } else if (piece.sequence == 0) {
      AppendText(a, first_a, kept.first, piece.type_id, 0, &out);
    } else {
      AppendText(*b, first_b, kept.second, piece.type_id, 1, &out);
    }
  }
  return out;
}

absl::Status Tokenizer::Pad(Encoding* enc, int length) const {
  const size_t have = enc->input_ids.size();
  if (length <= 0 || have >= static_cast<size_t>(length)) return absl::OkStatus();
  if (ids_.pad < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(descriptor_->name, " tokenizer has no pad token to pad with"));
  }
  const size_t n = static_cast<size_t>(length) - have;
  const auto pos = [&](auto& v) { return pads_left() ? v.begin() : v.end(); };
  enc->input_ids.insert(pos(enc->input_ids), n, ids_.pad);
  enc->token_type_ids.insert(pos(enc->token_type_ids), n, pad_token_type_id());
  enc->attention_mask.insert(pos(enc->attention_mask), n, 0);
  enc->offsets.insert(pos(enc->offsets), n, std::pair<int32_t, int32_t>{0, 0});
  enc->sequence_ids.insert(pos(enc->sequence_ids), n, int8_t{-1});
  return absl::OkStatus();
}

}  // namespace relserve
