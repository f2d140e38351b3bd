#include "server/batching/warm_up.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/util/log.h"

namespace relserve {
namespace {

// What is wrong with one output vector: "NaN (3 of 32 values)", or "infinity (...)" when it
// holds infinities but no NaN; nothing when every value is finite.
std::optional<std::string> NonFinite(const std::vector<float>& values) {
  size_t nan = 0, inf = 0;
  for (float x : values) {
    if (std::isnan(x)) {
      ++nan;
    } else if (std::isinf(x)) {
      ++inf;
    }
  }
  if (nan + inf == 0) return std::nullopt;
  return absl::StrCat(nan > 0 ? "NaN" : "infinity", " (", nan + inf, " of ", values.size(), " values)");
}

// The first output of `outputs` that is not finite, as an error naming the model and the length.
absl::Status CheckFinite(const std::vector<SequenceOutput>& outputs, const ModelInfo& info, const std::string& name,
                         int length) {
  for (const SequenceOutput& out : outputs) {
    for (const auto& [values, what] : {std::pair{&out.pooled, "pooled output"}, std::pair{&out.logits, "logits"}}) {
      const std::optional<std::string> bad = NonFinite(*values);
      if (!bad) continue;
      const bool half = info.dtype == DType::kFloat16;
      return absl::FailedPreconditionError(absl::StrCat(
          "model ", name, ": warm-up at ", length, " tokens gave ", *bad, " in the ", what,
          ": its weights hold NaN or infinity, or its activations overflow",
          half ? " in float16 (try --dtype bfloat16 or float32)" : "",
          "; every request would fail (--warmup false skips this check)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WarmUp(InferenceBackend& engine, const std::string& name, int max_length,
                    const std::function<bool()>& stop) {
  const absl::Time t0 = absl::Now();
  const ModelInfo& info = engine.info();
  const int vocab = info.vocab_size;
  const uint32_t outputs = kOutputPooled | (info.labels.empty() ? 0u : uint32_t{kOutputLogits});
  for (int length : engine.WarmUpLengths(max_length)) {
    if (stop && stop()) return absl::CancelledError("start-up interrupted by a shutdown signal");
    SequenceInput s;
    s.input_ids.assign(length, std::min(5, vocab - 1));
    auto r = engine.Run({s, s}, outputs);
    if (!r.ok()) {
      return absl::Status(r.status().code(), absl::StrCat("model ", name, ": warm-up at ", length,
                                                          " tokens failed: ", r.status().message()));
    }
    if (absl::Status finite = CheckFinite(*r, info, name, length); !finite.ok()) return finite;
  }
  LogInfo(absl::StrCat("model ", name, ": warmed up to ", max_length, " tokens in ",
                       absl::FormatDuration(absl::Trunc(absl::Now() - t0, absl::Milliseconds(1)))));
  return absl::OkStatus();
}

absl::Status WarmUpWorker(InferenceBackend& backend, const std::string& name, int max_length, int max_batch_size,
                          int64_t max_batch_tokens, const std::function<bool()>& stop, int* shapes) {
  const ModelInfo& info = backend.info();
  const uint32_t outputs = kOutputPooled | (info.labels.empty() ? 0u : uint32_t{kOutputLogits});
  std::vector<int> lengths = backend.WarmUpLengths(max_length);
  std::reverse(lengths.begin(), lengths.end());  // the largest shapes first: the allocator grows once
  const std::vector<int> sizes = backend.WarmUpBatchSizes(max_batch_size);
  int run = 0;
  for (int length : lengths) {
    SequenceInput s;
    s.input_ids.assign(length, std::min(5, info.vocab_size - 1));
    for (auto size = sizes.rbegin(); size != sizes.rend(); ++size) {
      // A sequence longer than max_batch_tokens runs alone; other batches stay within it.
      if (*size > 1 && static_cast<int64_t>(*size) * length > max_batch_tokens) continue;
      if (stop && stop()) return absl::CancelledError("start-up interrupted by a shutdown signal");
      auto r = backend.Run(std::vector<SequenceInput>(*size, s), outputs);
      if (!r.ok()) {
        return absl::Status(r.status().code(), absl::StrCat("model ", name, ": warm-up at ", *size, " x ", length,
                                                            " tokens failed: ", r.status().message()));
      }
      ++run;
    }
  }
  if (shapes != nullptr) *shapes = run;
  return absl::OkStatus();
}

}  // namespace relserve
