#include "server/tokenizer/families/tokenizer_class.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

constexpr char kGenericFastTokenizer[] = "PreTrainedTokenizerFast";

const std::map<std::string, TokenizerFamily>& ClassFamilies() {
  static const auto* families = [] {
    auto* map = new std::map<std::string, TokenizerFamily>;
    for (const TokenizerFamilyDescriptor* family : AllTokenizerFamilyDescriptors()) {
      for (const std::string& name : family->tokenizer_classes) map->emplace(name, family->family);
    }
    return map;
  }();
  return *families;
}

}  // namespace

std::optional<TokenizerFamily> TokenizerFamilyOfClass(const std::string& tokenizer_class) {
  std::string name = tokenizer_class;
  if (absl::EndsWith(name, "Fast")) name.resize(name.size() - 4);
  auto it = ClassFamilies().find(name);
  if (it == ClassFamilies().end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<TokenizerFamily> ResolveTokenizerFamily(const std::string& model_dir,
                                                       TokenizerFamily model_family) {
  const std::string path = JoinPath(model_dir, "tokenizer_config.json");
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(path));
  if (!present) return model_family;
  ASSIGN_OR_RETURN(const nlohmann::json json, ReadJsonFile(path));
  std::string tokenizer_class;
  RETURN_IF_ERROR(JsonFieldReader(json, path).String("tokenizer_class", &tokenizer_class));
  if (tokenizer_class.empty() || tokenizer_class == kGenericFastTokenizer) return model_family;
  if (std::optional<TokenizerFamily> family = TokenizerFamilyOfClass(tokenizer_class)) {
    return *family;
  }
  std::string known;
  for (const auto& [name, family] : ClassFamilies()) {
    absl::StrAppend(&known, known.empty() ? "" : ", ", name);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      path, ": \"tokenizer_class\" is \"", tokenizer_class,
      "\", which relserve has no tokenizer for (it has ", known, ", each also as ...Fast, and ",
      kGenericFastTokenizer, ")"));
}

}  // namespace relserve
