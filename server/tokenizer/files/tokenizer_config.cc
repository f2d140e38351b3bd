#include "server/tokenizer/files/tokenizer_config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status WrongType(const std::string& what, const std::string& key, const char* want,
                       const nlohmann::json& value) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": \"", key, "\" must be ", want, ", got ", JsonValueForMessage(value)));
}

// An AddedToken written out as an object: "content" and the optional flags.
absl::Status ParseAddedTokenObject(const nlohmann::json& object, const std::string& what,
                                   const std::string& key, std::string* content,
                                   AddedTokenFlags* flags) {
  auto it = object.find("content");
  if (it == object.end() || !it->is_string()) {
    return WrongType(what, key, "a string or an object with a string \"content\"", object);
  }
  *content = it->get<std::string>();
  const JsonFieldReader reader(object, absl::StrCat(what, ": \"", key, "\""));
  RETURN_IF_ERROR(reader.Bool("lstrip", &flags->lstrip));
  RETURN_IF_ERROR(reader.Bool("rstrip", &flags->rstrip));
  RETURN_IF_ERROR(reader.Bool("single_word", &flags->single_word));
  RETURN_IF_ERROR(reader.Bool("special", &flags->special));
  if (reader.Has("normalized")) {
    bool normalized = false;
    RETURN_IF_ERROR(reader.Bool("normalized", &normalized));
    flags->normalized = normalized;
  }
  return absl::OkStatus();
}

// One special token: a string, or an AddedToken object whose flags are remembered.
absl::Status ParseToken(const nlohmann::json& value, const std::string& what,
                        const std::string& key, std::string* name, TokenizerConfig* config) {
  if (value.is_string()) {
    *name = value.get<std::string>();
    return absl::OkStatus();
  }
  if (!value.is_object()) {
    return WrongType(what, key, "a string or an object with a string \"content\"", value);
  }
  AddedTokenFlags flags;
  flags.special = true;  // what transformers makes of a special token given as an object
  RETURN_IF_ERROR(ParseAddedTokenObject(value, what, key, name, &flags));
  config->token_flags[*name] = flags;
  return absl::OkStatus();
}

absl::Status ApplyToken(const nlohmann::json& json, const std::string& what, const std::string& key,
                        std::string* name, TokenizerConfig* config) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  return ParseToken(*it, what, key, name, config);
}

absl::Status ApplyTokenList(const nlohmann::json& json, const std::string& what,
                            const std::string& key, std::vector<std::string>* names,
                            TokenizerConfig* config) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return WrongType(what, key, "a list of tokens", *it);
  std::vector<std::string> parsed;
  for (size_t i = 0; i < it->size(); ++i) {
    std::string name;
    RETURN_IF_ERROR(ParseToken((*it)[i], what, absl::StrCat(key, "[", i, "]"), &name, config));
    parsed.push_back(std::move(name));
  }
  *names = std::move(parsed);
  return absl::OkStatus();
}

absl::Status ApplyStringList(const nlohmann::json& json, const std::string& what,
                             const std::string& key, std::vector<std::string>* out) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return WrongType(what, key, "a list of strings", *it);
  std::vector<std::string> parsed;
  for (const nlohmann::json& item : *it) {
    if (!item.is_string()) return WrongType(what, key, "a list of strings", *it);
    parsed.push_back(item.get<std::string>());
  }
  *out = std::move(parsed);
  return absl::OkStatus();
}

absl::Status ApplyAddedTokensDecoder(const nlohmann::json& json, const std::string& what,
                                     TokenizerConfig* config) {
  auto it = json.find("added_tokens_decoder");
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_object()) {
    return WrongType(what, "added_tokens_decoder", "an object of id: AddedToken", *it);
  }
  for (const auto& [id_text, token] : it->items()) {
    const std::string key = absl::StrCat("added_tokens_decoder\": \"", id_text);
    char* end = nullptr;
    const long long id = std::strtoll(id_text.c_str(), &end, 10);
    if (id_text.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": \"added_tokens_decoder\" has the key \"", id_text,
          "\", which is not a token id (an integer in [0, 2^31))"));
    }
    if (!token.is_object()) return WrongType(what, key, "an AddedToken object", token);
    AddedTokenEntry entry;
    RETURN_IF_ERROR(ParseAddedTokenObject(token, what, key, &entry.content, &entry.flags));
    config->token_flags[entry.content] = entry.flags;
    config->added_tokens[static_cast<int32_t>(id)] = std::move(entry);
  }
  return absl::OkStatus();
}

