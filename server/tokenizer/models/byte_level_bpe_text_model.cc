#include "server/tokenizer/models/byte_level_bpe_text_model.h"

#include <unicode/uchar.h>

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/text/unicode_chars.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

// Ids beyond this are refused: a vocabulary that large is a broken file, not a model.
constexpr int64_t kMaxVocabularyId = (int64_t{1} << 24) - 1;

// GPT-2's bytes_to_unicode: bytes that are printable Latin-1 stand for themselves, the others
// (controls, space, ...) for U+0100 onwards in byte order.
const std::array<std::string, 256>& ByteStandIns() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      unicode::AppendUtf8(static_cast<char32_t>(printable ? b : next++), &t[static_cast<size_t>(b)]);
    }
    return t;
  }();
  return table;
}

bool IsLetter(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}

bool IsNumber(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DECIMAL_DIGIT_NUMBER:
    case U_LETTER_NUMBER:
    case U_OTHER_NUMBER:
      return true;
    default:
      return false;
  }
}

// \s of the `regex` module: the Unicode White_Space property.
bool IsSpace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

bool IsOther(char32_t c) { return !IsSpace(c) && !IsLetter(c) && !IsNumber(c); }

}  // namespace

std::vector<std::pair<size_t, size_t>> ByteLevelPreTokenize(std::string_view text) {
  std::vector<char32_t> cps;
  std::vector<size_t> pos;
  for (size_t i = 0; i < text.size();) {
    pos.push_back(i);
    cps.push_back(unicode::DecodeUtf8(text, &i));
  }
  const size_t n = cps.size();
  pos.push_back(text.size());
  auto at = [&](size_t k) { return k < n ? cps[k] : char32_t{0}; };

  std::vector<std::pair<size_t, size_t>> out;
  size_t i = 0;
  while (i < n) {
    size_t end = i;
    // 's|'t|'re|'ve|'m|'ll|'d
    if (cps[i] == '\'') {
      const char32_t a = at(i + 1), b = at(i + 2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    //  ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
    if (end == i) {
      const size_t start = cps[i] == ' ' ? i + 1 : i;
      for (bool (*in_class)(char32_t) : {&IsLetter, &IsNumber, &IsOther}) {
        size_t e = start;
        while (e < n && in_class(cps[e])) ++e;
        if (e > start) {
          end = e;
          break;
        }
      }
    }
    // \s+(?!\S)|\s+: a run of white space, less its last character when text follows it.
    if (end == i) {
      size_t run = i;
      while (run < n && IsSpace(cps[run])) ++run;
      end = (run < n && run - i >= 2) ? run - 1 : run;
    }
    if (end == i) end = i + 1;  // unreachable: every character is in one of the classes
    out.emplace_back(pos[i], pos[end]);
    i = end;
  }
  return out;
}

absl::StatusOr<ByteLevelBpeVocab> ByteLevelBpeVocab::Parse(const std::string& vocab_json,
                                                           std::string_view merges,
                                                           const std::string& vocab_source) {
  ASSIGN_OR_RETURN(const nlohmann::json json, ParseJson(vocab_json, vocab_source));
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(vocab_source, ": not a JSON object of token: id"));
  }
  ByteLevelBpeVocab vocab;
  for (const auto& [token, id] : json.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxVocabularyId) {
      return absl::InvalidArgumentError(absl::StrCat(vocab_source, ": \"", token, "\" must be an id in [0, ",
                                                     kMaxVocabularyId, "], got ", JsonValueForMessage(id)));
    }
    const auto index = static_cast<size_t>(id.get<int64_t>());
    if (vocab.tokens_.size() <= index) vocab.tokens_.resize(index + 1);
    vocab.tokens_[index] = token;
    vocab.ids_[token] = static_cast<int>(index);
  }

  // merges_handle.read().split("\n")[1:-1]: the first line is "#version: ...", and the last
  // piece follows the final line end.
  std::vector<std::string_view> lines;
  for (size_t start = 0;;) {
    const size_t end = merges.find('\n', start);
    lines.push_back(merges.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  for (size_t k = 1; k + 1 < lines.size(); ++k) {
    const std::string_view line = lines[k];
    std::vector<std::string> parts;
    std::string part;
    for (size_t i = 0; i < line.size();) {
      const size_t b = i;
      const char32_t c = unicode::DecodeUtf8(line, &i);
      if (unicode::IsPythonSpace(c)) {
        if (!part.empty()) parts.push_back(std::move(part));
        part.clear();
      } else {
        part.append(line.substr(b, i - b));
      }
    }
    if (!part.empty()) parts.push_back(std::move(part));
    // Lines that are not a pair get a rank but never match one.
    if (parts.size() == 2) vocab.ranks_[parts[0] + " " + parts[1]] = static_cast<int>(k - 1);
  }
  return vocab;
}

ByteLevelBpeVocab ByteLevelBpeVocab::FromParts(
    const std::vector<std::pair<std::string, int32_t>>& tokens,
    const std::vector<std::pair<std::string, std::string>>& merges) {
  ByteLevelBpeVocab vocab;
  for (const auto& [token, id] : tokens) {
    const auto index = static_cast<size_t>(id);
    if (vocab.tokens_.size() <= index) vocab.tokens_.resize(index + 1);
    vocab.tokens_[index] = token;
    vocab.ids_[token] = id;
  }
  for (size_t k = 0; k < merges.size(); ++k) {
    vocab.ranks_[merges[k].first + " " + merges[k].second] = static_cast<int>(k);
  }
  return vocab;
}

absl::StatusOr<ByteLevelBpeVocab> ByteLevelBpeVocab::Load(const std::string& vocab_path,
                                                          const std::string& merges_path) {
  ASSIGN_OR_RETURN(const std::string vocab_json, ReadFileToString(vocab_path));
  ASSIGN_OR_RETURN(const std::string merges, ReadFileToString(merges_path));
  if (auto error = FindInvalidUtf8(merges); error.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(merges_path, ": not UTF-8 at byte offset ", error->offset,
                                                   " (", error->reason, ")"));
  }
  return Parse(vocab_json, merges, vocab_path);
}

