#ifndef RELSERVE_SERVER_MODEL_KERNELS_AMX_GEMM_H_
#define RELSERVE_SERVER_MODEL_KERNELS_AMX_GEMM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "server/model/kernels/gemm_epilogue.h"
#include "server/model/kernels/needed_columns.h"
#include "server/model/kernels/packed_panels.h"

namespace relserve {

// Which instructions GemmBFloat16 multiplies with, from the same packed weights:
//  - kAmx: AMX tiles (TDPBF16PS, 32 x 32 blocks), on Intel Xeons from Sapphire Rapids;
//  - kAvx512: AVX512-BF16 (VDPBF16PS, 12 rows x 32 features in registers), on CPUs with it and
//    without AMX: AMD Zen 4 and later, Intel Cooper Lake.
// Both sum each feature's products in float32, pair by pair along k; their results agree to the
// float32 sums' rounding, not bit for bit.
enum class BFloat16Kernel { kAmx, kAvx512 };

// The kernel's name, as ModelInfo and the benchmarks report it.
const char* BFloat16KernelName(BFloat16Kernel kernel);

// A bfloat16 weight [n, k] (nn.Linear's [out, in]) packed once, at load, for GemmBFloat16: panels of
// kPanelWidth output features; each panel, for each step of kDepthStep along k, holds two AMX B tiles
// of 16 features (16 rows of k pairs, 1 KiB each: row r of tile t holds w[f, kk + 2r] and
// w[f, kk + 2r + 1] for the features f = 16t .. 16t + 15 of the panel, side by side). The last panel
// is padded with zeros, and so is k up to a multiple of kDepthStep (packed_panels.h). The GEMM reads
// the weight as it lies, where a BLAS (oneDNN's, through LibTorch) reorders it on every call.
class PackedBFloat16Weights : public PackedPanels<uint16_t, 32, 32> {
 public:
  // Whether this CPU and kernel run BFloat16Kernel::kAmx: x86-64 with AMX-TILE, AMX-BF16 and
  // AVX512-BF16, and the kernel lets this process use the tile registers (asked once, here).
  static bool AmxSupported();
  // Whether this CPU runs BFloat16Kernel::kAvx512: x86-64 with AVX-512 F, BW, VL and AVX512-BF16.
  static bool Avx512Supported();
  static bool Supports(BFloat16Kernel kernel);
  // Whether this CPU runs either kernel. Nothing should be packed where it does not.
  static bool Supported();
  // AMX where the CPU runs it, else AVX512-BF16.
  static BFloat16Kernel Best();
  // w: n rows of k bfloat16 values (their bits), rows `ld` values apart (ld >= k); n, k > 0.
  static std::shared_ptr<const PackedBFloat16Weights> Pack(const uint16_t* w, int64_t n, int64_t k, int64_t ld);