absl::Status ApplyMaxLength(const nlohmann::json& json, const std::string& what,
                            std::optional<int>* max_length) {
  auto it = json.find("model_max_length");
  if (it == json.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return WrongType(what, "model_max_length", "a number", *it);
  const double value = it->get<double>();
  if (!(value >= 1) || std::floor(value) != value) {
    return WrongType(what, "model_max_length", "a positive integer", *it);
  }
  // transformers saves int(1e30) when a tokenizer has no limit of its own.
  if (value > std::numeric_limits<int32_t>::max()) return absl::OkStatus();
  *max_length = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status ApplySwitches(const nlohmann::json& json, const std::string& what,
                           TokenizerConfig* config) {
  const JsonFieldReader reader(json, what);
  RETURN_IF_ERROR(reader.Bool("do_lower_case", &config->do_lower_case));
  RETURN_IF_ERROR(reader.Bool("do_basic_tokenize", &config->do_basic_tokenize));
  RETURN_IF_ERROR(reader.Bool("tokenize_chinese_chars", &config->tokenize_chinese_chars));
  RETURN_IF_ERROR(reader.Bool("split_by_punct", &config->split_by_punct));
  RETURN_IF_ERROR(reader.Bool("remove_space", &config->remove_space));
  RETURN_IF_ERROR(reader.Bool("keep_accents", &config->keep_accents));
  if (reader.Has("add_prefix_space")) {
    bool add_prefix_space = false;
    RETURN_IF_ERROR(reader.Bool("add_prefix_space", &add_prefix_space));
    config->add_prefix_space = add_prefix_space;
  }
  RETURN_IF_ERROR(reader.Bool("legacy", &config->legacy));
  if (auto it = json.find("strip_accents"); it != json.end()) {
    // null is transformers' None: follow do_lower_case.
    if (it->is_null()) {
      config->strip_accents.reset();
    } else if (it->is_boolean()) {
      config->strip_accents = it->get<bool>();
    } else {
      return WrongType(what, "strip_accents", "true, false or null", *it);
    }
  }
  RETURN_IF_ERROR(reader.Int("max_input_chars_per_word", &config->max_input_chars_per_word, 0,
                             std::numeric_limits<int32_t>::max()));
  RETURN_IF_ERROR(reader.Int("extra_ids", &config->extra_ids, 0, 1 << 20));
  return ApplyStringList(json, what, "never_split", &config->never_split);
}

absl::StatusOr<bool> ApplyJsonFileIfPresent(const std::string& path, TokenizerConfig* config) {
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(path));
  if (!present) return false;
  ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path));
  RETURN_IF_ERROR(ApplyTokenizerConfigJson(json, path, config));
  return json.contains("added_tokens_decoder") && !json["added_tokens_decoder"].is_null();
}

// added_tokens.json: {"token": id}, tokens added after training without their flags.
absl::Status ApplyAddedTokensFileIfPresent(const std::string& path, TokenizerConfig* config) {
  ASSIGN_OR_RETURN(const bool present, OptionalFileExists(path));
  if (!present) return absl::OkStatus();
  ASSIGN_OR_RETURN(nlohmann::json json, ReadJsonFile(path));
  if (!json.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  for (const auto& [content, id] : json.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return WrongType(path, content, "a token id (an integer in [0, 2^31))", id);
    }
    AddedTokenEntry entry;
    entry.content = content;
    config->added_tokens[static_cast<int32_t>(id.get<int64_t>())] = std::move(entry);
  }
  return absl::OkStatus();
}

}  // namespace

TokenizerConfig DefaultTokenizerConfig(const TokenizerFamilyDescriptor& family) {
  TokenizerConfig config;
  config.special_tokens = family.special_tokens;
  config.do_lower_case = family.do_lower_case;
  return config;
}

absl::Status ApplyTokenizerConfigJson(const nlohmann::json& json, const std::string& what,
                                      TokenizerConfig* config) {
  if (!json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not a JSON object"));
  }
  RETURN_IF_ERROR(ApplySwitches(json, what, config));
  RETURN_IF_ERROR(ApplyMaxLength(json, what, &config->model_max_length));
  SpecialTokenNames& names = config->special_tokens;
  RETURN_IF_ERROR(ApplyToken(json, what, "pad_token", &names.pad, config));
  RETURN_IF_ERROR(ApplyToken(json, what, "unk_token", &names.unk, config));
  RETURN_IF_ERROR(ApplyToken(json, what, "cls_token", &names.cls, config));
  RETURN_IF_ERROR(ApplyToken(json, what, "sep_token", &names.sep, config));
  RETURN_IF_ERROR(ApplyToken(json, what, "eos_token", &names.eos, config));
  RETURN_IF_ERROR(ApplyToken(json, what, "mask_token", &names.mask, config));
  RETURN_IF_ERROR(ApplyToken(json, what, "bos_token", &names.bos, config));
  RETURN_IF_ERROR(
      ApplyTokenList(json, what, "additional_special_tokens", &names.additional, config));
  return ApplyAddedTokensDecoder(json, what, config);
}

nlohmann::json SpecialTokensJson(const SpecialTokenNames& names) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, name] : {std::pair{"bos_token", &names.bos}, {"eos_token", &names.eos},
                                  {"unk_token", &names.unk}, {"sep_token", &names.sep},
                                  {"pad_token", &names.pad}, {"cls_token", &names.cls},
                                  {"mask_token", &names.mask}}) {
    if (!name->empty()) json[key] = *name;
  }
  if (!names.additional.empty()) json["additional_special_tokens"] = names.additional;
  return json;
}

absl::StatusOr<TokenizerConfig> ReadTokenizerConfig(const std::string& model_dir,
                                                    const TokenizerFamilyDescriptor& family) {
  TokenizerConfig config = DefaultTokenizerConfig(family);
  ASSIGN_OR_RETURN(const bool has_decoder,
                   ApplyJsonFileIfPresent(JoinPath(model_dir, "tokenizer_config.json"), &config));
  // special_tokens_map.json adds to additional_special_tokens rather than replacing them.
  const std::vector<std::string> additional = config.special_tokens.additional;
  RETURN_IF_ERROR(
      ApplyJsonFileIfPresent(JoinPath(model_dir, "special_tokens_map.json"), &config).status());
  std::vector<std::string> merged = additional;
  for (const std::string& name : config.special_tokens.additional) {
    if (std::find(merged.begin(), merged.end(), name) == merged.end()) merged.push_back(name);
  }
  config.special_tokens.additional = std::move(merged);
  if (!has_decoder) {
    RETURN_IF_ERROR(ApplyAddedTokensFileIfPresent(JoinPath(model_dir, "added_tokens.json"), &config));
  }
  return config;
}

}  // namespace relserve
