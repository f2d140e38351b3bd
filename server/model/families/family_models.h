#ifndef RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_MODELS_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_MODELS_H_

// The LibTorch half of the families: each descriptor's model. Used by the engine.

#include <memory>

#include "absl/status/statusor.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/families/family_descriptor.h"
#include "server/model_config/model_config.h"
#include "server/model/layers/weight_loader.h"

namespace relserve {

// Builds the model of config.family from the checkpoint: every tensor it needs, shapes and
// config sizes checked (errors name the tensor, its expected shape, the config key). Tensors
// left unused are the caller's to check (WeightLoader::CheckNoneUnused with the descriptor's
// IgnoredPrefixes). UNIMPLEMENTED for a family without a registered model.
absl::StatusOr<std::unique_ptr<EncoderModel>> LoadFamilyModel(const ModelConfig& config, WeightLoader& weights);

// Whether `family` has a model registered here.
bool HasFamilyModel(const FamilyDescriptor& family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_MODELS_H_
