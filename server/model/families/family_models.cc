#include "server/model/families/family_models.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/model/families/bert/bert_model.h"
#include "server/model/families/deberta_v2/deberta_v2_model.h"
#include "server/model/families/mpnet/mpnet_model.h"
#include "server/model/families/t5/t5_encoder_model.h"
#include "server/model/families/xlnet/xlnet_model.h"

namespace relserve {
namespace {

using LoadFn = absl::StatusOr<std::unique_ptr<EncoderModel>> (*)(const ModelConfig&, WeightLoader&);

template <typename Model>
absl::StatusOr<std::unique_ptr<EncoderModel>> LoadAs(const ModelConfig& config, WeightLoader& weights) {
  auto model = Model::Load(config, weights);
  if (!model.ok()) return model.status();
  return std::unique_ptr<EncoderModel>(std::move(*model));
}

struct Loader {
  const char* family;  // FamilyDescriptor::name()
  LoadFn load;
};

// A new family's model goes here (and its descriptor in family_registry.cc).
constexpr Loader kLoaders[] = {
    {"deberta-v2", &LoadAs<DebertaV2Model>},
    {"t5", &LoadAs<T5EncoderModel>},
    {"bert", &LoadAs<BertModel>},
    {"mpnet", &LoadAs<MpnetModel>},
    {"xlnet", &LoadAs<XlnetModel>},
};

const Loader* FindLoader(const FamilyDescriptor& family) {
  for (const Loader& l : kLoaders) {
    if (std::strcmp(l.family, family.name()) == 0) return &l;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EncoderModel>> LoadFamilyModel(const ModelConfig& config, WeightLoader& weights) {
  const Loader* loader = config.family == nullptr ? nullptr : FindLoader(*config.family);
  if (loader == nullptr) {
    return absl::UnimplementedError(absl::StrCat("no model is registered for model_type \"", config.model_type, "\""));
  }
  return loader->load(config, weights);
}

bool HasFamilyModel(const FamilyDescriptor& family) { return FindLoader(family) != nullptr; }

}  // namespace relserve
