#include "server/model_config/model_config.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/model_config/model_limits.h"
#include "server/util/status_macros.h"

namespace relserve {

using nlohmann::json;

absl::Status ReadTokenId(const JsonFieldReader& r, const char* key, int vocab_size, int* out) {
  RETURN_IF_ERROR(r.Int(key, out, 0, kMaxVocabSize));
  if (*out >= vocab_size) {
    return r.Error(key, absl::StrCat("is ", *out, ", outside the vocabulary [0, ", vocab_size, ") of vocab_size"));
  }
  return absl::OkStatus();
}

absl::Status CheckActivation(const JsonFieldReader& r, const char* key, const std::string& name) {
  if (IsSupportedActivation(name)) return absl::OkStatus();
  return r.Error(key, absl::StrCat("names activation \"", name, "\", which is not supported (supported: ",
                                   absl::StrJoin(SupportedActivations(), ", "), ")"));
}

absl::Status ReadClassificationLabels(const JsonFieldReader& r, const json& j, ModelConfig* config) {
  int num_labels = 2;
  RETURN_IF_ERROR(r.Int("num_labels", &num_labels, 1, kMaxLabels));
  if (r.Has("id2label")) {
    const json& m = j.at("id2label");
    if (!m.is_object() || m.empty()) {
      return r.Error("id2label", absl::StrCat("must be a non-empty object of index -> name, got ",
                                              JsonValueForMessage(m)));
    }
    if (m.size() > static_cast<size_t>(kMaxLabels)) {
      return r.Error("id2label", absl::StrCat("has ", m.size(), " labels, more than the limit of ", kMaxLabels));
    }
    num_labels = static_cast<int>(m.size());
    config->id2label.assign(num_labels, "");
    std::vector<bool> seen(num_labels, false);
    for (auto it = m.begin(); it != m.end(); ++it) {
      int index = -1;
      if (!absl::SimpleAtoi(it.key(), &index) || std::to_string(index) != it.key()) index = -1;
      if (index < 0 || index >= num_labels || seen[index] || !it.value().is_string()) {
        return r.Error("id2label", absl::StrCat("has a bad entry \"", it.key(), "\": ", JsonValueForMessage(it.value()),
                                                " (keys must be 0..", num_labels - 1, ", each once; values strings)"));
      }
      seen[index] = true;
      config->id2label[index] = it.value().get<std::string>();
    }
  } else {
    config->id2label.clear();
    for (int i = 0; i < num_labels; ++i) config->id2label.push_back(absl::StrCat("LABEL_", i));
  }
  config->num_labels = num_labels;
  RETURN_IF_ERROR(r.String("problem_type", &config->problem_type));
  if (!config->problem_type.empty() && config->problem_type != "single_label_classification" &&
      config->problem_type != "multi_label_classification" && config->problem_type != "regression") {
    return r.Error("problem_type", absl::StrCat("\"", config->problem_type, "\" is not one of "
                                                "single_label_classification, multi_label_classification, regression"));
  }
  return absl::OkStatus();
}

const std::vector<std::string>& SupportedActivations() {
  static const std::vector<std::string> kNames = {
      "gelu",       "gelu_new",  "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "gelu_python",
      "quick_gelu", "gelu_10",   "relu",              "relu2",     "relu6",         "leaky_relu",
      "silu",       "swish",     "mish",              "tanh",      "sigmoid",       "linear"};
  return kNames;
}

bool IsSupportedActivation(const std::string& name) {
  const auto& names = SupportedActivations();
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace relserve
