#include "server/tokenizer/added_tokens.h"

#include <utility>

#include "server/tokenizer/text/unicode_chars.h"

namespace relserve {
namespace {

// Python's str.lstrip() / str.rstrip() of a segment.
MappedText StripLeft(const MappedText& text) {
  size_t from = text.size();
  bool found = false;
  text.ForEachChar([&](char32_t c, size_t b, size_t) {
    if (!found && !unicode::IsPythonSpace(c)) {
      from = b;
      found = true;
    }
  });
  return from == 0 ? text : text.Substr(from, text.size());
}

MappedText StripRight(const MappedText& text) {
  size_t to = 0;
  text.ForEachChar([&](char32_t c, size_t, size_t e) {
    if (!unicode::IsPythonSpace(c)) to = e;
  });
  return to == text.size() ? text : text.Substr(0, to);
}

MappedText Concat(const MappedText& a, const MappedText& b) {
  MappedText out = a;
  out.AppendRange(b, 0, b.size());
  return out;
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) {
  trie_.emplace_back();
  for (AddedToken& token : tokens) {
    if (token.content.empty() || Find(token.content) != nullptr) continue;
    const auto index = static_cast<int32_t>(tokens_.size());
    int32_t node = 0;
    for (const char byte : token.content) {
      const auto key = static_cast<unsigned char>(byte);
      auto it = trie_[static_cast<size_t>(node)].next.find(key);
      if (it == trie_[static_cast<size_t>(node)].next.end()) {
        trie_.emplace_back();
        const auto child = static_cast<int32_t>(trie_.size() - 1);
        trie_[static_cast<size_t>(node)].next.emplace(key, child);
        node = child;
      } else {
        node = it->second;
      }
    }
    trie_[static_cast<size_t>(node)].token = index;
    if (token.keeps_case) keep_case_.push_back(index);
    tokens_.push_back(std::move(token));
  }
}

const AddedToken* AddedTokens::Find(std::string_view content) const {
  if (trie_.empty()) return nullptr;
  int32_t node = 0;
  for (const char byte : content) {
    const auto& next = trie_[static_cast<size_t>(node)].next;
    auto it = next.find(static_cast<unsigned char>(byte));
    if (it == next.end()) return nullptr;
    node = it->second;
  }
  const int32_t token = trie_[static_cast<size_t>(node)].token;
  return token < 0 ? nullptr : &tokens_[static_cast<size_t>(token)];
}

size_t AddedTokens::LongestMatchAt(std::string_view text, size_t at, int32_t* token) const {
  size_t best = 0;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto& next = trie_[static_cast<size_t>(node)].next;
    auto it = next.find(static_cast<unsigned char>(text[i]));
    if (it == next.end()) break;
    node = it->second;
    if (trie_[static_cast<size_t>(node)].token >= 0) {
      best = i + 1 - at;
      *token = trie_[static_cast<size_t>(node)].token;
    }
  }
  return best;
}

MappedText AddedTokens::LowercaseOutside(const MappedText& text) const {
  const std::string& s = text.text();
  MappedText out;
  size_t i = 0;
  while (i < s.size()) {
    // transformers' pattern "(tok1|tok2|...)|(.+?)": alternatives tried in order.
    size_t kept = 0;
    for (const int32_t index : keep_case_) {
      const std::string& content = tokens_[static_cast<size_t>(index)].content;
      if (s.compare(i, content.size(), content) == 0) {
        kept = content.size();
        break;
      }
    }
    if (kept > 0) {
      out.AppendRange(text, i, i + kept);
      i += kept;
      continue;
    }
    const size_t b = i;
    const char32_t c = unicode::DecodeUtf8(s, &i);
    const auto [begin, end] = text.Span(b, i);
    char32_t lowered[2];
    const int n = unicode::Lowercase(c, lowered);
    for (int k = 0; k < n; ++k) out.Append(lowered[k], begin, end);
  }
  return out;
}

std::vector<AddedTokens::Segment> AddedTokens::Split(const MappedText& text) const {
  std::vector<MappedText> parts;
  const std::string& s = text.text();
  if (tokens_.empty()) {
    parts.push_back(text);
  } else {
    size_t start = 0, i = 0;
    while (i < s.size()) {
      int32_t token = -1;
      const size_t length = LongestMatchAt(s, i, &token);
      if (length == 0) {
        ++i;
        continue;
      }
      if (i > start) parts.push_back(text.Substr(start, i));
      parts.push_back(text.Substr(i, i + length));
      i += length;
      start = i;
    }
    if (start < s.size()) parts.push_back(text.Substr(start, s.size()));
  }

  // The loop of PreTrainedTokenizer.tokenize, step for step: a neighbour seen by a later token
  // is the neighbour as an earlier one left it.
  for (size_t i = 0; i < parts.size(); ++i) {
    const AddedToken* token = Find(parts[i].text());
    if (token == nullptr) continue;
    const std::string left = i > 0 ? parts[i - 1].text() : std::string();
    const std::string right = i + 1 < parts.size() ? parts[i + 1].text() : std::string();
    if (token->rstrip && !right.empty()) parts[i + 1] = StripLeft(parts[i + 1]);
    if (token->lstrip && !left.empty()) parts[i - 1] = StripRight(parts[i - 1]);
    if (token->single_word && !left.empty() && left.back() != ' ') {
      parts[i - 1] = Concat(parts[i - 1], parts[i]);
      parts[i] = MappedText();
    } else if (token->single_word && !right.empty() && right.front() != ' ') {
      parts[i + 1] = Concat(parts[i], parts[i + 1]);
      parts[i] = MappedText();
    }
  }

  std::vector<Segment> out;
  out.reserve(parts.size());
  for (MappedText& part : parts) {
    if (part.empty()) continue;
    const AddedToken* token = Find(part.text());
    out.push_back(Segment{std::move(part), token});
  }
  return out;
}

}  // namespace relserve
