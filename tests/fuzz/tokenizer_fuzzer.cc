// Fuzzes Tokenizer::Encode and EncodePair, which take text straight from RPC requests, with the
// bundled test tokenizer (tests/data/reference/tokenizer) in both families' templates, with and
// without lower-casing, truncation and max_length. Input layout:
//   byte 0: bit 0 T5 template (else DeBERTa), bit 1 a pair, bit 2 truncation off,
//           bit 3 do_lower_case
//   byte 1: max_length: 0 the default (kDefaultMaxLength), 1-250 itself, 251-255 -1 to -5
//   byte 2: where the text splits into the pair's two texts, as a fraction of 256
//   rest:   the text (any bytes; invalid UTF-8 must be refused)
// What comes back must be what the template promises: lengths within max_length, ids inside
// the vocabulary, offsets inside the text, and the same pieces EncodeRaw gives.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/file_util.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_temp_dir.h"

namespace relserve {
namespace {

constexpr int kDefaultMaxLength = 64;

std::string ModelPath() { return JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer/spm.model"); }

std::unique_ptr<Tokenizer> MustLoadModelFile(TokenizerFamily family) {
  auto tokenizer = Tokenizer::LoadModelFile(ModelPath(), family, kDefaultMaxLength);
  FUZZ_CHECK(tokenizer.ok(), "setup: %s", tokenizer.status().ToString().c_str());
  return std::move(tokenizer).value();
}

// The same model in a directory whose tokenizer_config.json turns on do_lower_case.
std::unique_ptr<Tokenizer> MustLoadLowerCasing(TokenizerFamily family) {
  static const std::string* dir = [] {
    const std::string templ = fuzz::MakeTempDir("relserve_tokenizer_fuzz");
    auto model = ReadFileToString(ModelPath());
    FUZZ_CHECK(model.ok(), "setup: %s", model.status().ToString().c_str());
    for (const char* name : {"spm.model", "spiece.model"}) {
      FUZZ_CHECK(WriteStringToFile(JoinPath(templ, name), *model).ok(), "setup: write %s", name);
    }
    FUZZ_CHECK(WriteStringToFile(JoinPath(templ, "tokenizer_config.json"),
                                 R"({"do_lower_case": true})")
                   .ok(),
               "setup: write tokenizer_config.json");
    return new std::string(templ);
  }();
  auto tokenizer = Tokenizer::Load(*dir, family, kDefaultMaxLength);
  FUZZ_CHECK(tokenizer.ok(), "setup: %s", tokenizer.status().ToString().c_str());
  // T5Tokenizer has no do_lower_case: the key is read and lowers nothing.
  FUZZ_CHECK((*tokenizer)->lower_case() == (family != TokenizerFamily::kT5),
             "setup: do_lower_case not applied as transformers applies it");
  return std::move(tokenizer).value();
}

const Tokenizer& Pick(bool t5, bool lower_case) {
  static const Tokenizer* const kTokenizers[4] = {
      MustLoadModelFile(TokenizerFamily::kDeberta).release(),
      MustLoadModelFile(TokenizerFamily::kT5).release(),
      MustLoadLowerCasing(TokenizerFamily::kDeberta).release(),
      MustLoadLowerCasing(TokenizerFamily::kT5).release(),
  };
  return *kTokenizers[(lower_case ? 2 : 0) + (t5 ? 1 : 0)];
}

// Checks the tokens of one text inside an encoding against that text's raw pieces.
void CheckText(const Tokenizer& tokenizer, const Encoding& enc, int8_t sequence,
               std::string_view text, TruncationDirection direction) {
  auto raw = tokenizer.EncodeRaw(text);
  FUZZ_CHECK(raw.ok(), "EncodeRaw refused what Encode accepted: %s",
             raw.status().ToString().c_str());
  size_t count = 0;
  for (int8_t s : enc.sequence_ids) count += s == sequence ? 1 : 0;
  FUZZ_CHECK(count <= raw->size(), "text %d has %zu tokens, more than its %zu pieces", sequence,
             count, raw->size());
  // The kept pieces are a run of the raw ones: their start (right) or their end (left).
  size_t kept = direction == TruncationDirection::kLeft ? raw->size() - count : 0;
  const size_t first = kept;
  for (size_t i = 0; i < enc.input_ids.size(); ++i) {
    if (enc.sequence_ids[i] != sequence) continue;
    const auto [begin, end] = enc.offsets[i];
    FUZZ_CHECK(0 <= begin && begin <= end && static_cast<size_t>(end) <= text.size(),
               "token %zu of text %d covers [%d, %d) of %zu bytes", i, sequence, begin, end,
               text.size());
    FUZZ_CHECK(kept < raw->size() && (*raw)[kept] == enc.input_ids[i],
               "token %zu of text %d is not raw piece %zu", i, sequence, kept);
    ++kept;
  }
  FUZZ_CHECK(enc.truncated || (first == 0 && kept == raw->size()),
             "text %d lost %zu pieces without truncation", sequence, raw->size() - count);
}

}  // namespace
}  // namespace relserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace relserve;
  if (size < 3) return 0;
  const bool t5 = data[0] & 1;
  const bool pair = data[0] & 2;
  TokenizeOptions opts;
  opts.truncate = !(data[0] & 4);
  const bool lower_case = data[0] & 8;
  opts.direction = data[0] & 16 ? TruncationDirection::kLeft : TruncationDirection::kRight;
  opts.max_length = data[1] <= 250 ? data[1] : 250 - data[1];
  const std::string_view text(reinterpret_cast<const char*>(data + 3), size - 3);
  const size_t split = text.size() * data[2] / 256;
  const std::string_view a = pair ? text.substr(0, split) : text;
  const std::string_view b = pair ? text.substr(split) : std::string_view();

