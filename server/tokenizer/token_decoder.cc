// Tokenizer::Decode: ids back to text, as the `tokenizers` library's decoders (Metaspace,
// ByteFallback, WordPiece, ByteLevel) do for the families' tokenizer.json files.
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "server/tokenizer/added_tokens.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/text/unicode_chars.h"
#include "server/tokenizer/token_decoder.h"
#include "server/tokenizer/tokenizer.h"
#include "server/tokenizer/tokenizer_family_descriptor.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

constexpr char kMetaspace[] = "\xE2\x96\x81";  // "▁"

// SentencePiece's byte pieces: "<0x0A>" is the byte 0x0A (tokenizers' ByteFallback).
bool BytePiece(const std::string& piece, char* byte) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return false;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[static_cast<size_t>(i)];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return false;
    }
    value = value * 16 + digit;
  }
  *byte = static_cast<char>(value);
  return true;
}

// Rust's String::from_utf8_lossy, near enough: each malformed sequence (a lead byte and the
// continuation bytes after it, or one stray byte) becomes U+FFFD.
std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  for (;;) {
    const std::optional<Utf8Error> bad = FindInvalidUtf8(bytes);
    if (!bad.has_value()) break;
    out.append(bytes.substr(0, bad->offset));
    out += "\xEF\xBF\xBD";
    size_t skip = bad->offset + 1;
    const auto lead = static_cast<unsigned char>(bytes[bad->offset]);
    if (lead >= 0xC0) {
      while (skip < bytes.size() && skip < bad->offset + 4 &&
             (static_cast<unsigned char>(bytes[skip]) & 0xC0) == 0x80) {
        ++skip;
      }
    }
    bytes.remove_prefix(skip);
  }
  out.append(bytes);
  return out;
}

// GPT-2's bytes_to_unicode, read backwards: the stand-in character of each byte -> the byte.
const std::map<char32_t, char>& ByteOfStandIn() {
  static const std::map<char32_t, char> table = [] {
    std::map<char32_t, char> t;
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[printable ? static_cast<char32_t>(b) : next++] = static_cast<char>(b);
    }
    return t;
  }();
  return table;
}

}  // namespace

// tokenizers' Metaspace decoder (replacement "▁", a prefix space added when encoding): "▁" is a
// space, and the first token loses one leading space.
std::string DecodeMetaspace(const std::vector<std::string>& tokens) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    char byte;
    if (BytePiece(tokens[i], &byte)) {
      out.push_back(byte);
      continue;
    }
    std::string token = absl::StrReplaceAll(tokens[i], {{kMetaspace, " "}});
    if (i == 0 && !token.empty() && token[0] == ' ') token.erase(0, 1);
    out += token;
  }
  return out;
}

// tokenizers' WordPiece decoder with cleanup (BERT's and MPNet's tokenizer.json).
std::string DecodeWordPiece(const std::vector<std::string>& tokens) {
  std::string out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string token = tokens[i];
    if (i != 0) token = token.rfind("##", 0) == 0 ? token.substr(2) : " " + token;
    out += absl::StrReplaceAll(token, {{" .", "."},
                                       {" ?", "?"},
                                       {" !", "!"},
                                       {" ,", ","},
                                       {" ' ", "'"},
                                       {" n't", "n't"},
                                       {" 'm", "'m"},
                                       {" do not", " don't"},
                                       {" 's", "'s"},
                                       {" 've", "'ve"},
                                       {" 're", "'re"}});
  }
  return out;
}

// tokenizers' ByteLevel decoder: each token's characters back to their bytes; a token with a
// character outside the stand-ins (an added token) as its own bytes.
std::string DecodeByteLevel(const std::vector<std::string>& tokens) {
  const std::map<char32_t, char>& bytes = ByteOfStandIn();
  std::string out;
  for (const std::string& token : tokens) {
    std::string mapped;
    bool all = true;
    for (size_t i = 0; i < token.size() && all;) {
      auto it = bytes.find(unicode::DecodeUtf8(token, &i));
      if (it == bytes.end()) {
        all = false;
      } else {
        mapped.push_back(it->second);
      }
    }
    out += all ? mapped : token;
  }
  return out;
}

std::string Tokenizer::DecodeTokens(const std::vector<std::string>& tokens) const {
  return Utf8Lossy(Describe(family_).decode(tokens));
}

std::string Tokenizer::continuing_subword_prefix() const {
  return Describe(family_).json_model == TokenizerJson::ModelType::kWordPiece ? "##" : "";
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::map<int32_t, const AddedToken*> added;
  for (const AddedToken& token : added_->tokens()) added.emplace(token.id, &token);
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    auto a = added.find(id);
    const bool special = (a != added.end() && a->second->special) || id == ids_.pad || id == ids_.unk ||
                         id == ids_.cls || id == ids_.sep || id == ids_.eos || id == ids_.mask;
    if (a == added.end() && (id < 0 || id >= model_->vocab_size())) {
      return absl::InvalidArgumentError(absl::StrCat("ids[", i, "] = ", id,
                                                     " is outside the vocabulary of ", model_->vocab_size(),
                                                     " tokens and its added tokens"));
    }
    if (special && skip_special_tokens) continue;
    tokens.push_back(a != added.end() ? a->second->content : model_->IdToPiece(id));
  }
  return Utf8Lossy(Describe(family_).decode(tokens));
}

}  // namespace relserve
