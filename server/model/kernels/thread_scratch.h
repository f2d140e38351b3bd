#ifndef RELSERVE_SERVER_MODEL_KERNELS_THREAD_SCRATCH_H_
#define RELSERVE_SERVER_MODEL_KERNELS_THREAD_SCRATCH_H_

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace relserve {

// A buffer of at least `count` values of T, 64-byte aligned for the kernels' vector loads, of the
// calling thread (one per T and slot, slot < kSlots), grown as needed and kept between calls: the
// panels a serial GEMM packs its operand into, the rows a GEMM packs before its tiles read them.
template <typename T, int kSlots = 2>
T* ThreadScratch(int slot, size_t count) {
  struct Buffer {
    std::unique_ptr<T[], void (*)(T*)> data{nullptr, [](T* q) { std::free(q); }};
    size_t capacity = 0;
  };
  thread_local Buffer buffers[kSlots];
  Buffer& buffer = buffers[slot];
  if (count > buffer.capacity) {
    void* q = std::aligned_alloc(64, (count * sizeof(T) + 63) / 64 * 64);
    if (q == nullptr) throw std::bad_alloc();
    buffer.data.reset(static_cast<T*>(q));
    buffer.capacity = count;
  }
  return buffer.data.get();
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_THREAD_SCRATCH_H_
