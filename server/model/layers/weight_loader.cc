#include "server/model/layers/weight_loader.h"

#include <algorithm>
#include <cstring>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace relserve {
namespace {

absl::StatusOr<at::ScalarType> ToScalarType(StDType dtype) {
  switch (dtype) {
    case StDType::kF32: return at::kFloat;
    case StDType::kF16: return at::kHalf;
    case StDType::kBF16: return at::kBFloat16;
    case StDType::kF64: return at::kDouble;
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", std::string(StDTypeName(dtype)), " is not a floating-point type"));
}

}  // namespace

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

WeightLoader::WeightLoader(const Checkpoint& checkpoint, at::ScalarType dtype, c10::Device device)
    : checkpoint_(checkpoint), dtype_(dtype), device_(device) {}

std::string ConfigSize(const char* key, int64_t value) { return absl::StrCat("\"", key, "\" ", value); }

bool WeightLoader::Has(const std::string& name) const { return checkpoint_.Find(name) != nullptr; }

absl::Status WeightLoader::CheckConfigSize(const std::string& what, int64_t expected, const std::string& tensor,
                                           size_t dim) const {
  const TensorView* view = checkpoint_.Find(tensor);
  if (view == nullptr) return absl::OkStatus();
  if (dim < view->shape.size() && view->shape[dim] == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " in config.json disagrees with tensor \"", tensor,
                                                 "\" of shape ", ShapeString(view->shape), " (expected ", expected,
                                                 " along dimension ", dim, ")"));
}

absl::Status WeightLoader::CheckAbsent(const std::string& what, const std::string& tensor) const {
  const TensorView* view = checkpoint_.Find(tensor);
  if (view == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " in config.json disagrees with the checkpoint, which holds \"",
                                                 tensor, "\" of shape ", ShapeString(view->shape)));
}

absl::Status WeightLoader::CheckBlockCount(const std::string& what, int64_t expected, const std::string& prefix) const {
  int64_t blocks = 0;
  for (const std::string& name : checkpoint_.Names()) {
    if (!absl::StartsWith(name, prefix)) continue;
    const size_t dot = name.find('.', prefix.size());
    int64_t index = 0;
    if (dot == std::string::npos || !absl::SimpleAtoi(absl::string_view(name).substr(prefix.size(), dot - prefix.size()), &index) ||
        index < 0) {
      continue;
    }
    blocks = std::max(blocks, index + 1);
  }
  if (blocks == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " in config.json disagrees with the checkpoint, which holds ",
      blocks == 0 ? absl::StrCat("no ", prefix, "N tensors")
                  : absl::StrCat(blocks, blocks == 1 ? " block (" : " blocks (", prefix, "0 to ", prefix, blocks - 1, ")")));
}

void WeightLoader::Skip(const std::string& name) { used_.insert(name); }

absl::StatusOr<at::Tensor> WeightLoader::GetOptional(const std::string& name,
                                                      const std::vector<int64_t>& shape) {
  if (!Has(name)) return at::Tensor();
  return Get(name, shape);
}

absl::StatusOr<at::Tensor> WeightLoader::Get(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView* view = checkpoint_.Find(name);
  if (view == nullptr) {
    return absl::NotFoundError(absl::StrCat("missing tensor \"", name, "\" (expected shape ",
                                            ShapeString(shape), ")"));
  }
  if (view->shape != shape) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\" has shape ", ShapeString(view->shape),
                                                   ", expected ", ShapeString(shape)));
  }
  auto src_type = ToScalarType(view->dtype);
  if (!src_type.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor \"", name, "\": ", src_type.status().message()));
  }
  // Copy out of the mapping into an aligned tensor of the stored type, then convert: the
  // mapping's data need not be aligned, and the file stays mapped only while loading.
  at::Tensor stored = at::empty(shape, at::TensorOptions().dtype(*src_type));
  if (view->nbytes != stored.nbytes()) {
    return absl::DataLossError(absl::StrCat("tensor \"", name, "\" holds ", view->nbytes, " bytes, expected ",
                                            stored.nbytes()));
  }
  if (view->nbytes > 0) std::memcpy(stored.data_ptr(), view->data, view->nbytes);
  used_.insert(name);
  if (!device_.is_cpu()) return stored.to(device_, dtype_);  // copied as stored, converted there
  if (*src_type == dtype_) return stored;
  return stored.to(dtype_);
}

std::vector<std::string> WeightLoader::Unused(const std::vector<std::string>& ignored_prefixes) const {
  std::vector<std::string> out;
  for (const std::string& name : checkpoint_.Names()) {
    if (used_.count(name)) continue;
    bool ignored = false;
    for (const std::string& p : ignored_prefixes) ignored = ignored || absl::StartsWith(name, p);
    if (!ignored) out.push_back(name);
  }
  return out;
}

absl::Status WeightLoader::CheckNoneUnused(const std::vector<std::string>& ignored_prefixes) const {
  std::vector<std::string> unused = Unused(ignored_prefixes);
  if (unused.empty()) return absl::OkStatus();
  const size_t kShown = 10;
  std::vector<std::string> shown(unused.begin(), unused.begin() + std::min(kShown, unused.size()));
  return absl::InvalidArgumentError(absl::StrCat(
      unused.size(), " unexpected tensor(s) in the checkpoint: ", absl::StrJoin(shown, ", "),
      unused.size() > kShown ? ", ..." : ""));
}

}  // namespace relserve
