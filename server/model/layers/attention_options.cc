#include "server/model/layers/attention_options.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

constexpr std::pair<std::string_view, SdpaBackend> kBackends[] = {
    {"default", SdpaBackend::kDefault}, {"auto", SdpaBackend::kAuto},   {"cudnn", SdpaBackend::kCudnn},
    {"efficient", SdpaBackend::kEfficient}, {"flash", SdpaBackend::kFlash}, {"math", SdpaBackend::kMath},
};

}  // namespace

absl::StatusOr<Int8Attention> ParseInt8Attention(std::string_view name) {
  if (name == "auto") return Int8Attention::kAuto;
  if (name == "float32") return Int8Attention::kFloat32;
  if (name == "bfloat16") return Int8Attention::kBfloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(name), "\" is not an int8 attention precision (known: auto, float32, bfloat16)"));
}

std::string_view Int8AttentionName(Int8Attention value) {
  switch (value) {
    case Int8Attention::kAuto: return "auto";
    case Int8Attention::kFloat32: return "float32";
    case Int8Attention::kBfloat16: return "bfloat16";
  }
  return "auto";
}

bool CpuHasBfloat16Products() {
#if defined(__x86_64__) || defined(__i386__)
  // Every CPU with AMX-BF16 has AVX512-BF16 too.
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

absl::StatusOr<DeviceAttention> ParseDeviceAttention(std::string_view name) {
  if (name.empty() || name == "bias") return DeviceAttention::kBias;
  if (name == "tables") return DeviceAttention::kTables;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(name), "\" is not an attention path: expected \"bias\" or \"tables\""));
}

absl::StatusOr<AttentionOptions> ParseAttentionOptions(std::string_view value) {
  AttentionOptions options;
  const size_t colon = value.find(':');
  absl::StatusOr<DeviceAttention> path = ParseDeviceAttention(value.substr(0, colon));
  if (!path.ok()) return path.status();
  options.path = *path;
  if (colon == std::string_view::npos) return options;
  const std::string_view backend = value.substr(colon + 1);
  for (const auto& [name, b] : kBackends) {
    if (backend == name) {
      options.sdpa = b;
      return options;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("\"", std::string(backend),
                                                 "\" is not an SDPA backend: expected default, auto, cudnn, "
                                                 "efficient, flash or math (as in tables:math)"));
}

std::string AttentionOptionsName(const AttentionOptions& options) {
  std::string name = options.path == DeviceAttention::kTables ? "tables" : "bias";
  for (const auto& [backend, b] : kBackends) {
    if (b == options.sdpa && b != SdpaBackend::kDefault) name += ":" + std::string(backend);
  }
  return name;
}

}  // namespace relserve
