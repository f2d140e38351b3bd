// relserve-model gemm: relserve's own GEMM against the library LibTorch calls in its place (OpenBLAS
// for float32, oneDNN for bfloat16 and int8), on the projections of an encoder's layers, the two
// timed in alternating pairs within one process, so that a shared machine's drift falls on both
// alike. One JSON line per row count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/layers/int8_linear.h"
#include "server/model/layers/int8_weight_bits.h"
#include "server/model/layers/layers.h"
#include "server/model/layers/packed_linear.h"
#include "server/tools/commands.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<std::vector<int64_t>> ParseRows(const std::string& text) {
  std::vector<int64_t> rows;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(part, &value) || value < 1) {
      return UsageError(absl::StrCat("--rows: \"", part, "\" is not an integer >= 1 (a list: 128,1024)"));
    }
    rows.push_back(value);
  }
  return rows;
}

// One side of the comparison: every layer's projections, and what runs them.
struct Side {
  std::vector<Linear> linears;
  std::string gemm;
  int int8_weight_bits = 0;  // 7 or 8 under int8, else 0
};

std::vector<Linear*> Pointers(std::vector<Linear>& linears) {
  std::vector<Linear*> out;
  for (Linear& l : linears) out.push_back(&l);
  return out;
}

// Both sides from the same random weights: relserve's kernel on `own`, the library on `library`.
absl::Status PrepareSides(const std::string& dtype, Int8WeightBits bits, int64_t max_rows, Side& own,
                          Side& library) {
  if (dtype == "float32") {
    RETURN_IF_ERROR(PackLinearsFloat32(Pointers(own.linears), max_rows));
    own.gemm = absl::StrCat("relserve-", Float32KernelName(PackedWeights::Best()));
    library.gemm = "blas";
  } else if (dtype == "bfloat16") {
    for (Side* side : {&own, &library}) {
      for (Linear& l : side->linears) {
        l.weight = l.weight.to(at::kBFloat16);
        l.bias = l.bias.to(at::kBFloat16);
      }
    }
    RETURN_IF_ERROR(PackLinearsBFloat16(Pointers(own.linears)));
    own.gemm = absl::StrCat("relserve-", BFloat16KernelName(PackedBFloat16Weights::Best()));
    library.gemm = "onednn";
  } else {
    const Int8Gemm gemm = ChooseInt8Gemm(/*own=*/true);
    if (gemm == Int8Gemm::kOneDnn) {
      return absl::FailedPreconditionError(
          "this CPU has none of AMX-INT8, AVX-512 VNNI and AVX2, so relserve's int8 GEMM does not run here (oneDNN's does)");
    }
    RETURN_IF_ERROR(EnableInt8Engine());
    // --int8-weight-bits sets the own side's; oneDNN's stay at what it takes (8 bits only with VNNI).
    ASSIGN_OR_RETURN(const int own_level, Int8WeightLevel(gemm, bits));
    ASSIGN_OR_RETURN(const int library_level, Int8WeightLevel(Int8Gemm::kOneDnn, Int8WeightBits::kAuto));
    RETURN_IF_ERROR(QuantizeLinearsInt8(Pointers(own.linears), gemm, bits));
    RETURN_IF_ERROR(QuantizeLinearsInt8(Pointers(library.linears), Int8Gemm::kOneDnn));
    own.int8_weight_bits = own_level > PackedInt8Weights::kSevenBitLevel ? 8 : 7;
    library.int8_weight_bits = library_level > PackedInt8Weights::kSevenBitLevel ? 8 : 7;
    own.gemm = Int8GemmName(gemm);
    library.gemm = "onednn-int8";
  }
  return absl::OkStatus();
}

absl::Status Prepare(const std::string& dtype, Int8WeightBits bits, int64_t max_rows, Side& own, Side& library) {
  absl::Status status = PrepareSides(dtype, bits, max_rows, own, library);
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("--dtype ", dtype, ": ", status.message()));
}

// The value at fraction q of v sorted (0.5: the median, the upper one of an even count).
double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

