// Fuzzes the pytorch_model.bin reader (server/checkpoint), which reads files nobody vetted: the
// input as a whole file (ParsePytorchBin: zip records, CRCs, byteorder, storages, views) and as
// the bare data.pkl (ReadStateDictPickle), since inside a valid archive every mutation of the
// pickle would only meet its CRC. Beyond not crashing: only the two documented error codes, and
// whatever is accepted describes views whose bytes lie in the input or in the reader's copies.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "server/checkpoint/pytorch_bin_file.h"
#include "server/checkpoint/state_dict_pickle.h"
#include "server/safetensors/dtype.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

void CheckCode(const absl::Status& status) {
  const absl::StatusCode code = status.code();
  FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss,
             "unexpected status %s", status.ToString().c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = relserve::ParsePytorchBin(data, size, "fuzz.bin");
  if (!file.ok()) {
    CheckCode(file.status());
  } else {
    for (const relserve::TensorView& v : (*file)->tensors) {
      FUZZ_CHECK(v.nbytes == static_cast<size_t>(v.numel()) * relserve::StDTypeSize(v.dtype),
                 "tensor '%s': %zu bytes for its shape", v.name.c_str(), v.nbytes);
      bool inside = v.nbytes == 0 || (v.data >= data && v.data + v.nbytes <= data + size);
      for (const auto& copy : (*file)->copies) {
        inside = inside || (v.data >= copy.data() && v.data + v.nbytes <= copy.data() + copy.size());
      }
      FUZZ_CHECK(inside, "tensor '%s' points outside the input and the copies", v.name.c_str());
    }
  }

  auto dict = relserve::ReadStateDictPickle(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.pkl");
  if (!dict.ok()) {
    CheckCode(dict.status());
    return 0;
  }
  for (const relserve::PickledTensor& t : dict->tensors) {
    FUZZ_CHECK(t.storage < dict->storages.size(), "tensor '%s' names storage %zu of %zu", t.name.c_str(), t.storage,
               dict->storages.size());
    FUZZ_CHECK(t.shape.size() == t.stride.size(), "tensor '%s': sizes and strides differ in rank", t.name.c_str());
    int64_t last = t.offset;
    bool empty = false;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      FUZZ_CHECK(t.shape[i] >= 0 && t.stride[i] >= 0, "tensor '%s': a negative size or stride", t.name.c_str());
      empty = empty || t.shape[i] == 0;
      if (t.shape[i] > 0) last += (t.shape[i] - 1) * t.stride[i];
    }
    const int64_t numel = dict->storages[t.storage].numel;
    FUZZ_CHECK(empty ? t.offset <= numel : last < numel, "tensor '%s' reaches past its storage", t.name.c_str());
  }
  return 0;
}
