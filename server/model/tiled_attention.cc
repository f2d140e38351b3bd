#include "server/model/tiled_attention.h"

#include <limits>

namespace relserve {

int64_t TiledAttentionMaxTokens(TiledAttention tiled, int64_t packed_float32_rows, bool avx2_tiles) {
  constexpr int64_t kEvery = std::numeric_limits<int64_t>::max();
  switch (tiled) {
    case TiledAttention::kAuto:
      return TiledAttentionMaxTokens(
          avx2_tiles ? TiledAttention::kWithPackedProjections : TiledAttention::kWithPackedGemm,
          packed_float32_rows, avx2_tiles);
    case TiledAttention::kNever:
      return 0;
    case TiledAttention::kWithPackedGemm:
      return packed_float32_rows;
    case TiledAttention::kWithPackedProjections:
      return packed_float32_rows > 0 ? kEvery : 0;
    case TiledAttention::kAlways:
      return kEvery;
  }
  return 0;
}

int64_t BFloat16TiledAttentionMaxTokens(BFloat16TiledAttention tiled) {
  switch (tiled) {
    case BFloat16TiledAttention::kAuto:
      return kBFloat16TiledAttentionMaxTokens;
    case BFloat16TiledAttention::kNever:
      return 0;
    case BFloat16TiledAttention::kAlways:
      return std::numeric_limits<int64_t>::max();
  }
  return 0;
}

}  // namespace relserve
