#ifndef RELSERVE_SERVER_MODEL_KERNELS_PACKED_GEMM_H_
#define RELSERVE_SERVER_MODEL_KERNELS_PACKED_GEMM_H_

#include <cstdint>
#include <memory>

#include "server/model/kernels/gemm_epilogue.h"
#include "server/model/kernels/needed_columns.h"
#include "server/model/kernels/packed_panels.h"

namespace relserve {

// The register tiles that run PackedGemm and SerialGemm on the same packed weights: AVX-512F (tiles
// of 12 rows times a whole panel of 32 features) or AVX2 with FMA (6 rows times half a panel), for
// x86-64 CPUs without AVX-512 such as AMD's Zen 2 and 3. Both take each result's sum in the same
// order, so they give the same bits.
enum class Float32Kernel { kAvx512, kAvx2 };

// "avx512" or "avx2".
const char* Float32KernelName(Float32Kernel kernel);

// A float32 weight [n, k] (nn.Linear's [out, in]) packed once, at load, for one kernel's tiles:
// panels of kPanelWidth output features, k * kPanelWidth floats each, 64-byte aligned, the last
// one padded with zeros. Inside a panel the AVX-512 tiles read it k-major (row kk holds w[p *
// kPanelWidth + j, kk] for j = 0 .. kPanelWidth - 1), the AVX2 tiles half a panel at a time, so
// for them each slice of 256 steps holds its first 16 features' rows, then the other 16's. The
// GEMM then reads the weight as it lies, never repacking it per call as a BLAS does (ONNX
// Runtime's MLAS does the same at load).
class PackedWeights : public PackedPanels<float, 32, 1> {
 public:
  // Whether this CPU and build run PackedGemm with some kernel (x86-64 with AVX-512F, or AVX2 and
  // FMA). Nothing should be packed where they do not.
  static bool Supported();
  // Whether this CPU and build run `kernel`.
  static bool Supports(Float32Kernel kernel);
  // The kernel PackedGemm and SerialGemm run by default: AVX-512 where the CPU has it, else AVX2.
  // Meaningful only where Supported().
  static Float32Kernel Best();

  // w: n rows of k floats, rows `ld` floats apart (ld >= k), packed for Best()'s tiles, or for
  // `kernel`'s (which PackedGemm then runs; packing works on any CPU, running only where
  // Supports(kernel)).
  static std::shared_ptr<const PackedWeights> Pack(const float* w, int64_t n, int64_t k, int64_t ld);
  static std::shared_ptr<const PackedWeights> Pack(const float* w, int64_t n, int64_t k, int64_t ld,
                                                   Float32Kernel kernel);

  // The kernel whose tiles the panels are laid out for, and which PackedGemm runs on them.
  Float32Kernel kernel() const { return kernel_; }

 private:
  PackedWeights(int64_t n, int64_t k, Float32Kernel kernel) : PackedPanels(n, k), kernel_(kernel) {}

  Float32Kernel kernel_;
};

// c[m, n] = a[m, k] · wᵀ (+ bias[n] when bias is not null), in float32: a's rows lda floats apart,
// c's rows ldc apart (c must not overlap a). Blocks of rows and weight panels are shared among
// LibTorch's intra-op threads (at::parallel_for); each result is a sum over k in float32, taken in
// chunks of 256 (so its rounding differs from a BLAS's by a few units in the last place). Each
// kernel first copies a's rows into its tiles of rows, 6 for AVX2 and 12 for AVX-512 (one buffer
// per calling thread, kept between calls, at most 768 x k floats: longer inputs run 768 rows at a
// time), so that each step of a tile reads them from one line or two.
// Runs the kernel w was packed for (w.kernel()); call only where PackedWeights::Supports(it).
// `epilogue` (gemm_epilogue.h) runs on each tile of rows once its sums are complete, while they are
// in the core's L1.
void PackedGemm(const float* a, int64_t m, int64_t lda, const PackedWeights& w, const float* bias, float* c,
                int64_t ldc, const GemmEpilogue& epilogue = {});

// c[m, n] = a[m, k] · b, on the calling thread alone, where b's element (j, kk) (column j of the
// result, step kk of the sum) is b[j * b_row + kk * b_col]: a matrix [n, k] with b_row = its row
// stride and b_col = 1 gives a · bᵀ; a matrix [k, n] with b_row = 1 and b_col = its row stride
// gives a · b. b is packed into the thread's own panels first (kept between calls), so that the
// small products of attention (one head of one sequence) run in the tiles of PackedGemm, one
// thread each. Kernels as PackedGemm's. Call only where PackedWeights::Supported().
// With `needed` (needed_columns.h), each tile of rows runs only on the panels its rows need.
void SerialGemm(const float* a, int64_t m, int64_t lda, const float* b, int64_t n, int64_t k, int64_t b_row,
                int64_t b_col, float* c, int64_t ldc, const NeededColumns& needed = {});
void SerialGemm(const float* a, int64_t m, int64_t lda, const float* b, int64_t n, int64_t k, int64_t b_row,
                int64_t b_col, float* c, int64_t ldc, Float32Kernel kernel, const NeededColumns& needed = {});

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_PACKED_GEMM_H_
