#include "server/tokenizer/models/token_decoders.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "server/tokenizer/text/unicode_chars.h"

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

}  // namespace relserve
