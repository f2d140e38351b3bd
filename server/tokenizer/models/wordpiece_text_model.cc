#include "server/tokenizer/models/wordpiece_text_model.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/text/unicode_chars.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

// BertTokenizer's _run_split_on_punc: each punctuation character is a word of its own.
void SplitOnPunctuation(const MappedText& word, std::vector<MappedText>* out) {
  size_t start = 0;
  bool in_run = false;
  word.ForEachChar([&](char32_t c, size_t b, size_t e) {
    if (unicode::IsBertPunctuation(c)) {
      if (in_run) out->push_back(word.Substr(start, b));
      out->push_back(word.Substr(b, e));
      in_run = false;
    } else if (!in_run) {
      start = b;
      in_run = true;
    }
  });
  if (in_run) out->push_back(word.Substr(start, word.size()));
}

}  // namespace

absl::StatusOr<WordPieceVocab> WordPieceVocab::Parse(std::string_view contents,
                                                     const std::string& source) {
  WordPieceVocab vocab;
  size_t start = 0;
  while (start < contents.size()) {
    size_t end = contents.find_first_of("\r\n", start);
    if (end == std::string_view::npos) end = contents.size();
    const std::string_view line = contents.substr(start, end - start);
    if (auto error = FindInvalidUtf8(line); error.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": line ", vocab.tokens_.size() + 1,
                                                     " is not UTF-8 (", error->reason, ")"));
    }
    const int id = static_cast<int>(vocab.tokens_.size());
    vocab.tokens_.emplace_back(line);
    vocab.ids_[vocab.tokens_.back()] = id;
    if (end == contents.size()) break;
    // "\r\n" ends one line, as a lone "\n" or "\r" does (Python's universal newlines).
    start = end + 1;
    if (contents[end] == '\r' && start < contents.size() && contents[start] == '\n') ++start;
  }
  return vocab;
}

WordPieceVocab WordPieceVocab::FromTokens(std::vector<std::string> tokens) {
  WordPieceVocab vocab;
  vocab.tokens_ = std::move(tokens);
  for (size_t id = 0; id < vocab.tokens_.size(); ++id) {
    vocab.ids_[vocab.tokens_[id]] = static_cast<int>(id);
  }
  return vocab;
}

absl::StatusOr<WordPieceVocab> WordPieceVocab::Load(const std::string& path) {
  if (IsDirectory(path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a vocabulary"));
  }
  if (!FileExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such vocabulary file"));
  ASSIGN_OR_RETURN(std::string contents, ReadFileToString(path));
  return Parse(contents, path);
}

int WordPieceVocab::Find(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<MappedText> WordPieceTextModel::BasicWords(const MappedText& text) const {
  // _clean_text and _tokenize_chinese_chars.
  MappedText cleaned;
  text.ForEachChar([&](char32_t c, size_t b, size_t e) {
    if (c == 0 || c == 0xFFFD || unicode::IsBertControl(c)) return;
    const auto [begin, end] = text.Span(b, e);
    if (unicode::IsBertWhitespace(c)) {
      cleaned.Append(' ', begin, end);
    } else if (options_.tokenize_chinese_chars && unicode::IsCjkIdeograph(c)) {
      cleaned.Append(' ', begin, begin);
      cleaned.AppendRange(text, b, e);
      cleaned.Append(' ', end, end);
    } else {
      cleaned.AppendRange(text, b, e);
    }
  });
  const bool strip_accents = options_.do_lower_case ? options_.strip_accents.value_or(true)
                                                    : options_.strip_accents.value_or(false);
  auto kept_whole = [&](const std::string& word) {
    return options_.never_split.count(word) > 0 || options_.special_tokens.count(word) > 0;
  };
  std::vector<MappedText> words;
  for (MappedText& word : SplitOnWhiteSpace(Normalize(cleaned, NormalizationForm::kNfc))) {
    if (kept_whole(word.text())) {
      words.push_back(std::move(word));
      continue;
    }
    if (options_.do_lower_case) word = LowercaseChars(word);
    if (strip_accents) {
      word = FilterChars(Normalize(word, NormalizationForm::kNfd),
                         [](char32_t c) { return !unicode::IsNonspacingMark(c); });
    }
    if (kept_whole(word.text())) {
      if (!word.empty()) words.push_back(std::move(word));
      continue;
    }
    SplitOnPunctuation(word, &words);
  }
  return words;
}

void WordPieceTextModel::AddPieces(const MappedText& word, std::vector<TokenSpan>* out) const {
  std::vector<size_t> starts;  // byte offset of each character, then the end
  word.ForEachChar([&](char32_t, size_t b, size_t) { starts.push_back(b); });
  const size_t n = starts.size();
  starts.push_back(word.size());
  const auto [word_begin, word_end] = word.Span(0, word.size());
  if (n > static_cast<size_t>(options_.max_input_chars_per_word)) {
    out->push_back(TokenSpan{-1, word_begin, word_end});
    return;
  }
  const size_t first = out->size();
  std::string candidate;
  size_t start = 0;
  while (start < n) {
    int id = -1;
    size_t end = n;
    for (; end > start; --end) {
      candidate.assign(start > 0 ? "##" : "");
      candidate.append(word.text(), starts[start], starts[end] - starts[start]);
      id = vocab_.Find(candidate);
      if (id >= 0) break;
    }
    if (id < 0) {
      out->resize(first);
      out->push_back(TokenSpan{-1, word_begin, word_end});
      return;
    }
    const auto [begin, end_byte] = word.Span(starts[start], starts[end]);
    out->push_back(TokenSpan{id, begin, end_byte});
    start = end;
  }
}

absl::StatusOr<std::vector<TokenSpan>> WordPieceTextModel::Tokenize(const MappedText& text) const {
  std::vector<TokenSpan> out;
  if (!options_.do_basic_tokenize) {
    for (const MappedText& word : SplitOnWhiteSpace(text)) AddPieces(word, &out);
    return out;
  }
  for (const MappedText& word : BasicWords(text)) {
    if (options_.never_split.count(word.text()) > 0) {
      const auto [begin, end] = word.Span(0, word.size());
      out.push_back(TokenSpan{vocab_.Find(word.text()), begin, end});
    } else {
      AddPieces(word, &out);
    }
  }
  return out;
}

}  // namespace relserve
