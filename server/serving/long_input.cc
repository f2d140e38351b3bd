#include "server/serving/long_input.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"
#include "server/util/status_macros.h"

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

// The tokens of `enc` whose sequence id is `sequence`: [first, last], or first -1 when none.
std::pair<int, int> RunOf(const Encoding& enc, int sequence) {
  int first = -1, last = -1;
  for (int i = 0; i < static_cast<int>(enc.input_ids.size()); ++i) {
    if (enc.sequence_ids[i] != sequence) continue;
    if (first < 0) first = i;
    last = i;
  }
  return {first, last};
}

// The windows of one run of `enc`'s tokens, [first, last]: every window holds the tokens before
// the run, its first `keep` tokens, `room` more of it (each window repeating the last `overlap`
// of the one before) and the tokens after it; at most `max_windows` of them.
absl::StatusOr<std::vector<EncodedInput>> WindowsOfRun(const Encoding& enc, int first, int last, int keep, int room,
                                                       int overlap, int max_windows, const InferenceBackend& backend,
                                                       const std::string& field) {
  const int run = last - first + 1;
  const int n = static_cast<int>(enc.input_ids.size());
  const int step = room - overlap;
  std::vector<EncodedInput> windows;
  for (int start = keep; static_cast<int>(windows.size()) < max_windows; start += step) {
    const int end = std::min(start + room, run);
    EncodedInput w;
    w.sequence.input_ids.reserve(n - run + keep + room);
    AppendRange(enc, 0, first, &w);
    AppendRange(enc, first, first + keep, &w);
    AppendRange(enc, first + start, first + end, &w);
    AppendRange(enc, last + 1, n, &w);
    if (absl::Status s = backend.Validate(w.sequence); !s.ok()) {
      return Field(absl::StrCat(field, " window ", windows.size()), s);
    }
    windows.push_back(std::move(w));
    if (end == run) break;
  }
  return windows;
}

absl::Status CheckOverlap(int overlap, int room, const char* name) {
  if (overlap >= 0 && overlap <= room / 2) return absl::OkStatus();
  return FieldError(FieldErrorKind::kInvalid, name,
                    absl::StrCat(name, " ", overlap, " is outside [0, ", room / 2, "]: at most half of the ", room,
                                 " text tokens a window of this model holds"));
}

EncodedInput FromWholeEncoding(Encoding enc) {
  EncodedInput one;
  one.sequence.input_ids = std::move(enc.input_ids);
  one.sequence.token_type_ids = std::move(enc.token_type_ids);
  one.offsets = std::move(enc.offsets);
  return one;
}

}  // namespace

int64_t WindowCount(int64_t text_tokens, int keep, int room, int overlap) {
  if (text_tokens <= keep + room) return 1;
  const int64_t step = room - overlap;
  return 1 + (text_tokens - keep - room + step - 1) / step;
}

absl::StatusOr<std::vector<EncodedInput>> EncodePairWindows(const std::string& query, const std::string& document,
                                                            const std::string& field, const Tokenizer& tokenizer,
                                                            const InferenceBackend& backend, int max_length,
                                                            int overlap, int max_windows) {
  if (query.empty() || document.empty()) {
    return FieldError(FieldErrorKind::kEmpty, field, absl::StrCat(field, ": both texts of a pair must be non-empty"));
  }
  // Read as far as max_windows windows can hold: the longer text (the document) is cut past
  // that, which drops only windows beyond the last one kept.
  TokenizeOptions whole;
  whole.max_length = static_cast<int>(
      std::min<int64_t>(kWholeTextLength, int64_t{max_length} * (int64_t{std::max(1, max_windows)} + 1)));
  whole.truncate = true;
  absl::StatusOr<Encoding> enc = tokenizer.EncodePair(query, document, whole);
  if (!enc.ok()) return Field(field, enc.status());
  const int n = static_cast<int>(enc->input_ids.size());
  std::vector<EncodedInput> windows;
  if (n <= max_length) {
    windows.push_back(FromWholeEncoding(std::move(*enc)));
    if (absl::Status s = backend.Validate(windows.back().sequence); !s.ok()) return Field(field, s);
    return windows;
  }
  const auto [first, last] = RunOf(*enc, 1);
  const int document_tokens = first < 0 ? 0 : last - first + 1;
  const int room = max_length - (n - document_tokens);
  if (document_tokens == 0 || room < 1) {
    return FieldError(FieldErrorKind::kTooLong, "query", absl::StrCat(
        "query: its ", n - document_tokens, " tokens with the special tokens leave no room for ", field,
        " in the model's maximum of ", max_length, " tokens (send a shorter query)"));
  }
  if (absl::Status s = CheckOverlap(overlap, room, "chunk_overlap"); !s.ok()) return s;
  if (max_windows < 1) {
    return FieldError(FieldErrorKind::kInvalid, "max_chunks_per_doc",
                      absl::StrCat("max_chunks_per_doc ", max_windows, " must be at least 1"));
  }
  return WindowsOfRun(*enc, first, last, /*keep=*/0, room, overlap, max_windows, backend, field);
}

