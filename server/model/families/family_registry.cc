#include "server/model/families/family_registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/model/families/bert/bert_family.h"
#include "server/model/families/deberta_v2/deberta_v2_family.h"
#include "server/model/families/mpnet/mpnet_family.h"
#include "server/model/families/t5/t5_family.h"
#include "server/model/families/xlnet/xlnet_family.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {

using nlohmann::json;

const std::vector<const FamilyDescriptor*>& AllFamilies() {
  // A new family's descriptor goes here (and its model loader in family_models.cc).
  static const std::vector<const FamilyDescriptor*> kFamilies = {
      &DebertaV2Family(),
      &T5Family(),
      &BertFamily(),
      &MpnetFamily(),
      &XlnetFamily(),
  };
  return kFamilies;
}

const FamilyDescriptor* FindFamilyByModelType(const std::string& model_type) {
  for (const FamilyDescriptor* f : AllFamilies()) {
    const auto types = f->model_types();
    if (std::find(types.begin(), types.end(), model_type) != types.end()) return f;
  }
  return nullptr;
}

const FamilyDescriptor* FindFamilyByCreateVariant(const std::string& variant) {
  for (const FamilyDescriptor* f : AllFamilies()) {
    const auto variants = f->create_variants();
    if (std::find(variants.begin(), variants.end(), variant) != variants.end()) return f;
  }
  return nullptr;
}

std::string SupportedModelTypes() {
  std::vector<std::string> all;
  for (const FamilyDescriptor* f : AllFamilies()) {
    for (const std::string& t : f->model_types()) all.push_back(t);
  }
  return absl::StrJoin(all, ", ");
}

std::string SupportedCreateVariants() {
  std::vector<std::string> all;
  for (const FamilyDescriptor* f : AllFamilies()) {
    for (const std::string& v : f->create_variants()) all.push_back(v);
  }
  return absl::StrJoin(all, ", ");
}

// vLLM's reading of config.json: is_matryoshka, and matryoshka_dimensions (a list of positive
// sizes, which makes the model Matryoshka-trained).
static absl::Status ReadMatryoshka(const JsonFieldReader& r, const json& j, ModelConfig* config) {
  if (r.Has("is_matryoshka")) {
    bool is = false;
    RETURN_IF_ERROR(r.Bool("is_matryoshka", &is));
    config->is_matryoshka = is;
  }
  if (!r.Has("matryoshka_dimensions")) return absl::OkStatus();
  const json& dims = j.at("matryoshka_dimensions");
  if (dims.is_null()) return absl::OkStatus();
  if (!dims.is_array()) {
    return r.Error("matryoshka_dimensions", absl::StrCat("must be a list of positive integers, got ",
                                                         JsonValueForMessage(dims)));
  }
  for (const json& d : dims) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > (int64_t{1} << 30)) {
      return r.Error("matryoshka_dimensions", absl::StrCat("must be a list of positive integers, got ",
                                                           JsonValueForMessage(d), " in it"));
    }
    config->matryoshka_dimensions.push_back(static_cast<int>(d.get<int64_t>()));
  }
  if (!config->matryoshka_dimensions.empty()) config->is_matryoshka = true;
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(const json& j, const std::string& source) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  JsonFieldReader r(j, source);
  ModelConfig config;
  RETURN_IF_ERROR(r.String("model_type", &config.model_type));
  if (config.model_type.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": has no \"model_type\""));
  }
  config.family = FindFamilyByModelType(config.model_type);
  if (config.family == nullptr) {
    return r.Error("model_type", absl::StrCat("\"", config.model_type, "\" is not supported (supported: ",
                                              SupportedModelTypes(), ")"));
  }

  const std::vector<ArchitectureSpec> supported = config.family->architectures(config.model_type);
  const ArchitectureSpec* arch = &supported.front();
  if (r.Has("architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.empty() || !a[0].is_string()) {
      return r.Error("architectures", absl::StrCat("must be a non-empty list of class names, got ",
                                                   JsonValueForMessage(a)));
    }
    const std::string name = a[0].get<std::string>();
    auto it = std::find_if(supported.begin(), supported.end(), [&](const ArchitectureSpec& s) { return s.name == name; });
    if (it == supported.end()) {
      std::vector<std::string> names;
      for (const ArchitectureSpec& s : supported) names.push_back(s.name);
      return r.Error("architectures", absl::StrCat(
          "names architecture \"", name, "\", which is not supported for model_type \"",
          config.model_type, "\" (supported: ", absl::StrJoin(names, ", "), ")"));
    }
    arch = &*it;
  }
  config.architecture = arch->name;
  config.head = arch->head;

  RETURN_IF_ERROR(r.String("torch_dtype", &config.torch_dtype));
  RETURN_IF_ERROR(ReadMatryoshka(r, j, &config));
  RETURN_IF_ERROR(config.family->ParseConfig(r, j, &config));
  if (config.head == HeadKind::kSequenceClassification || config.head == HeadKind::kTokenClassification) {
    RETURN_IF_ERROR(ReadClassificationLabels(r, j, &config));
  }
  if (config.head == HeadKind::kMaskedLm) {
    RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &config.tie_word_embeddings));
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = JoinPath(model_dir, "config.json");
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  return ParseModelConfig(j, path);
}

}  // namespace relserve
