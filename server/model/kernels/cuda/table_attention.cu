// The table-reading relative attention of table_attention_args.h on NVIDIA GPUs (sm_80 and
// later: bfloat16 tensor cores through WMMA).
//
// One block of 4 warps per (group, 64 queries); each warp owns 16 query rows. For each tile of
// 64 keys the block stages in shared memory: K and V, and the two bands of relative products
// the tile pair needs, c2p[i][c2p_index[d]] for its 64 queries and p2c[p2c_index[d]][j] for its
// 64 keys, d = j - i over the 127 offsets the pair spans (both loaded along contiguous rows of
// the products). A warp then computes its S = Q K^T with tensor cores, adds the two terms from
// the bands (entry j - i + 63 for local i, j), masks padded keys, runs the online softmax (each
// lane holds columns lane and lane + 32 of every row), and adds P V into its float accumulator.
// Nothing of size L x L leaves the chip.
#include "server/model/kernels/cuda/table_attention_cuda.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

namespace relserve {
namespace {

using namespace nvcuda;

constexpr int kTile = kTableAttentionTile;
constexpr int kD = kTableAttentionKernelHeadDim;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kTile / kWarps;  // query rows per warp: one 16-row fragment
constexpr int kBand = 2 * kTile - 1;   // offsets j - i a tile pair spans
constexpr int kLd = kD + 8;            // row stride (elements) of Q, K, V, P: rows stay 16-byte aligned
constexpr int kLdF = kTile + 4;        // row stride of the float tiles
constexpr int kCBandLd = 128;          // c2p band: [kTile queries][kBand offsets]
constexpr int kPBandLd = kTile + 2;    // p2c band: [kBand offsets][kTile keys]; the odd word stride spreads banks
constexpr int kVec = 8;                // 16-bit elements per 16-byte load

static_assert(kRows == 16, "each warp owns one 16-row fragment");
static_assert(kD % 16 == 0 && kTile % 16 == 0, "whole fragments");

constexpr size_t kTileBytes = size_t{kTile} * kLd * 2;
constexpr size_t kCBandBytes = size_t{kTile} * kCBandLd * 2;
constexpr size_t kPBandBytes = size_t{kBand + 1} * kPBandLd * 2;
constexpr size_t kScoreBytes = size_t{kRows} * kLdF * 4;
constexpr size_t kProbBytes = size_t{kRows} * kLd * 2;
constexpr size_t kWarpBytes = kScoreBytes + kProbBytes + kScoreBytes;
constexpr size_t kSharedBytes = 3 * kTileBytes + kCBandBytes + kPBandBytes + kWarps * kWarpBytes;
// WMMA wants 32-byte aligned fragment pointers: every region starts on one.
static_assert(kTileBytes % 32 == 0 && kCBandBytes % 32 == 0 && kPBandBytes % 32 == 0, "aligned regions");
static_assert(kScoreBytes % 32 == 0 && kProbBytes % 32 == 0, "aligned warp regions");

template <typename T>
struct Elem;
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float Load(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 Make(float x) { return __float2bfloat16(x); }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float Load(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half Make(float x) { return __float2half(x); }
};

// Rows [row0, row0 + kTile) of a [L, kD] matrix into a [kTile][kLd] tile; rows past L are 0.
template <typename T>
__device__ __forceinline__ void LoadTile(T* dst, const T* src, int row0, int L, int tid) {
  constexpr int kChunks = kD / kVec;
  for (int e = tid; e < kTile * kChunks; e += kThreads) {
    const int r = e / kChunks, c = (e % kChunks) * kVec;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (row0 + r < L) value = *reinterpret_cast<const uint4*>(src + static_cast<size_t>(row0 + r) * kD + c);
    *reinterpret_cast<uint4*>(dst + r * kLd + c) = value;
  }
}

__device__ __forceinline__ float WarpMax(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float WarpSum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) TableAttentionKernel(const TableAttentionArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ int c2p_rows[kBand], p2c_rows[kBand];  // this tile pair's table entries, by offset
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  T* sq = reinterpret_cast<T*>(smem);
  T* sk = reinterpret_cast<T*>(smem + kTileBytes);
  T* sv = reinterpret_cast<T*>(smem + 2 * kTileBytes);
  T* cband = reinterpret_cast<T*>(smem + 3 * kTileBytes);
  T* pband = reinterpret_cast<T*>(smem + 3 * kTileBytes + kCBandBytes);
  unsigned char* mine = smem + 3 * kTileBytes + kCBandBytes + kPBandBytes + warp * kWarpBytes;
  float* s = reinterpret_cast<float*>(mine);
  T* p = reinterpret_cast<T*>(mine + kScoreBytes);
  float* o = reinterpret_cast<float*>(mine + kScoreBytes + kProbBytes);

  const int L = a.length;
  const int g = blockIdx.x, b = g % a.batch;
  const int i0 = blockIdx.y * kTile;
  const size_t group = static_cast<size_t>(g) * L;
  const T* q = static_cast<const T*>(a.q) + group * kD;
  const T* k = static_cast<const T*>(a.k) + group * kD;
  const T* v = static_cast<const T*>(a.v) + group * kD;
  T* out = static_cast<T*>(a.out) + group * kD;
  const T* c2p = a.c2p != nullptr ? static_cast<const T*>(a.c2p) + group * a.rc : nullptr;
  const T* p2c = a.p2c != nullptr ? static_cast<const T*>(a.p2c) + static_cast<size_t>(g) * a.rp * L : nullptr;
  const uint8_t* mask = a.key_mask != nullptr ? a.key_mask + static_cast<size_t>(b) * L : nullptr;
  const float neg_inf = -__int_as_float(0x7f800000);
  const T zero = Elem<T>::Make(0.0f);

  LoadTile(sq, q, i0, L, tid);
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    o[r * kLdF + lane] = 0.0f;
    o[r * kLdF + lane + 32] = 0.0f;
  }
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> qf[kD / 16];
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) wmma::load_matrix_sync(qf[kk], sq + warp * kRows * kLd + kk * 16, kLd);

