#ifndef RELSERVE_SERVER_MODEL_KERNELS_PACKED_PANELS_H_
#define RELSERVE_SERVER_MODEL_KERNELS_PACKED_PANELS_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace relserve {

// The storage of a weight [n, k] (nn.Linear's [out, in]) packed at load for one of relserve's
// GEMMs (packed_gemm.h, amx_gemm.h): the n output features in panels of kWidth, each panel
// padded_k() deep (k rounded up to a multiple of kStep), one after another in one 64-byte aligned
// allocation filled with zeros, so that the padding of the last panel and of k reads as zero. How
// the values lie inside a panel is the packing's own.
template <typename T, int64_t kWidth, int64_t kStep>
class PackedPanels {
 public:
  static constexpr int64_t kPanelWidth = kWidth;
  static constexpr int64_t kDepthStep = kStep;

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t panels() const { return panels_; }
  // k rounded up to a multiple of kDepthStep: the depth of each panel.
  int64_t padded_k() const { return padded_k_; }
  const T* panel(int64_t p) const { return data_.get() + p * padded_k_ * kWidth; }

 protected:
  PackedPanels(int64_t n, int64_t k)
      : n_(n), k_(k), padded_k_((k + kStep - 1) / kStep * kStep), panels_((n + kWidth - 1) / kWidth) {
    const size_t bytes = std::max<size_t>(64, static_cast<size_t>(panels_ * padded_k_ * kWidth) * sizeof(T));
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    data_.reset(static_cast<T*>(p));
  }
  // Where the packing writes: panels() panels of padded_k() * kPanelWidth values.
  T* data() { return data_.get(); }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  int64_t n_ = 0;
  int64_t k_ = 0;
  int64_t padded_k_ = 0;
  int64_t panels_ = 0;
  std::unique_ptr<T[], Free> data_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_PACKED_PANELS_H_
