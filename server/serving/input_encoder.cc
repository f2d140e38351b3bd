#include "server/serving/input_encoder.h"

#include "absl/strings/str_cat.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"

namespace relserve {
namespace {

absl::Status Field(const std::string& field, const absl::Status& s) { return PrefixFieldError(field, s); }

absl::StatusOr<EncodedInput> FromEncoding(absl::StatusOr<Encoding> enc, const std::string& field,
                                          const InferenceBackend& backend, bool validate) {
  if (!enc.ok()) return Field(field, enc.status());
  EncodedInput out;
  out.sequence.input_ids = std::move(enc->input_ids);
  out.sequence.token_type_ids = std::move(enc->token_type_ids);
  out.offsets = std::move(enc->offsets);
  out.special.reserve(enc->sequence_ids.size());
  for (int8_t sequence : enc->sequence_ids) out.special.push_back(sequence < 0);
  out.truncated = enc->truncated;
  // Refused here, on its own, rather than failing the batch it would join.
  if (!validate) return out;
  if (absl::Status s = backend.Validate(out.sequence); !s.ok()) return Field(field, s);
  return out;
}

absl::Status NeedTokenizer(const Tokenizer* tokenizer, const std::string& field) {
  if (tokenizer != nullptr) return absl::OkStatus();
  return WithFieldError(absl::FailedPreconditionError(absl::StrCat(
                            field, ": the model has no tokenizer; send token ids (Input.tokens) instead of text")),
                        FieldErrorKind::kInvalid, field);
}

// A whole text is tokenized against a length no text reaches (16 MiB of text cannot hold a
// billion tokens), so it is neither cut nor refused.
constexpr int kWholeTextLength = 1 << 30;

TokenizeOptions Options(const InputLimits& limits) {
  TokenizeOptions o = limits.truncation;
  if (limits.whole_text) {
    o.max_length = kWholeTextLength;
    o.truncate = false;
  }
  return o;
}

}  // namespace

absl::StatusOr<EncodedInput> EncodeInput(const Input& input, const std::string& field, const Tokenizer* tokenizer,
                                         const InferenceBackend& backend, const InputLimits& limits) {
  switch (input.kind) {
    case Input::Kind::kText: {
      if (input.text.empty()) return FieldError(FieldErrorKind::kEmpty, field + ".text", field + ".text is empty");
      if (absl::Status s = NeedTokenizer(tokenizer, field); !s.ok()) return s;
      return FromEncoding(tokenizer->Encode(input.text, Options(limits)), field + ".text", backend,
                          !limits.whole_text);
    }
    case Input::Kind::kPair:
      return EncodePair(input.first, input.second, field + ".pair", tokenizer, backend, limits);
    case Input::Kind::kTokens: {
      const TokenizeOptions& cut_to = limits.truncation;
      EncodedInput out;
      out.sequence.input_ids = input.ids;
      out.sequence.token_type_ids = input.token_type_ids;
      if (!limits.whole_text && static_cast<int>(out.sequence.input_ids.size()) > cut_to.max_length) {
        if (!cut_to.truncate) {
          return FieldError(FieldErrorKind::kTooLong, field + ".tokens",
                            absl::StrCat(field, ".tokens has ", out.sequence.input_ids.size(),
                                         " ids, more than the maximum of ", cut_to.max_length, " (set truncate to cut it)"));
        }
        // Ids are cut as they are: the special tokens they hold are not put back.
        std::vector<int32_t>& ids = out.sequence.input_ids;
        std::vector<int32_t>& types = out.sequence.token_type_ids;
        if (cut_to.direction == TruncationDirection::kLeft) {
          const auto cut = static_cast<std::ptrdiff_t>(ids.size()) - cut_to.max_length;
          if (types.size() == ids.size()) types.erase(types.begin(), types.begin() + cut);
          ids.erase(ids.begin(), ids.begin() + cut);
        } else {
          ids.resize(cut_to.max_length);
          if (types.size() > ids.size()) types.resize(cut_to.max_length);
        }
        out.truncated = true;
      }
      out.offsets.assign(out.sequence.input_ids.size(), {0, 0});
      if (limits.whole_text) return out;
      if (absl::Status s = backend.Validate(out.sequence); !s.ok()) return Field(field + ".tokens", s);
      return out;
    }
    case Input::Kind::kEmpty:
      break;
  }
  return FieldError(FieldErrorKind::kEmpty, field, absl::StrCat(field, " is empty: set text, pair or tokens"));
}

absl::StatusOr<EncodedInput> EncodePair(const std::string& first, const std::string& second, const std::string& field,
                                        const Tokenizer* tokenizer, const InferenceBackend& backend,
                                        const InputLimits& limits) {
  if (first.empty() || second.empty()) {
    return FieldError(FieldErrorKind::kEmpty, field, absl::StrCat(field, ": both texts of a pair must be non-empty"));
  }
  if (absl::Status s = NeedTokenizer(tokenizer, field); !s.ok()) return s;
  return FromEncoding(tokenizer->EncodePair(first, second, Options(limits)), field, backend, !limits.whole_text);
}

absl::StatusOr<Tokenizer::PairText> TokenizePairText(const std::string& text, const std::string& field,
                                                      const Tokenizer* tokenizer, const InputLimits& limits) {
  if (text.empty()) {
    return FieldError(FieldErrorKind::kEmpty, field, absl::StrCat(field, ": both texts of a pair must be non-empty"));
  }
  if (absl::Status s = NeedTokenizer(tokenizer, field); !s.ok()) return s;
  auto tokens = tokenizer->TokenizeForPairs(text, "text", Options(limits));
  if (!tokens.ok()) return Field(field, tokens.status());
  return tokens;
}

absl::StatusOr<EncodedInput> EncodeTokenizedPair(const Tokenizer::PairText& first, const Tokenizer::PairText& second,
                                                 const std::string& field, const Tokenizer& tokenizer,
                                                 const InferenceBackend& backend, const InputLimits& limits) {
  return FromEncoding(tokenizer.EncodePair(first, second, Options(limits)), field, backend, !limits.whole_text);
}

}  // namespace relserve
