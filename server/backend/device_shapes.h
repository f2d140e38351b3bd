#ifndef RELSERVE_SERVER_BACKEND_DEVICE_SHAPES_H_
#define RELSERVE_SERVER_BACKEND_DEVICE_SHAPES_H_

#include <vector>

namespace relserve {

// The shapes a GPU batch runs at, so that its kernels, a library's per-shape caches (cuDNN's
// execution plans), CUDA graphs and the allocator see a few shapes only, all of which the server
// warms up on every worker's thread before it serves (warm_up.h); the extra positions and rows
// are padding.

// The length a batch whose longest sequence has `length` tokens runs at: rounded up to a
// multiple of 16 up to 256 tokens, of 64 up to 1024 and of 256 beyond, never past max_length.
int DeviceBatchLength(int length, int max_length);
// Every length DeviceBatchLength gives up to max_length, ascending (from 16, or max_length if
// shorter).
std::vector<int> DeviceBatchLengths(int max_length);

// The size a batch of `batch` sequences runs at: 1, 2, 3, 4, then 6, 8, 12, 16, 24, 32, 48, 64,
// ... (each at most 1.5 times the one before), never past max_batch (at least batch).
int DeviceBatchSize(int batch, int max_batch);
// Every size DeviceBatchSize gives up to max_batch, ascending.
std::vector<int> DeviceBatchSizes(int max_batch);

}  // namespace relserve

#endif  // RELSERVE_SERVER_BACKEND_DEVICE_SHAPES_H_