  float m[kRows], l[kRows], alpha[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = neg_inf;
    l[r] = 0.0f;
  }

  for (int j0 = 0; j0 < L; j0 += kTile) {
    __syncthreads();  // the previous tile's K, V, bands and table entries are no longer read
    const int dmin = j0 - i0 - (kTile - 1);
    // The offset tables' entries of this tile pair, read once instead of once per band element.
    if (tid < kBand) {
      const int e = TableAttentionOffset(dmin + tid, L);
      if (c2p != nullptr) c2p_rows[tid] = a.c2p_index[e];
      if (p2c != nullptr) p2c_rows[tid] = a.p2c_index[e];
    }
    LoadTile(sk, k, j0, L, tid);
    LoadTile(sv, v, j0, L, tid);
    __syncthreads();
    if (c2p != nullptr) {
      for (int e = tid; e < kTile * kCBandLd; e += kThreads) {
        const int r = e / kCBandLd, dd = e % kCBandLd;
        T value = zero;
        if (dd < kBand && i0 + r < L) value = c2p[static_cast<size_t>(i0 + r) * a.rc + c2p_rows[dd]];
        cband[r * kCBandLd + dd] = value;
      }
    }
    if (p2c != nullptr) {
      for (int e = tid; e < kBand * kTile; e += kThreads) {
        const int dd = e / kTile, c = e % kTile;
        T value = zero;
        if (j0 + c < L) value = p2c[static_cast<size_t>(p2c_rows[dd]) * L + j0 + c];
        pband[dd * kPBandLd + c] = value;
      }
    }
    __syncthreads();

    // S = Q K^T for this warp's rows.
#pragma unroll
    for (int n = 0; n < kTile / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> kf;
        wmma::load_matrix_sync(kf, sk + n * 16 * kLd + kk * 16, kLd);
        wmma::mma_sync(acc, qf[kk], kf, acc);
      }
      wmma::store_matrix_sync(s + n * 16, acc, kLdF, wmma::mem_row_major);
    }
    __syncwarp();

