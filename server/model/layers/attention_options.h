#ifndef RELSERVE_SERVER_MODEL_LAYERS_ATTENTION_OPTIONS_H_
#define RELSERVE_SERVER_MODEL_LAYERS_ATTENTION_OPTIONS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace relserve {

// How RelativeAttention runs off the CPU (and on the CPU with AttentionKernels::device_path_on_cpu):
//   kBias:   every term folded into one [heads, batch, L, L] bias for LibTorch's fused kernel
//            (biased_attention.h); any inputs.
//   kTables: DeBERTa's c2p and p2c terms read through their index tables by relserve's own
//            kernel (table_attention.h); inputs it does not cover (a position bias, XLNet's
//            segments or causal mask, a head size other than 64 on a GPU, float32 on a GPU)
//            still take kBias.
enum class DeviceAttention { kBias, kTables };

// Which of LibTorch's scaled_dot_product_attention kernels the bias path may use (LibTorch 2.4
// and later on a GPU), held process-wide by LibTorch (its global context; UseSdpaBackend in
// biased_attention.h sets it):
//   kDefault: LibTorch chooses among every kernel but cuDNN's. Measured on an H200 (PyTorch
//             2.11, cuDNN 9.19; docs/PERFORMANCE.md, "On a GPU"): with a bias LibTorch picks
//             cuDNN's attention, which builds an execution plan on the first call of each
//             (batch, length) on each thread (45-62 ms) and then runs at 0.16 ms where the
//             memory-efficient kernel runs at 0.06 ms (DeBERTa-v3-base's attention at 128 tokens),
//             with no first-call cost.
//   kAuto:    LibTorch chooses among all of them, cuDNN's included (LibTorch's own default).
//   the others: that kernel only (LibTorch fails the call where it cannot run it).
enum class SdpaBackend { kDefault, kAuto, kCudnn, kEfficient, kFlash, kMath };

// The engine's choice of attention path on a GPU (EngineOptions::gpu_attention, from
// --gpu-attention), passed down to every attention call of a forward (EncoderInputs).
struct AttentionOptions {
  DeviceAttention path = DeviceAttention::kBias;
  SdpaBackend sdpa = SdpaBackend::kDefault;
};

// What every attention call of one forward is told, from the engine's options
// (EngineOptions::gpu_attention's path and EngineOptions::kernels), passed down with the forward:
// EncoderInputs::attention -> EncoderPass::ForAttention -> RelativeAttentionInputs::kernels.
// The defaults are what serves.
struct AttentionKernels {
  DeviceAttention path = DeviceAttention::kBias;  // off the CPU (and on it with the next)
  bool device_path_on_cpu = false;  // the CPU takes `path` too (tests: what GPUs run, on the CPU)
  bool fused = true;    // the bias path's fused SDPA kernel where LibTorch has it, else ATen's ops
  bool avx512 = true;   // the CPU's relative softmax gathers with AVX-512 where the CPU has it
  // On the CPU, with float32 q, k and v: the products in bfloat16 (EngineOptions::int8_attention
  // resolved by the engine under --dtype int8: Int8Attention below). The context comes back in float32.
  bool cpu_products_in_bfloat16 = false;
  // With cpu_products_in_bfloat16: the batches the tiles take (cpu_tiled_max_tokens, below) keep
  // their products in float32, in the tiles (Int8Attention::kAuto: in a short batch bfloat16's
  // products, through oneDNN, cost more than they save, docs/PERFORMANCE.md).
  bool cpu_tiles_before_bfloat16 = false;
  // On the CPU, with float32 q, k and v, on a CPU with AVX-512F or AVX2, for a call whose batch holds at
  // most this many tokens (batch x length, padding included): each head of each sequence a task
  // of its own, its products in relserve's register tiles (relative_attention.cc, AttendTiled);
  // longer batches take ATen's batched products (OpenBLAS). 0: never. The engine sets it from
  // EngineKernels::tiled_attention (engine.h): by default the batches the packed float32 GEMM takes,
  // so that such a forward makes no BLAS call at all.
  int64_t cpu_tiled_max_tokens = 0;
  // The same for bfloat16 q, k and v on a CPU with AVX512-BF16: at most this many tokens, each head
  // of each sequence a task whose products run in relserve's AVX512-BF16 registers
  // (kernels/amx_gemm.h, SerialGemmBFloat16), the scores rounded to bfloat16 as oneDNN's batched
  // products round them; longer batches take ATen's batched products (oneDNN). 0: never.
  int64_t cpu_tiled_bfloat16_max_tokens = 0;
};

// --gpu-attention's value: PATH or PATH:BACKEND, PATH "bias" or "tables", BACKEND "default",
// "auto", "cudnn", "efficient", "flash" or "math". INVALID_ARGUMENT naming what is accepted otherwise.
absl::StatusOr<AttentionOptions> ParseAttentionOptions(std::string_view value);
// "bias", "tables:math", ...: what ParseAttentionOptions reads back (":default" left out).
std::string AttentionOptionsName(const AttentionOptions& options);
// "bias" or "tables" (or empty, read as "bias"); INVALID_ARGUMENT naming both for anything else.
absl::StatusOr<DeviceAttention> ParseDeviceAttention(std::string_view name);

// The precision of the CPU's attention products (q.k, DeBERTa's c2p and p2c terms, probabilities
// times v) when the activations are float32 but the projections are not (--dtype int8; from
// --int8-attention, EngineOptions::int8_attention):
//   kAuto:     where the CPU has bfloat16 instructions (AVX512-BF16 or AMX-BF16), kFloat32 for
//              the batches relserve's float32 tiles take (at most 192 tokens on AVX-512 CPUs,
//              with relserve's int8 GEMM: AttentionKernels::cpu_tiles_before_bfloat16; the
//              forward then calls no BLAS and oneDNN at all) and kBfloat16 for longer ones;
//              kFloat32 elsewhere.
//   kFloat32:  the products in float32, as the activations.
//   kBfloat16: q, k, v and the relative tables rounded to bfloat16 for the products (oneDNN's
//              bfloat16 kernels, as --dtype bfloat16 runs them), the softmax and its relative
//              terms summed in float32 as there, the context back in float32. Refused at load on
//              a CPU without bfloat16 instructions, where oneDNN would emulate them slowly.
// Unused under every other dtype (float32 keeps float32, bfloat16 is bfloat16 throughout).
enum class Int8Attention { kAuto, kFloat32, kBfloat16 };
// "auto", "float32" or "bfloat16"; INVALID_ARGUMENT naming the three otherwise.
absl::StatusOr<Int8Attention> ParseInt8Attention(std::string_view name);
std::string_view Int8AttentionName(Int8Attention value);
// Whether this CPU has bfloat16 dot-product instructions (AVX512-BF16; every CPU with AMX-BF16 has it).
bool CpuHasBfloat16Products();

// What the attention calls of forwards did, counted by RelativeAttention when a forward's
// EncoderInputs::attention_stats points here: calls per path, and the host time spent in them
// (on a GPU the time to launch, plus any host-side work such as a library's plan building).
// Thread-safe; the engine keeps one per forward and one over its life.
struct AttentionStats {
  std::atomic<int64_t> cpu_calls{0};     // the CPU's own path (relative_attention.cc)
  std::atomic<int64_t> cpu_tiled_calls{0};  // of those, the ones in register tiles (AttendTiled)
  std::atomic<int64_t> bias_calls{0};    // BiasedAttention
  std::atomic<int64_t> table_calls{0};   // TableAttention
  std::atomic<int64_t> host_nanoseconds{0};
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_ATTENTION_OPTIONS_H_
