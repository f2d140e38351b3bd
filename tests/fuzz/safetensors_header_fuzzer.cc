// Fuzzes ParseSafetensorsLayout, which reads a whole .safetensors file image (8-byte length, JSON
// header, data) that comes from a model directory nobody vetted. Beyond not crashing, whatever
// it accepts must describe views that stay inside the file and do not overlap.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/safetensors/dtype.h"
#include "server/safetensors/header_parser.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto layout = relserve::ParseSafetensorsLayout(data, size, "fuzz.safetensors");
  if (!layout.ok()) {
    const absl::StatusCode code = layout.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss,
               "unexpected status %s", layout.status().ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(layout->data_start == 8 + layout->header_bytes, "data_start %llu",
             static_cast<unsigned long long>(layout->data_start));
  FUZZ_CHECK(layout->data_start <= size, "data_start %llu past the %zu-byte input",
             static_cast<unsigned long long>(layout->data_start), size);
  const uint64_t data_size = size - layout->data_start;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const relserve::SafetensorsEntry& e : layout->tensors) {
    FUZZ_CHECK(e.begin <= e.end && e.end <= data_size, "tensor '%s' [%llu, %llu) outside %llu bytes",
               e.name.c_str(), static_cast<unsigned long long>(e.begin),
               static_cast<unsigned long long>(e.end), static_cast<unsigned long long>(data_size));
    // The byte count the views will assume: the element count, multiplied in shape order as
    // TensorView::numel() does, times the element size. The parser promised no overflow.
    int64_t numel = 1;
    for (int64_t dim : e.shape) {
      FUZZ_CHECK(dim >= 0, "tensor '%s' has a negative dimension", e.name.c_str());
      FUZZ_CHECK(!__builtin_mul_overflow(numel, dim, &numel), "tensor '%s': shape overflows",
                 e.name.c_str());
    }
    uint64_t bytes = 0;
    FUZZ_CHECK(!__builtin_mul_overflow(static_cast<uint64_t>(numel),
                                       static_cast<uint64_t>(relserve::StDTypeSize(e.dtype)), &bytes),
               "tensor '%s': byte count overflows", e.name.c_str());
    FUZZ_CHECK(bytes == e.end - e.begin, "tensor '%s' spans %llu bytes, its shape needs %llu",
               e.name.c_str(), static_cast<unsigned long long>(e.end - e.begin),
               static_cast<unsigned long long>(bytes));
    if (e.begin != e.end) spans.emplace_back(e.begin, e.end);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    FUZZ_CHECK(spans[i - 1].second <= spans[i].first, "tensors overlap at byte %llu",
               static_cast<unsigned long long>(spans[i].first));
  }
  return 0;
}
