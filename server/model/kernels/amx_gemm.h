#ifndef RELSERVE_SERVER_MODEL_KERNELS_AMX_GEMM_H_
#define RELSERVE_SERVER_MODEL_KERNELS_AMX_GEMM_H_

#include <cstdint>
#include <memory>

namespace relserve {

// A bfloat16 weight [n, k] (nn.Linear's [out, in]) packed once, at load, for AmxGemmBFloat16: panels of
// kPanelWidth output features; each panel, for each step of kDepthStep along k, holds two AMX B tiles
// of 16 features (16 rows of k pairs, 1 KiB each: row r of tile t holds w[f, kk + 2r] and
// w[f, kk + 2r + 1] for the features f = 16t .. 16t + 15 of the panel, side by side). The last panel
// is padded with zeros, and so is k up to a multiple of kDepthStep. The GEMM reads the weight as it lies, where a BLAS (oneDNN's, through
// LibTorch) reorders it on every call.
class PackedBFloat16Weights {
 public:
  static constexpr int64_t kPanelWidth = 32;
  static constexpr int64_t kDepthStep = 32;

  // Whether this CPU and kernel run AmxGemmBFloat16: x86-64 with AMX-TILE, AMX-BF16 and AVX512-BF16,
  // and the kernel lets this process use the tile registers (asked once, here). Nothing should be
  // packed where they do not.
  static bool Supported();
  // w: n rows of k bfloat16 values (their bits), rows `ld` values apart (ld >= k); n, k > 0.
  static std::shared_ptr<const PackedBFloat16Weights> Pack(const uint16_t* w, int64_t n, int64_t k, int64_t ld);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t panels() const { return panels_; }
  // k rounded up to a multiple of kDepthStep: the depth of each packed panel.
  int64_t padded_k() const { return padded_k_; }
  const uint16_t* panel(int64_t p) const { return data_.get() + p * padded_k_ * kPanelWidth; }

 private:
  struct Free {
    void operator()(uint16_t* p) const;
  };
  PackedBFloat16Weights(int64_t n, int64_t k);
  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t padded_k_ = 0;
  int64_t panels_ = 0;
  std::unique_ptr<uint16_t[], Free> data_;
};

// c[m, n] = a[m, k] · wᵀ (+ bias[n] when bias is not null), all bfloat16 (their bits): products summed
// in float32 in the AMX tiles, the bias added in float32, then rounded once to bfloat16 (to nearest,
// ties to even), as oneDNN's bfloat16 matmul does. a's rows are lda values apart, c's ldc apart (c must
// not overlap a). Blocks of rows and weight panels are shared among LibTorch's intra-op threads
// (at::parallel_for); each thread loads its tile configuration itself. Call only where
// PackedBFloat16Weights::Supported().
void AmxGemmBFloat16(const uint16_t* a, int64_t m, int64_t lda, const PackedBFloat16Weights& w,
                     const uint16_t* bias, uint16_t* c, int64_t ldc);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_AMX_GEMM_H_