absl::StatusOr<std::string> FirstTokensOf(const std::string& document, const std::string& field,
                                          const Tokenizer& tokenizer, int max_tokens) {
  // Read only as far as the tokens kept, and one more to know there are more.
  TokenizeOptions whole;
  whole.max_length = static_cast<int>(
      std::min<int64_t>(kWholeTextLength, int64_t{max_tokens} + 1 + tokenizer.NumSpecialTokens(false)));
  whole.truncate = true;
  absl::StatusOr<Encoding> enc = tokenizer.Encode(document, whole);
  if (!enc.ok()) return Field(field, enc.status());
  const auto [first, last] = RunOf(*enc, 0);
  if (first < 0 || last - first + 1 <= max_tokens) return document;
  const int end = enc->offsets[first + max_tokens - 1].second;
  return document.substr(0, static_cast<size_t>(end));
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
  const auto [first, last] = RunOf(*enc, 0);
  const int text_tokens = first < 0 ? 0 : last - first + 1;
  int keep = 0;
  while (keep_leading_bytes > 0 && keep < text_tokens && enc->offsets[first + keep].second <= keep_leading_bytes) {
    ++keep;
  }
  const int specials = n - text_tokens;
  const int room = max_length - specials - keep;
  // Checked for a text that fits one window too: a longer one would be refused.
  if (room >= 2) RETURN_IF_ERROR(CheckOverlap(overlap, room, "window_overlap"));
  if (!enc->truncated && n <= max_length) {
    std::vector<EncodedInput> windows;
    windows.push_back(FromWholeEncoding(*std::move(enc)));
    if (absl::Status s = backend.Validate(windows.back().sequence); !s.ok()) return Field(field + ".text", s);
    return windows;
  }
  if (room < 1) {
    return FieldError(FieldErrorKind::kTooLong, field + ".text", absl::StrCat(
        field, ".text: the model's maximum of ", max_length, " tokens leaves no room for the text in a window beside ",
        specials, " special tokens", keep > 0 ? absl::StrCat(" and the prompt's ", keep, " tokens") : ""));
  }
  RETURN_IF_ERROR(CheckOverlap(overlap, room, "window_overlap"));
  const int64_t needed = WindowCount(text_tokens, keep, room, overlap);
  if (enc->truncated || needed > max_windows) {
    return FieldError(FieldErrorKind::kTooMany, field + ".text", absl::StrCat(
        field, ".text needs ", enc->truncated ? "more than " : "", enc->truncated ? max_windows : needed,
        " windows of the model's ", max_length, " tokens (overlapping by ", overlap, "), more than the ", max_windows,
        " this request may still compute (--max-windows-per-request): send a shorter text, fewer texts per request, "
        "or truncate instead"));
  }
  return WindowsOfRun(*enc, first, last, keep, room, overlap, max_windows, backend, field + ".text");
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

void L2Normalize(std::vector<float>* v) {
  double norm = 0;
  for (float x : *v) norm += double(x) * x;
  norm = std::sqrt(norm);
  if (norm < 1e-12) return;
  for (float& x : *v) x = static_cast<float>(x / norm);
}

bool InputWindows::windowed() const {
  for (size_t i = 0; i + 1 < first.size(); ++i) {
    if (first[i + 1] - first[i] > 1) return true;
  }
  return false;
}

Embedding MergeWindows(const InputWindows& windows, size_t input, uint32_t output_flags, bool model_normalizes,
                       int multi_vector_dim, std::vector<SequenceOutput>* outputs) {
  const size_t b = windows.first[input], n = windows.first[input + 1] - b;
  std::vector<SequenceOutput>& out = *outputs;
  Embedding e;
  e.windows = static_cast<int32_t>(n);
  if (n == 1) {
    e.values = std::move(out[b].pooled);
  } else {
    // The windows' pooled vectors before the model's normalisation, weighted by the tokens each
    // one pooled, then normalised as the model does.
    std::vector<const std::vector<float>*> pooled;
    std::vector<double> weights;
    for (size_t w = b; w < b + n; ++w) {
      const SequenceInput& s = windows.sequences[w].sequence;
      pooled.push_back(&out[w].pooled_unnormalized);
      weights.push_back(std::max<double>(static_cast<double>(s.input_ids.size()) - s.pooling_skip, 1.0));
    }
    e.values = CombineWindows(pooled, weights);
    if (model_normalizes) L2Normalize(&e.values);
  }
  std::vector<const std::vector<std::pair<int32_t, float>>*> sparse;
  for (size_t w = b; w < b + n; ++w) {
    const EncodedInput& in = windows.sequences[w];
    e.num_tokens += static_cast<int32_t>(in.sequence.input_ids.size());
    e.truncated = e.truncated || in.truncated;
    sparse.push_back(&out[w].sparse);
    if (output_flags & kOutputMultiVector) {
      SequenceOutput& o = out[w];
      e.multi_vector.insert(e.multi_vector.end(), o.multi_vector.begin(), o.multi_vector.end());
      e.multi_vector_count += o.num_vectors;
    }
  }
  if (output_flags & kOutputSparse) e.sparse = n == 1 ? std::move(out[b].sparse) : MergeSparseMax(sparse);
  if (output_flags & kOutputMultiVector) e.multi_vector_dim = multi_vector_dim;
  return e;
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