    // The relative terms, the mask and the online softmax; P into shared memory.
    const bool key0 = j0 + lane < L && (mask == nullptr || mask[j0 + lane] != 0);
    const bool key1 = j0 + lane + 32 < L && (mask == nullptr || mask[j0 + lane + 32] != 0);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int il = warp * kRows + r;  // query row within the block's tile
      float x[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int c = lane + 32 * h;
        const int dd = c - il + (kTile - 1);  // j - i - dmin
        float value = s[r * kLdF + c];
        if (c2p != nullptr) value += Elem<T>::Load(cband[il * kCBandLd + dd]);
        if (p2c != nullptr) value += Elem<T>::Load(pband[dd * kPBandLd + c]);
        x[h] = (h == 0 ? key0 : key1) ? value : neg_inf;
      }
      const float new_m = fmaxf(m[r], WarpMax(fmaxf(x[0], x[1])));
      alpha[r] = m[r] == neg_inf ? 0.0f : __expf(m[r] - new_m);
      const float p0 = x[0] == neg_inf ? 0.0f : __expf(x[0] - new_m);
      const float p1 = x[1] == neg_inf ? 0.0f : __expf(x[1] - new_m);
      l[r] = l[r] * alpha[r] + WarpSum(p0 + p1);
      m[r] = new_m;
      p[r * kLd + lane] = Elem<T>::Make(p0);
      p[r * kLd + lane + 32] = Elem<T>::Make(p1);
    }
    __syncwarp();

    // P V into the score tile (free again), then o = o * alpha + P V.
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kTile / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> pf;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> vf;
        wmma::load_matrix_sync(pf, p + kk * 16, kLd);
        wmma::load_matrix_sync(vf, sv + kk * 16 * kLd + n * 16, kLd);
        wmma::mma_sync(acc, pf, vf, acc);
      }
      wmma::store_matrix_sync(s + n * 16, acc, kLdF, wmma::mem_row_major);
    }
    __syncwarp();
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      o[r * kLdF + lane] = o[r * kLdF + lane] * alpha[r] + s[r * kLdF + lane];
      o[r * kLdF + lane + 32] = o[r * kLdF + lane + 32] * alpha[r] + s[r * kLdF + lane + 32];
    }
    __syncwarp();
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = i0 + warp * kRows + r;
    if (i >= L) continue;
    const bool zeroed = a.zero_padded_queries && mask != nullptr && mask[i] == 0;
    const float inv = (zeroed || l[r] <= 0.0f) ? 0.0f : 1.0f / l[r];
    out[static_cast<size_t>(i) * kD + lane] = Elem<T>::Make(o[r * kLdF + lane] * inv);
    out[static_cast<size_t>(i) * kD + lane + 32] = Elem<T>::Make(o[r * kLdF + lane + 32] * inv);
  }
}

// The kernel's shared memory is above the 48 KB a launch gets unasked: raised once per device
// (on the first, eager, launch there, so that no CUDA graph capture has to).
constexpr int kMaxDevices = 64;

template <typename T>
cudaError_t AllowSharedMemory() {
  static std::atomic<bool> done[kMaxDevices];
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error != cudaSuccess) return error;
  if (device >= 0 && device < kMaxDevices && done[device].load(std::memory_order_acquire)) return cudaSuccess;
  error = cudaFuncSetAttribute(TableAttentionKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kSharedBytes));
  if (error == cudaSuccess && device >= 0 && device < kMaxDevices) done[device].store(true, std::memory_order_release);
  return error;
}

template <typename T>
cudaError_t Launch(const TableAttentionArgs& a, cudaStream_t stream) {
  const cudaError_t error = AllowSharedMemory<T>();
  if (error != cudaSuccess) return error;
  const dim3 grid(static_cast<unsigned>(a.heads) * static_cast<unsigned>(a.batch),
                  static_cast<unsigned>((a.length + kTile - 1) / kTile));
  TableAttentionKernel<T><<<grid, kThreads, kSharedBytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

bool TableAttentionKernelSupports(const TableAttentionArgs& args) {
  return args.head_dim == kD &&
         (args.dtype == TableAttentionDtype::kBFloat16 || args.dtype == TableAttentionDtype::kHalf);
}

int LaunchTableAttention(const TableAttentionArgs& args, void* stream) {
  if (!TableAttentionKernelSupports(args)) return static_cast<int>(cudaErrorInvalidValue);
  if (args.heads <= 0 || args.batch <= 0 || args.length <= 0) return static_cast<int>(cudaSuccess);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const cudaError_t error = args.dtype == TableAttentionDtype::kBFloat16 ? Launch<__nv_bfloat16>(args, s)
                                                                          : Launch<__half>(args, s);
  return static_cast<int>(error);
}

const char* TableAttentionErrorString(int error) {
  return cudaGetErrorString(static_cast<cudaError_t>(error));
}

}  // namespace relserve