 private:
  PackedBFloat16Weights(int64_t n, int64_t k) : PackedPanels(n, k) {}
};

// c[m, n] = a[m, k] · wᵀ (+ bias[n] when bias is not null), all bfloat16 (their bits): products summed
// in float32 (in AMX tiles or AVX-512 registers, by `kernel`), the bias added in float32, then
// rounded once to bfloat16 (to nearest, ties to even), as oneDNN's bfloat16 matmul does. a's rows
// are lda values apart, c's ldc apart (c must not overlap a). Blocks of rows and weight panels are
// shared among LibTorch's intra-op threads (at::parallel_for); under kAmx each thread loads its
// tile configuration itself. Call only where PackedBFloat16Weights::Supports(kernel).
// `epilogue` (gemm_epilogue.h) runs on each block of results as it is stored, its residual bfloat16.
void GemmBFloat16(const uint16_t* a, int64_t m, int64_t lda, const PackedBFloat16Weights& w, const uint16_t* bias,
                  uint16_t* c, int64_t ldc, BFloat16Kernel kernel, const GemmEpilogue& epilogue = {});

// c[m, n] = a[m, k] · b on the calling thread alone, all bfloat16 (their bits), where b's element
// (j, d) (column j of the result, step d of the sum) is b[j * b_row + d * b_col]: a matrix [n, k]
// with b_row = its row stride and b_col = 1 gives a · bᵀ; a matrix [k, n] with b_row = 1 and b_col =
// its row stride gives a · b. b is packed into the thread's own panels first (kept between calls),
// so that the small products of attention (one head of one sequence) run in
// BFloat16Kernel::kAvx512's registers, one thread each. Sums in float32, rounded once to bfloat16,
// as GemmBFloat16's. a's rows are lda values apart, c's ldc apart. Call only where
// PackedBFloat16Weights::Avx512Supported(). With `needed` (needed_columns.h), each tile of rows
// runs only on the panels its rows need.
void SerialGemmBFloat16(const uint16_t* a, int64_t m, int64_t lda, const uint16_t* b, int64_t n, int64_t k,
                        int64_t b_row, int64_t b_col, uint16_t* c, int64_t ldc, const NeededColumns& needed = {});

// Which instructions GemmInt8 multiplies with, from the same packed weights:
//  - kAmx: AMX tiles (TDPBUSD, 32 x 32 blocks);
//  - kVnni: AVX-512 VNNI (VPDPBUSD, 8 rows x 32 features in registers), the same results as kAmx,
//    bit for bit (the int32 sums are exact);
//  - kAvx2: AVX2, for x86-64 CPUs with neither (AMD Zen 2 and 3, Intel before Cascade Lake, Intel
//    client cores), in one of two ways by the weights' level:
//    - on 7-bit weights (max_level() 63), VPMADDUBSW then VPMADDWD by ones into int32, 4 rows x 16
//      features in registers. VPMADDUBSW adds each pair of u8 x s8 products in int16 with
//      saturation; 2 x 255 x 63 fits, 2 x 255 x 127 would not;
//    - on 8-bit weights, the weights sign-extended to int16 (VPMOVSXBW) and the activations
//      widened to 16 bits, multiplied and summed in pairs into int32 by VPMADDWD, 4 rows x 8
//      features: about 0.75 times the 7-bit kernel's rate on an AMD Zen 3.
//    Either way its sums are exact, so on the same weights it gives the others' results, bit for bit.
enum class Int8Kernel { kAmx, kVnni, kAvx2 };

// A float32 weight [n, k] quantized once, at load, to int8 for GemmInt8: one symmetric scale per
// output feature (max |w| / 127, zero point 0, as torch.ao.quantization.quantize_dynamic's
// per-channel weights; max |w| / 63 for 7-bit weights), and packed as AMX B tiles: panels of
// kPanelWidth features; each panel, for each step of kDepthStep along k, holds two tiles of 16
// features (16 rows of 64 bytes: row r of tile t holds w[f, kk + 4r .. kk + 4r + 3] for the
// features f = 16t .. 16t + 15 of the panel, side by side). The last panel and k are padded with
// zeros. Each feature's sum of its int8 values is kept for the activations' zero points.
class PackedInt8Weights : public PackedPanels<int8_t, 32, 64> {
 public:
  // Whether this CPU and kernel run GemmInt8's Int8Kernel::kAmx: x86-64 with AMX-TILE, AMX-INT8 and
  // AVX-512 (F, BW, VL), and the kernel lets this process use the tile registers.
  static bool Supported();
  // Whether this CPU runs Int8Kernel::kVnni: x86-64 with AVX-512 F, BW, VL and VNNI (every CPU with
  // AMX-INT8 has them, and so do Cascade Lake and later Xeons and AMD's Zen 4).
  static bool VnniSupported();
  // Whether this CPU runs Int8Kernel::kAvx2: x86-64 with AVX2 and FMA.
  static bool Avx2Supported();
  // Whether this CPU runs `kernel`.
  static bool Supports(Int8Kernel kernel);
  // Whether this CPU runs any of the kernels (then int8 projections run in relserve's own GEMM).
  static bool AnySupported();
  // The largest |int8 value| of 8-bit weights, and of 7-bit ones.
  static constexpr int kEightBitLevel = 127;
  static constexpr int kSevenBitLevel = 63;
  // w: n rows of k float32 values, rows `ld` values apart (ld >= k); n, k > 0. Each feature's scale
  // is its max |w| / max_level, which is kEightBitLevel or kSevenBitLevel. Every kernel runs what
  // this packs.
  static std::shared_ptr<const PackedInt8Weights> Quantize(const float* w, int64_t n, int64_t k, int64_t ld,
                                                           int max_level = kEightBitLevel);

  // Per feature (panels() * kPanelWidth of them, zero past n): the weight's scale, and the sum of
  // its int8 values.
  const float* scales() const { return scales_.data(); }
  const int32_t* sums() const { return sums_.data(); }
  // The int8 values lie within [-max_level(), max_level()].
  int max_level() const { return max_level_; }
  // The weight as the GEMM sees it, feature f at depth j: int8 value times scale.
  float Dequantized(int64_t f, int64_t j) const;

 private:
  PackedInt8Weights(int64_t n, int64_t k, int max_level);
  std::vector<float> scales_;
  std::vector<int32_t> sums_;
  int max_level_ = kEightBitLevel;
};

// c[m, n] = a[m, k] · wᵀ (+ bias[n] when bias is not null), float32 in and out, as dynamic int8
// quantization runs it: each row of a is quantized at the call to uint8 with its own affine scale
// and zero point (its minimum and maximum, widened to include 0, over 255 steps; values rounded to
// nearest, ties to even), the products summed in int32 (u8 x s8), the zero point's share taken out
// with the weight's sums, and the sum rescaled to float32 by the row's and the feature's scales
// before the bias is added. Because each row (token) has its own scale, a row's result does not
// depend on the other rows of the call. a's rows are lda values apart, c's ldc apart. Rows and
// panels are shared among LibTorch's intra-op threads. Call a kernel only where
// PackedInt8Weights::Supports(kernel).
void GemmInt8(const float* a, int64_t m, int64_t lda, const PackedInt8Weights& w, const float* bias, float* c,
              int64_t ldc, Int8Kernel kernel);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_AMX_GEMM_H_