absl::Status RunGemm(const CliArgs& args) {
  const std::string dtype = args.String("dtype");
  // The flag table allows only the three words.
  ASSIGN_OR_RETURN(const Int8WeightBits bits, ParseInt8WeightBits(args.String("int8-weight-bits")));
  ASSIGN_OR_RETURN(const std::vector<int64_t> rows, ParseRows(args.String("rows")));
  const int64_t hidden = args.Int("hidden"), intermediate = args.Int("intermediate");
  const int64_t layers = args.Int("layers"), pairs = args.Int("pairs");
  if (args.Int("threads") > 0) SetComputeThreads(static_cast<int>(args.Int("threads")));
  c10::InferenceMode guard;

  // Each layer's projections as nn.Linear holds them ([out, in]): q, k and v fused, the attention's
  // output, the feed-forward's two. Distinct weights per layer, so that they come from memory as
  // in a forward rather than from the cache.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {3 * hidden, hidden}, {hidden, hidden}, {intermediate, hidden}, {hidden, intermediate}};
  at::manual_seed(1234);
  Side own, library;
  double flops_per_row = 0;
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (const auto& [out, in] : shapes) {
      const at::Tensor w = at::randn({out, in}) / std::sqrt(static_cast<double>(in));
      const at::Tensor b = at::randn({out}) * 0.1;
      own.linears.push_back(Linear{w.clone(), b.clone(), nullptr, nullptr});
      library.linears.push_back(Linear{w, b, nullptr, nullptr});
      flops_per_row += 2.0 * static_cast<double>(out * in);
    }
  }
  RETURN_IF_ERROR(Prepare(dtype, bits, *std::max_element(rows.begin(), rows.end()), own, library));
  const at::ScalarType activations = dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;

  using Clock = std::chrono::steady_clock;
  for (const int64_t m : rows) {
    // Inputs of both widths the projections read; the outputs are dropped.
    const at::Tensor narrow = at::randn({m, hidden}).to(activations);
    const at::Tensor wide = at::randn({m, intermediate}).to(activations);
    auto pass = [&](const Side& side) {
      const auto t0 = Clock::now();
      for (size_t i = 0; i < side.linears.size(); ++i) side.linears[i](i % 4 == 3 ? wide : narrow);
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    // Both sides' answers for the first layer, against each other.
    double max_difference = 0, max_value = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const at::Tensor& x = i == 3 ? wide : narrow;
      const at::Tensor a = own.linears[i](x).to(at::kFloat), b = library.linears[i](x).to(at::kFloat);
      max_difference = std::max(max_difference, (a - b).abs().max().item<double>());
      max_value = std::max(max_value, b.abs().max().item<double>());
    }
    pass(own);  // warm-up: the threads, the caches' first pages
    pass(library);
    std::vector<double> own_rate, library_rate, ratio;
    const double flops = flops_per_row * static_cast<double>(m);
    for (int64_t p = 0; p < pairs; ++p) {
      // Each pair in the other order than the one before, so that neither side always goes second.
      double own_s = 0, library_s = 0;
      if (p % 2 == 0) {
        own_s = pass(own);
        library_s = pass(library);
      } else {
        library_s = pass(library);
        own_s = pass(own);
      }
      own_rate.push_back(flops / own_s / 1e9);
      library_rate.push_back(flops / library_s / 1e9);
      ratio.push_back(library_s / own_s);
    }
    nlohmann::json out;
    out["dtype"] = dtype;
    out["rows"] = m;
    out["hidden"] = hidden;
    out["intermediate"] = intermediate;
    out["layers"] = layers;
    out["threads"] = at::get_num_threads();
    out["pairs"] = pairs;
    out["own_gemm"] = own.gemm;
    out["library_gemm"] = library.gemm;
    if (dtype == "int8") {
      out["own_int8_weight_bits"] = own.int8_weight_bits;
      out["library_int8_weight_bits"] = library.int8_weight_bits;
    }
    out["own_gflops_median"] = Quantile(own_rate, 0.5);
    out["library_gflops_median"] = Quantile(library_rate, 0.5);
    out["own_over_library_median"] = Quantile(ratio, 0.5);
    out["own_over_library_q1"] = Quantile(ratio, 0.25);
    out["own_over_library_q3"] = Quantile(ratio, 0.75);
    out["max_relative_difference"] = max_value > 0 ? max_difference / max_value : max_difference;
    std::cout << out.dump() << std::endl;
  }
  return absl::OkStatus();
}

}  // namespace

ModelCommand GemmCommand() {
  return {"gemm",
          "relserve's own GEMM against the library's (OpenBLAS for float32, oneDNN for bfloat16 and int8) on "
          "an encoder's projections, in alternating pairs in one process: GFLOP/s and their ratio per row "
          "count, one JSON line each. The own side runs its kernel at every --rows, also past the 192 rows "
          "above which the engine hands float32 to OpenBLAS on AVX-512 CPUs",
          CliFlags({{CliString("dtype", "float32|bfloat16|int8", "the projections' precision", "float32",
                               {"float32", "bfloat16", "int8"}),
                     CliString("int8-weight-bits", "auto|7|8",
                               "under --dtype int8, the bits of the own side's weights (as in bench and on the "
                               "server; oneDNN's side takes its own default)",
                               "auto", {"auto", "7", "8"}),
                     CliString("rows", "N[,N...]", "rows (tokens) per product, one line each", "128"),
                     CliInt("hidden", "the model's hidden size", 768, 1),
                     CliInt("intermediate", "the feed-forward's inner size", 3072, 1),
                     CliInt("layers", "layers of distinct weights (q/k/v, output, two feed-forward each)", 12, 1),
                     CliInt("pairs", "timed pairs (one pass over every layer each side)", 10, 1),
                     CliInt("threads", "LibTorch's and OpenBLAS's threads", 0, 0, "N", "LibTorch's default")}}),
          RunGemm};
}

}  // namespace relserve
