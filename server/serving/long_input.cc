#include "server/serving/long_input.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"

namespace relserve {
namespace {

// Far more tokens than any text can make (texts are capped well below 2^30 bytes).
constexpr int kWholeTextLength = 1 << 30;

absl::Status Field(const std::string& field, const absl::Status& s) { return PrefixFieldError(field, s); }

void AppendRange(const Encoding& enc, int begin, int end, EncodedInput* out) {
  for (int i = begin; i < end; ++i) {
    out->sequence.input_ids.push_back(enc.input_ids[i]);
    out->sequence.token_type_ids.push_back(enc.token_type_ids[i]);
    out->offsets.push_back(enc.offsets[i]);
  }
}

}  // namespace

int64_t WindowCount(int64_t text_tokens, int keep, int room, int overlap) {
  if (text_tokens <= keep + room) return 1;
  const int64_t step = room - overlap;
  return 1 + (text_tokens - keep - room + step - 1) / step;
}

absl::StatusOr<std::vector<EncodedInput>> EncodeTextWindows(const std::string& text, const std::string& field,
                                                            const Tokenizer& tokenizer,
                                                            const InferenceBackend& backend, int max_length,
                                                            int overlap, int keep_leading_bytes, int max_windows,
                                                            std::function<absl::Status()> keep_going) {
  if (text.empty()) return FieldError(FieldErrorKind::kEmpty, field + ".text", field + ".text is empty");
  if (overlap < 0) {
    return FieldError(FieldErrorKind::kInvalid, "window_overlap",
                      absl::StrCat("window_overlap ", overlap, " is negative"));
  }
  // Read as far as `max_windows` windows can hold (and one token more, to know there is more):
  // at most max_length - specials text tokens in the first, max_length - specials - overlap
  // more in each next one.
  const int specials_at_most = tokenizer.NumSpecialTokens(false);
  const int64_t first_room = std::max(1, max_length - specials_at_most);
  const int64_t holds = first_room + int64_t{std::max(0, max_windows - 1)} * std::max<int64_t>(1, first_room - overlap);
  TokenizeOptions whole;
  whole.max_length = static_cast<int>(std::min<int64_t>(kWholeTextLength, holds + specials_at_most + 1));
  whole.truncate = true;
  whole.keep_going = std::move(keep_going);
  absl::StatusOr<Encoding> enc = tokenizer.Encode(text, whole);
  if (!enc.ok()) return Field(field + ".text", enc.status());
  const int n = static_cast<int>(enc->input_ids.size());
  // The template's special tokens before and after the text (sequence id -1), and the text's
  // own tokens between them (special tokens written in the text included).
  int first = -1, last = -1;
  for (int i = 0; i < n; ++i) {
    if (enc->sequence_ids[i] != 0) continue;
    if (first < 0) first = i;
    last = i;
  }
  const int text_tokens = first < 0 ? 0 : last - first + 1;
  int keep = 0;
  while (keep_leading_bytes > 0 && keep < text_tokens && enc->offsets[first + keep].second <= keep_leading_bytes) {
    ++keep;
  }
  const int specials = n - text_tokens;
  const int room = max_length - specials - keep;
  if (room >= 2 && overlap > room / 2) {
    return FieldError(FieldErrorKind::kInvalid, "window_overlap",
                      absl::StrCat("window_overlap ", overlap, " is outside [0, ", room / 2,
                                   "]: at most half of the ", room, " text tokens a window of this model holds"));
  }
  std::vector<EncodedInput> windows;
  if (!enc->truncated && n <= max_length) {
    EncodedInput one;
    one.sequence.input_ids = std::move(enc->input_ids);
    one.sequence.token_type_ids = std::move(enc->token_type_ids);
    one.offsets = std::move(enc->offsets);
    if (absl::Status s = backend.Validate(one.sequence); !s.ok()) return Field(field + ".text", s);
    windows.push_back(std::move(one));
    return windows;
  }
  if (room < 1) {
    return FieldError(FieldErrorKind::kTooLong, field + ".text", absl::StrCat(
        field, ".text: the model's maximum of ", max_length, " tokens leaves no room for the text in a window beside ",
        specials, " special tokens", keep > 0 ? absl::StrCat(" and the prompt's ", keep, " tokens") : ""));
  }
  if (overlap > room / 2) {
    return FieldError(FieldErrorKind::kInvalid, "window_overlap",
                      absl::StrCat("window_overlap ", overlap, " is outside [0, ", room / 2,
                                   "]: at most half of the ", room, " text tokens a window of this model holds"));
  }
  const int64_t needed = WindowCount(text_tokens, keep, room, overlap);
  if (enc->truncated || needed > max_windows) {
    return FieldError(FieldErrorKind::kTooMany, field + ".text", absl::StrCat(
        field, ".text needs ", enc->truncated ? "more than " : "", enc->truncated ? max_windows : needed,
        " windows of the model's ", max_length, " tokens (overlapping by ", overlap, "), more than the ", max_windows,
        " this request may still compute (--max-windows-per-request): send a shorter text, fewer texts per request, "
        "or truncate instead"));
  }
  const int step = room - overlap;
  for (int start = keep;; start += step) {
    const int end = std::min(start + room, text_tokens);
    EncodedInput w;
    w.sequence.input_ids.reserve(max_length);
    AppendRange(*enc, 0, first, &w);
    AppendRange(*enc, first, first + keep, &w);
    AppendRange(*enc, first + start, first + end, &w);
    AppendRange(*enc, last + 1, n, &w);
    if (absl::Status s = backend.Validate(w.sequence); !s.ok()) {
      return Field(absl::StrCat(field, ".text window ", windows.size()), s);
    }
    windows.push_back(std::move(w));
    if (end == text_tokens) break;
  }
  return windows;
}

std::vector<float> CombineWindows(const std::vector<const std::vector<float>*>& pooled,
                                  const std::vector<double>& weights) {
  if (pooled.empty()) return {};
  std::vector<double> sum(pooled[0]->size(), 0.0);
  double total = 0;
  for (size_t w = 0; w < pooled.size(); ++w) {
    for (size_t j = 0; j < sum.size(); ++j) sum[j] += weights[w] * (*pooled[w])[j];
    total += weights[w];
  }
  std::vector<float> out(sum.size());
  for (size_t j = 0; j < sum.size(); ++j) out[j] = static_cast<float>(sum[j] / total);
  return out;
}

std::vector<std::pair<int32_t, float>> MergeSparseMax(
    const std::vector<const std::vector<std::pair<int32_t, float>>*>& parts) {
  std::vector<std::pair<int32_t, float>> all;
  for (const auto* p : parts) all.insert(all.end(), p->begin(), p->end());
  std::sort(all.begin(), all.end());
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [id, weight] : all) {
    if (!out.empty() && out.back().first == id) {
      out.back().second = std::max(out.back().second, weight);
    } else {
      out.emplace_back(id, weight);
    }
  }
  return out;
}

}  // namespace relserve
