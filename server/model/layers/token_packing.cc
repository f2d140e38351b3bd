#include "server/model/layers/token_packing.h"

#include <ATen/ATen.h>

namespace relserve {

TokenPacking::TokenPacking(const at::Tensor& attention_mask, const at::Tensor& rows)
    : batch_(attention_mask.size(0)), length_(attention_mask.size(1)) {
  rows_ = rows.defined() ? rows : attention_mask.reshape({-1}).ne(0).nonzero().reshape({-1});
  tokens_ = rows_.size(0);
}

at::Tensor TokenPacking::Pack(const at::Tensor& padded) const {
  std::vector<int64_t> shape = padded.sizes().vec();
  shape.erase(shape.begin());
  shape[0] = batch_ * length_;
  return padded.reshape(shape).index_select(0, rows_);
}

at::Tensor TokenPacking::Unpack(const at::Tensor& packed) const {
  std::vector<int64_t> shape = packed.sizes().vec();
  shape[0] = batch_ * length_;
  at::Tensor out = at::zeros(shape, packed.options());
  out.index_copy_(0, rows_, packed);
  shape[0] = length_;
  shape.insert(shape.begin(), batch_);
  return out.view(shape);
}

at::Tensor TokenPacking::UnpackHeads(const at::Tensor& packed, int64_t parts, int64_t heads) const {
  const int64_t D = packed.size(-1) / (parts * heads);
  at::Tensor out = at::zeros({parts, heads, batch_ * length_, D}, packed.options());
  out.index_copy_(2, rows_, packed.view({tokens_, parts, heads, D}).permute({1, 2, 0, 3}));
  return out.view({parts, heads, batch_, length_, D});
}

at::Tensor TokenPacking::PackHeads(const at::Tensor& per_head) const {
  const int64_t heads = per_head.size(0), D = per_head.size(3);
  return per_head.reshape({heads, batch_ * length_, D})
      .index_select(1, rows_)
      .permute({1, 0, 2})
      .reshape({tokens_, heads * D});
}

at::Tensor TokenPacking::FirstTokenRows() const {
  // rows_ is ascending: the first row at or past b * L.
  return at::searchsorted(rows_, at::arange(batch_, rows_.options()) * length_);
}

at::Tensor SplitHeads(const at::Tensor& rows, const TokenPacking* packing, int64_t batch, int64_t length,
                      int64_t parts, int64_t heads) {
  if (packing != nullptr) return packing->UnpackHeads(rows, parts, heads);
  const int64_t head_size = rows.size(-1) / (parts * heads);
  at::Tensor view = rows.view({batch, length, parts, heads, head_size}).permute({2, 3, 0, 1, 4});
  // On the CPU the view itself: its attention paths read it strided (the tiles) or copy what they
  // need laid out otherwise (LibTorch's products). Other devices' kernels take it contiguous.
  return rows.device().is_cpu() ? view : view.contiguous();
}

at::Tensor MergeHeads(const at::Tensor& per_head, const TokenPacking* packing) {
  if (packing != nullptr) return packing->PackHeads(per_head);
  const int64_t heads = per_head.size(0), batch = per_head.size(1), length = per_head.size(2);
  return per_head.permute({1, 2, 0, 3}).reshape({batch * length, heads * per_head.size(3)});
}

}  // namespace relserve
