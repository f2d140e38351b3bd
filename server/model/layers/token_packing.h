#ifndef RELSERVE_SERVER_MODEL_LAYERS_TOKEN_PACKING_H_
#define RELSERVE_SERVER_MODEL_LAYERS_TOKEN_PACKING_H_

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace relserve {

// The real tokens of a padded batch, for running the per-token layers (projections,
// feed-forward, norms, activations) on them alone: padded positions cost nothing there, and
// only attention, which needs the [batch, length] layout, sees the padding.
class TokenPacking {
 public:
  // attention_mask: [batch, L], 1 = real token. rows, when defined, are the real tokens' flat
  // positions already (int64 [N], on the mask's device): on a GPU, finding them from the mask
  // would read the count back to the host and stall the stream.
  explicit TokenPacking(const at::Tensor& attention_mask, const at::Tensor& rows = at::Tensor());

  int64_t tokens() const { return tokens_; }  // N, the real tokens
  const at::Tensor& rows() const { return rows_; }  // int64 [N]: flat b * L + t of each real token

  // [batch, L, ...] -> [N, ...]: the real positions, in batch-major order.
  at::Tensor Pack(const at::Tensor& padded) const;
  // [N, ...] -> [batch, L, ...], zeros at padded positions.
  at::Tensor Unpack(const at::Tensor& packed) const;
  // [N, parts, heads, D] -> [parts, heads, batch, L, D] (attention's layout), zeros at padded
  // positions.
  at::Tensor UnpackHeads(const at::Tensor& packed, int64_t parts, int64_t heads) const;
  // [heads, batch, L, D] -> [N, heads * D].
  at::Tensor PackHeads(const at::Tensor& per_head) const;
  // int64 [batch]: the packed row of each sequence's position 0, which must be a real token (as
  // right padding leaves it); for a sequence whose position 0 is padding, the row of its first
  // real token, or past them all.
  at::Tensor FirstTokenRows() const;

 private:
  int64_t batch_ = 0, length_ = 0, tokens_ = 0;
  at::Tensor rows_;
};

// Attention's layout from a layer's fused projection, packed or not: rows [N or batch * L,
// parts * heads * D] -> [parts, heads, batch, L, D]; packing null means rows hold every position.
// Unpacked on the CPU, a strided view of rows (no copy); elsewhere contiguous.
at::Tensor SplitHeads(const at::Tensor& rows, const TokenPacking* packing, int64_t batch, int64_t length,
                      int64_t parts, int64_t heads);
// Back from attention: [heads, batch, L, D] -> [N or batch * L, heads * D].
at::Tensor MergeHeads(const at::Tensor& per_head, const TokenPacking* packing);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_LAYERS_TOKEN_PACKING_H_
