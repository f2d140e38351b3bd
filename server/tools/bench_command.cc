// relserve-model bench: tokens per second of the engine on random ids, with the machine's
// matmul ceiling measured in the same run for the efficiency ratio.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/model/runtime/cpu_tensor_allocator.h"
#include "server/model/engine.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/model/model_flops.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/util/openblas_core.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status RunBench(const CliArgs& args) {
  const int batch = args.Int("batch");
  const int seq = args.Int("seq");
  const int iters = args.Int("iters");
  const int warmup = args.Int("warmup");
  const int gemm_size = args.Int("gemm-size");
  ASSIGN_OR_RETURN(auto engine, LoadEngineFromFlags(args));
  const ModelInfo& info = engine->info();
  if (seq > info.max_length) {
    return absl::InvalidArgumentError(absl::StrCat("--seq ", seq, " exceeds the model's maximum ", info.max_length,
                                                   " (raise it with --max-length where the model allows)"));
  }
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> token(std::min(5, info.vocab_size - 1), info.vocab_size - 1);
  std::vector<SequenceInput> inputs(batch);
  for (SequenceInput& s : inputs) {
    s.input_ids.resize(seq);
    for (int& id : s.input_ids) id = token(rng);
  }
  // What each batch returns (--output): the pooled embedding, a classifier's logits, or a head's
  // per-token output.
  const std::string output_name = args.String("output");
  const uint32_t outputs = output_name == "logits"         ? kOutputLogits
                           : output_name == "token-logits" ? kOutputTokenLogits
                           : output_name == "multi-vector" ? kOutputMultiVector
                           : output_name == "sparse"       ? kOutputSparse
                                                           : kOutputPooled;
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(engine->Run(inputs, outputs).status());
  const std::optional<BufferCacheStats> cache_before = CpuTensorCacheStats();
  const double attention_seconds_before = engine->attention_counts().host_seconds;
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(engine->Run(inputs, outputs).status());
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  const std::optional<BufferCacheStats> cache_after = CpuTensorCacheStats();
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (double m : ms) mean += m;
  mean /= ms.size();
  const double tokens_per_second = 1000.0 * batch * seq / mean;
  const double flops_per_token = EncoderFlopsPerToken(engine->config(), seq);

  nlohmann::json out;
  out["model_type"] = info.model_type;
  out["hidden"] = info.hidden_size;
  out["layers"] = info.num_layers;
  out["dtype"] = DTypeName(info.dtype);
  out["device"] = info.device;
  out["threads"] = std::to_string(args.Int("threads"));
  out["openblas_kernels"] = LoadedOpenBlasCore();  // empty: the BLAS is not OpenBLAS
  if (info.dtype == DType::kFloat32 && info.device == "cpu") {
    // Who runs float32's products (--float32-gemm): relserve's kernels (AVX-512 or AVX2) or the BLAS.
    out["float32_products"] =
        args.String("float32-gemm") == "auto" && PackedWeights::Supported() ? "relserve" : "blas";
  }
  out["projections"] = info.projections;  // what runs the encoder's projections (ModelInfo)
  if (info.int8_weight_bits != 0) out["int8_weight_bits"] = info.int8_weight_bits;
  if (info.packed_float32_max_tokens != 0) {
    // The longest batch float32's packed GEMM takes: a number, or "every".
    if (info.packed_float32_max_tokens == ModelInfo::kEveryBatch) {
      out["packed_float32_max_tokens"] = "every";
    } else {
      out["packed_float32_max_tokens"] = info.packed_float32_max_tokens;
    }
    out["packed_float32_heads"] = info.packed_float32_heads;  // output heads and Dense modules on it
  }
  out["output"] = output_name;
  out["batch"] = batch;
  out["seq"] = seq;
  out["iters"] = iters;
  out["ms_per_batch"] = mean;
  out["ms_per_batch_min"] = ms.front();
  out["ms_per_batch_median"] = ms[ms.size() / 2];
  out["tokens_per_second"] = tokens_per_second;
  out["gflops_per_token"] = flops_per_token / 1e9;
  out["model_gflops_per_second"] = tokens_per_second * flops_per_token / 1e9;
  if (cache_before && cache_after) {
    // The buffer cache over the timed batches: blocks mapped anew there cost page faults.
    out["buffer_cache"] = {{"hits", cache_after->hits - cache_before->hits},
                           {"misses", cache_after->misses - cache_before->misses},
                           {"mapped_mib", (cache_after->mapped_bytes_total - cache_before->mapped_bytes_total) / double(1 << 20)},
                           {"evicted_blocks", cache_after->evicted_blocks - cache_before->evicted_blocks},
                           {"peak_in_use_mib", cache_after->peak_in_use_bytes / double(1 << 20)}};
  }
  // The attention calls of every batch run (warm-up included), by the path that ran them: on the
  // CPU, cpu_tiled of the cpu calls in relserve's register tiles (--float32-attention, --bfloat16-attention).
  const Engine::AttentionCounts calls = engine->attention_counts();
  out["attention_calls"] = {
      {"cpu", calls.cpu}, {"cpu_tiled", calls.cpu_tiled}, {"bias", calls.bias}, {"tables", calls.tables}};
  // The host time of the timed batches' attention calls, per batch (their mean): the share of
  // ms_per_batch that attention's products and softmax take.
  out["attention_ms_per_batch"] = 1000.0 * (calls.host_seconds - attention_seconds_before) / iters;
  // Batches whose last layer ran on the first tokens alone (--output logits of a classifier, CLS
  // pooling): they do fewer FLOPs than model_gflops_per_second counts.
  out["first_token_forwards"] = engine->first_token_forwards();
  if (!args.Bool("no-gemm")) {
    const double gemm = MeasureMatmulFlops(info.dtype, gemm_size, 2.0, info.device);
    out["matmul_gflops_per_second"] = gemm / 1e9;
    out["matmul_size"] = gemm_size;
    out["efficiency"] = tokens_per_second * flops_per_token / gemm;
  }
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace

ModelCommand BenchCommand() {
  return {"bench",
          "tokens per second, and the efficiency against this machine's matmul throughput, as one JSON line",
          CliFlags({{CliInt("batch", "sequences per batch", 8, 1), CliInt("seq", "tokens per sequence", 128, 1),
                     CliInt("iters", "timed batches", 10, 1),
                     CliInt("warmup", "batches run before the timed ones", 2, 0),
                     CliInt("gemm-size", "the side of the square matmul that measures the machine", 2048, 1),
                     CliBool("no-gemm", "no matmul measurement (and no efficiency)"),
                     CliString("output", "pooled|logits|token-logits|multi-vector|sparse",
                               "what each batch returns: the pooled embedding, the logits of the model's "
                               "sequence classifier, or the per-token output of its token classifier, ColBERT "
                               "projection or sparse head",
                               "pooled", {"pooled", "logits", "token-logits", "multi-vector", "sparse"})},
                    EngineFlags()}),
          RunBench};
}

}  // namespace relserve
