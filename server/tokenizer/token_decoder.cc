// Tokenizer::Decode: ids back to text through the decoder of the tokenizer's family
// (models/token_decoders.h).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/added_tokens.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

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

}  // namespace

std::string Tokenizer::DecodeTokens(const std::vector<std::string>& tokens) const {
  return Utf8Lossy(descriptor_->decode(tokens));
}

std::string Tokenizer::continuing_subword_prefix() const {
  return descriptor_->json_model == VocabModelType::kWordPiece ? "##" : "";
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
  return Utf8Lossy(descriptor_->decode(tokens));
}

}  // namespace relserve
