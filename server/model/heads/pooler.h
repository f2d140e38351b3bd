#ifndef RELSERVE_SERVER_MODEL_POOLER_H_
#define RELSERVE_SERVER_MODEL_POOLER_H_

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/activation.h"
#include "server/model/layers/layers.h"
#include "server/model_config/sentence_transformers_config.h"

namespace relserve {

// Turns token states into one vector per sequence, as sentence-transformers' Pooling, Dense
// and Normalize modules do. Runs in float32 whatever the model's dtype.
class Pooler {
 public:
  static absl::StatusOr<Pooler> Create(const PoolingConfig& pooling, const std::vector<DenseConfig>& dense,
                                       bool normalize, int hidden_size);

  // hidden [B, L, H], attention_mask [B, L] (int64) -> [B, output_dim()] float32. With
  // `normalize` false the Normalize module is left out (Pooling and Dense still apply).
  at::Tensor operator()(const at::Tensor& hidden, const at::Tensor& attention_mask, bool normalize = true) const;
  // The Normalize module alone (L2, eps 1e-12), on the unnormalised output; `pooled` unchanged
  // when the modules have none.
  at::Tensor Normalize(const at::Tensor& pooled) const;

  // Moves the Dense modules' weights to `device`, where the hidden states will be.
  void MoveTo(const c10::Device& device);
  // The Dense modules' projections (float32), for a packed GEMM to take once they are where they
  // run (after MoveTo).
  std::vector<Linear*> Linears();

  int output_dim() const { return output_dim_; }
  // Whether the pooling reads each sequence's first token alone (CLS, no other mode): hidden may
  // then be [B, 1, H].
  bool ReadsFirstTokenOnly() const {
    return pooling_.cls && !pooling_.max && !pooling_.mean && !pooling_.mean_sqrt_len && !pooling_.weighted_mean &&
           !pooling_.last_token;
  }
  // The modes, the Dense widths and Normalize, for ModelInfo.
  PoolingInfo Info() const;

 private:
  struct Dense {
    Linear linear;
    Activation act;
  };
  PoolingConfig pooling_;
  std::vector<Dense> dense_;
  bool normalize_ = false;
  int output_dim_ = 0;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_POOLER_H_