int ByteLevelBpeVocab::Find(const std::string& token) const {
  auto it = ids_.find(token);
  return it == ids_.end() ? -1 : it->second;
}

int ByteLevelBpeVocab::Rank(const std::string& first, const std::string& second) const {
  auto it = ranks_.find(absl::StrCat(first, " ", second));
  return it == ranks_.end() ? -1 : it->second;
}

absl::StatusOr<std::vector<TokenSpan>> ByteLevelBpeTextModel::Tokenize(const MappedText& text) const {
  const std::array<std::string, 256>& stand_ins = ByteStandIns();
  const std::string& s = text.text();
  std::vector<TokenSpan> out;
  struct Symbol {
    std::string text;
    size_t begin, end;  // bytes of s
    int prev, next;
    bool alive;
  };
  for (const auto& [b, e] : ByteLevelPreTokenize(s)) {
    std::vector<Symbol> symbols;
    for (size_t k = b; k < e; ++k) {
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({stand_ins[static_cast<unsigned char>(s[k])], k, k + 1, index - 1,
                         k + 1 < e ? index + 1 : -1, true});
    }
    // The pair of lowest rank merges first, the leftmost among equals: what the slow
    // tokenizer's loop over whole-word passes gives when merges only build on earlier ones.
    using Entry = std::tuple<int, int>;  // rank, left symbol
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
    auto push = [&](int left) {
      if (left < 0 || symbols[static_cast<size_t>(left)].next < 0) return;
      const Symbol& a = symbols[static_cast<size_t>(left)];
      const int rank = vocab_.Rank(a.text, symbols[static_cast<size_t>(a.next)].text);
      if (rank >= 0) queue.emplace(rank, left);
    };
    for (int k = 0; k < static_cast<int>(symbols.size()); ++k) push(k);
    while (!queue.empty()) {
      const auto [rank, left] = queue.top();
      queue.pop();
      Symbol& a = symbols[static_cast<size_t>(left)];
      if (!a.alive || a.next < 0) continue;
      Symbol& b_sym = symbols[static_cast<size_t>(a.next)];
      if (vocab_.Rank(a.text, b_sym.text) != rank) continue;  // a pair that has changed since
      a.text += b_sym.text;
      a.end = b_sym.end;
      b_sym.alive = false;
      a.next = b_sym.next;
      if (a.next >= 0) symbols[static_cast<size_t>(a.next)].prev = left;
      push(a.prev);
      push(left);
    }
    for (const Symbol& symbol : symbols) {
      if (!symbol.alive) continue;
      const auto [begin, end] = text.Span(symbol.begin, symbol.end);
      out.push_back(TokenSpan{vocab_.Find(symbol.text), begin, end});
    }
  }
  return out;
}

}  // namespace relserve
