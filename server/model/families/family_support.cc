#include "server/model/families/family_support.h"

#include <charconv>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace relserve {

void LayoutBuilder::Add(std::string name, std::vector<int64_t> shape, ModelTensorSpec::Init init) {
  specs_.push_back(ModelTensorSpec{std::move(name), std::move(shape), init, ""});
}

void LayoutBuilder::AddTied(std::string name, std::vector<int64_t> shape, std::string tied_to) {
  specs_.push_back(ModelTensorSpec{std::move(name), std::move(shape), ModelTensorSpec::Init::kNormal, std::move(tied_to)});
}

void LayoutBuilder::Linear(const std::string& prefix, int64_t in, int64_t out, bool bias) {
  Add(prefix + ".weight", {out, in}, ModelTensorSpec::Init::kNormal);
  if (bias) Add(prefix + ".bias", {out}, ModelTensorSpec::Init::kZeros);
}

void LayoutBuilder::LayerNorm(const std::string& prefix, int64_t n) {
  Add(prefix + ".weight", {n}, ModelTensorSpec::Init::kOnes);
  Add(prefix + ".bias", {n}, ModelTensorSpec::Init::kZeros);
}

void AddMaskedLmHead(const MaskedLmHeadLayout& head, LayoutBuilder* s) {
  if (!head.bias_after_decoder) s->Add(head.bias.front(), {head.vocab}, ModelTensorSpec::Init::kZeros);
  s->Linear(head.dense, head.hidden, head.width, /*bias=*/true);
  s->LayerNorm(head.layer_norm, head.width);
  if (!head.tied) s->Add(head.decoder_weight, {head.vocab, head.width});
  if (head.bias_after_decoder) s->Add(head.bias.front(), {head.vocab}, ModelTensorSpec::Init::kZeros);
}

absl::Status CheckCreatable(const FamilyDescriptor& descriptor, const ModelConfig& config) {
  std::vector<std::string> creatable;
  bool ok = false;
  for (const ArchitectureSpec& a : descriptor.architectures(config.model_type)) {
    if (!a.creatable) continue;
    creatable.push_back(a.name);
    ok = ok || a.name == config.architecture;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("config: \"architectures\" cannot create a \"", config.architecture,
                                                 "\" (supported: ", absl::StrJoin(creatable, ", "), ")"));
}

double ShortestDouble(float value) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf) - 1, value);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

void AddDefaultLabels(int num_labels, nlohmann::json* config) {
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int i = 0; i < num_labels; ++i) {
    const std::string label = absl::StrCat("LABEL_", i);
    id2label[std::to_string(i)] = label;
    label2id[label] = i;
  }
  (*config)["id2label"] = std::move(id2label);
  (*config)["label2id"] = std::move(label2id);
}

absl::Status CheckHeadsDivideHidden(int heads, int hidden) {
  if (heads > 0 && hidden % heads == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("heads: ", heads, " does not divide hidden ", hidden));
}

}  // namespace relserve
