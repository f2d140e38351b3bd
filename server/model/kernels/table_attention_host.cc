#include "server/model/kernels/table_attention_host.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace relserve {
namespace {

template <typename E>
void Run(const TableAttentionArgs& a) {
  const int L = a.length, D = a.head_dim, B = a.batch, T = kTableAttentionTile;
  const E* q = static_cast<const E*>(a.q);
  const E* k = static_cast<const E*>(a.k);
  const E* v = static_cast<const E*>(a.v);
  const E* c2p = static_cast<const E*>(a.c2p);
  const E* p2c = static_cast<const E*>(a.p2c);
  E* out = static_cast<E*>(a.out);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  at::parallel_for(0, static_cast<int64_t>(a.heads) * B, 1, [&](int64_t g0, int64_t g1) {
    std::vector<float> x(T), o(D);
    for (int64_t g = g0; g < g1; ++g) {
      const int b = static_cast<int>(g % B);
      const int64_t base = g * L;  // row of (g, position 0) in [groups * L, ...] tensors
      for (int i = 0; i < L; ++i) {
        E* out_row = out + (base + i) * D;
        if (a.zero_padded_queries && a.key_mask != nullptr && a.key_mask[b * L + i] == 0) {
          std::fill(out_row, out_row + D, E(0.0f));
          continue;
        }
        const E* qi = q + (base + i) * D;
        float m = neg_inf, l = 0.0f;
        std::fill(o.begin(), o.end(), 0.0f);
        for (int j0 = 0; j0 < L; j0 += T) {
          const int n = std::min(T, L - j0);
          float tile_max = neg_inf;
          for (int c = 0; c < n; ++c) {
            const int j = j0 + c;
            float s = neg_inf;
            if (a.key_mask == nullptr || a.key_mask[b * L + j] != 0) {
              const E* kj = k + (base + j) * D;
              s = 0.0f;
              for (int d = 0; d < D; ++d) s += static_cast<float>(qi[d]) * static_cast<float>(kj[d]);
              const int e = TableAttentionOffset(j - i, L);
              if (c2p != nullptr) s += static_cast<float>(c2p[(base + i) * a.rc + a.c2p_index[e]]);
              if (p2c != nullptr) s += static_cast<float>(p2c[(g * a.rp + a.p2c_index[e]) * L + j]);
            }
            x[c] = s;
            tile_max = std::max(tile_max, s);
          }
          const float new_m = std::max(m, tile_max);
          const float alpha = m == neg_inf ? 0.0f : std::exp(m - new_m);
          float sum = 0.0f;
          for (int d = 0; d < D; ++d) o[d] *= alpha;
          for (int c = 0; c < n; ++c) {
            const float p = x[c] == neg_inf ? 0.0f : std::exp(x[c] - new_m);
            sum += p;
            const float rounded = static_cast<float>(E(p));
            const E* vj = v + (base + j0 + c) * D;
            for (int d = 0; d < D; ++d) o[d] += rounded * static_cast<float>(vj[d]);
          }
          l = l * alpha + sum;
          m = new_m;
        }
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        for (int d = 0; d < D; ++d) out_row[d] = E(o[d] * inv);
      }
    }
  });
}

}  // namespace

void TableAttentionOnHost(const TableAttentionArgs& args) {
  switch (args.dtype) {
    case TableAttentionDtype::kBFloat16: Run<c10::BFloat16>(args); break;
    case TableAttentionDtype::kHalf: Run<c10::Half>(args); break;
    case TableAttentionDtype::kFloat: Run<float>(args); break;
  }
}

}  // namespace relserve
