#ifndef RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_REGISTRY_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_REGISTRY_H_

// Every model family relserve knows, and config.json read through them. Torch-free.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/model/families/family_descriptor.h"
#include "server/model_config/model_config.h"

namespace relserve {

// The descriptors, in the order messages list them.
const std::vector<const FamilyDescriptor*>& AllFamilies();
// nullptr when no family reads that model_type / creates that variant.
const FamilyDescriptor* FindFamilyByModelType(const std::string& model_type);
const FamilyDescriptor* FindFamilyByCreateVariant(const std::string& variant);
// Every model_type / create variant, comma-separated, for messages.
std::string SupportedModelTypes();
std::string SupportedCreateVariants();

// Parses config.json as transformers would: unknown keys are ignored, known keys with values of
// the wrong type or outside what the reference implementation accepts are errors
// (INVALID_ARGUMENT) that name the key. Reads model_type, architectures (against the family's
// list), torch_dtype and, for classification heads, num_labels / id2label / problem_type; the
// family's descriptor reads the rest. `source` names the file in messages.
absl::StatusOr<ModelConfig> ParseModelConfig(const nlohmann::json& json, const std::string& source);
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_REGISTRY_H_
