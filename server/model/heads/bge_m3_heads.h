#ifndef RELSERVE_SERVER_MODEL_BGE_M3_HEADS_H_
#define RELSERVE_SERVER_MODEL_BGE_M3_HEADS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "server/model/layers/layers.h"

namespace relserve {

// BAAI/bge-m3's heads beside its XLMRobertaModel, as FlagEmbedding's BGE-M3 model
// (FlagEmbedding/inference/embedder/encoder_only/m3.py and its finetune model) loads them with
// torch.load from the model directory: sparse_linear.pt, a state dict {weight [1, H], bias [1]},
// and colbert_linear.pt, {weight [D, H], bias [D]}. Either may be there without the other.
// Run in float32 on the model's device. Immutable once loaded.
class BgeM3Heads {
 public:
  static constexpr char kSparseFile[] = "sparse_linear.pt";
  static constexpr char kColbertFile[] = "colbert_linear.pt";

  // Reads whichever of the two files `dir` holds (neither: an object with no head) with the
  // pytorch_model.bin reader. INVALID_ARGUMENT naming the file and the tensor for a missing
  // "weight" or "bias", a shape other than the above (H = hidden_size), or a tensor besides
  // them; the reader's errors, prefixed with the file, for a file it cannot read.
  static absl::StatusOr<BgeM3Heads> Load(const std::string& dir, int64_t hidden_size, const c10::Device& device);

  bool has_sparse() const { return sparse_.defined(); }
  bool has_colbert() const { return colbert_.defined(); }
  int64_t colbert_dim() const { return has_colbert() ? colbert_.out_features() : 0; }
  // The heads present, for a packed GEMM to take (OutputHeads::Linears).
  std::vector<Linear*> Linears();

  // The sparse head's token weights relu(sparse_linear(h)): token states [N, H] -> [N].
  at::Tensor TokenWeights(const at::Tensor& tokens) const;
  // colbert_linear(h) for every token, each row divided by its L2 norm (at least 1e-12, as
  // torch.nn.functional.normalize): [N, H] -> [N, D]. Which tokens count (all but a sequence's
  // first) is the caller's choice.
  at::Tensor ColbertVectors(const at::Tensor& tokens) const;

 private:
  Linear sparse_;
  Linear colbert_;
};

// FlagEmbedding's _process_token_weights for one sequence: for each token id the largest of its
// tokens' weights, leaving out the ids in `dropped` (the tokenizer's cls, eos, pad and unk) and
// weights that are not above 0; (id, weight) with ids ascending. `weights` holds ids.size()
// entries.
std::vector<std::pair<int32_t, float>> LexicalWeights(const std::vector<int32_t>& ids, const float* weights,
                                                      const std::vector<int32_t>& dropped);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_BGE_M3_HEADS_H_
