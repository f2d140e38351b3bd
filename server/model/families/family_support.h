#ifndef RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_SUPPORT_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_SUPPORT_H_

// Helpers the families' descriptors share (torch-free): building a checkpoint layout, and the
// parts of config.json `create` writes the same way for every family.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "server/model/families/family_descriptor.h"

namespace relserve {

// Builds a CheckpointLayout in registration order, with transformers' initialisation kinds.
class LayoutBuilder {
 public:
  void Add(std::string name, std::vector<int64_t> shape, ModelTensorSpec::Init init = ModelTensorSpec::Init::kNormal);
  // A copy of `tied_to`'s values under another name.
  void AddTied(std::string name, std::vector<int64_t> shape, std::string tied_to);
  // nn.Linear: weight [out, in] (normal), bias [out] (zeros).
  void Linear(const std::string& prefix, int64_t in, int64_t out, bool bias);
  // nn.LayerNorm: weight (ones), bias (zeros).
  void LayerNorm(const std::string& prefix, int64_t n);
  std::vector<ModelTensorSpec> Take() { return std::move(specs_); }

 private:
  std::vector<ModelTensorSpec> specs_;
};

// The masked-LM head's tensors as save_pretrained writes them to model.safetensors: the bias
// under its first name (the aliases are dropped), dense and LayerNorm, and the decoder weight
// only when it is not tied to the word embeddings.
void AddMaskedLmHead(const MaskedLmHeadLayout& head, LayoutBuilder* s);

// INVALID_ARGUMENT "config: \"architectures\" cannot create a \"X\" (supported: ...)" for an
// architecture of `descriptor` that is not creatable.
absl::Status CheckCreatable(const FamilyDescriptor& descriptor, const ModelConfig& config);

// The shortest decimal that reads back as `value`, as a double: 0.02f -> 0.02, not
// 0.019999999552965164, which is what a Python float written to config.json looks like.
double ShortestDouble(float value);

// id2label / label2id "LABEL_i" for num_labels labels, as PretrainedConfig writes them.
void AddDefaultLabels(int num_labels, nlohmann::json* config);

// INVALID_ARGUMENT "heads: H does not divide hidden N" unless heads divides hidden.
absl::Status CheckHeadsDivideHidden(int heads, int hidden);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_SUPPORT_H_
