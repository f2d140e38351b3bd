#include "server/serving/model_registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/quote.h"

namespace relserve {

void ModelRegistry::Add(ServedModel model) {
  if (default_.empty()) default_ = model.name;
  order_.push_back(model.name);
  for (const std::string& alias : model.aliases) aliases_[alias].push_back(model.name);
  std::string name = model.name;
  models_[name] = std::move(model);
}

absl::StatusOr<const ServedModel*> ModelRegistry::Find(const std::string& name) const {
  const std::string& key = name.empty() ? default_ : name;
  auto it = models_.find(key);
  if (it == models_.end()) {
    auto alias = aliases_.find(key);
    if (alias != aliases_.end() && alias->second.size() == 1) return &models_.at(alias->second[0]);
    if (alias != aliases_.end()) {
      return absl::NotFoundError(absl::StrCat("model ", Quote(key), " could be any of ",
                                              absl::StrJoin(alias->second, ", "), ": name one of them"));
    }
    return absl::NotFoundError(absl::StrCat("model ", Quote(key), " is not served here (served: ",
                                            absl::StrJoin(order_, ", "), ")"));
  }
  return &it->second;
}

std::vector<const ServedModel*> ModelRegistry::All() const {
  std::vector<const ServedModel*> out;
  for (const std::string& name : order_) out.push_back(&models_.at(name));
  return out;
}

}  // namespace relserve