  const Tokenizer& tokenizer = Pick(t5, lower_case);
  auto enc = pair ? tokenizer.EncodePair(a, b, opts) : tokenizer.Encode(a, opts);
  if (!enc.ok()) {
    FUZZ_CHECK(enc.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               enc.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(opts.max_length >= 0, "negative max_length %d accepted", opts.max_length);
  const size_t n = enc->input_ids.size();
  FUZZ_CHECK(enc->token_type_ids.size() == n && enc->attention_mask.size() == n &&
                 enc->offsets.size() == n && enc->sequence_ids.size() == n,
             "ragged encoding of %zu tokens", n);
  const int max_length = opts.max_length > 0 ? opts.max_length : kDefaultMaxLength;
  FUZZ_CHECK(n <= static_cast<size_t>(max_length), "%zu tokens, max_length %d", n, max_length);
  FUZZ_CHECK(opts.truncate || !enc->truncated, "truncated with truncation off");
  FUZZ_CHECK(enc->untruncated_length >= static_cast<int32_t>(n) &&
                 (enc->truncated || enc->untruncated_length == static_cast<int32_t>(n)),
             "untruncated_length %d for %zu tokens", enc->untruncated_length, n);
  int specials = 0;
  for (size_t i = 0; i < n; ++i) {
    FUZZ_CHECK(enc->input_ids[i] >= 0 && enc->input_ids[i] < tokenizer.vocab_size(),
               "id %d outside the vocabulary", enc->input_ids[i]);
    FUZZ_CHECK(enc->attention_mask[i] == 1, "mask %d", enc->attention_mask[i]);
    const int8_t sequence = enc->sequence_ids[i];
    FUZZ_CHECK(sequence >= -1 && sequence <= (pair ? 1 : 0), "sequence id %d", sequence);
    FUZZ_CHECK(enc->token_type_ids[i] == (!t5 && sequence == 1 ? 1 : 0) || (!t5 && sequence == -1),
               "token type %d for sequence %d", enc->token_type_ids[i], sequence);
    if (sequence == -1) ++specials;
  }
  // T5Tokenizer adds no </s> after a text whose kept tokens end with it already
  // (_add_eos_if_not_present).
  int left_out = 0;
  for (int8_t sequence = 0; t5 && sequence <= (pair ? 1 : 0); ++sequence) {
    int32_t last = -1;
    for (size_t i = 0; i < n; ++i) {
      if (enc->sequence_ids[i] == sequence) last = enc->input_ids[i];
    }
    if (last >= 0 && last == tokenizer.eos_id()) ++left_out;
  }
  FUZZ_CHECK(specials == tokenizer.NumSpecialTokens(pair) - left_out, "%d special tokens, %d </s> left out",
             specials, left_out);
  CheckText(tokenizer, *enc, 0, a, opts.direction);
  if (pair) CheckText(tokenizer, *enc, 1, b, opts.direction);
  return 0;
}
