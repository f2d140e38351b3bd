#include "server/hub/file_selection.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "server/hub/hub_model_id.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

constexpr const char* kTokenizerFiles[] = {
    "spm.model",  "spiece.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt",  "vocab.json",   "merges.txt",     "added_tokens.json", "sentencepiece.bpe.model",
};
// Heads beside the weights that the engine reads: BAAI/bge-m3's sparse and ColBERT
// projections (torch.save state dicts of a few kilobytes to a few megabytes).
constexpr const char* kHeadFiles[] = {"sparse_linear.pt", "colbert_linear.pt"};
constexpr const char* kSentenceTransformersFiles[] = {
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
};

// The selection being built: each file once, in the order added.
class Selection {
 public:
  explicit Selection(const std::vector<std::string>& repo_files) : present_(repo_files.begin(), repo_files.end()) {}
  bool Present(const std::string& file) const { return present_.count(file) > 0; }
  void Add(const std::string& file) {
    if (added_.insert(file).second) files_.push_back(file);
  }
  void AddIfPresent(const std::string& file) {
    if (Present(file)) Add(file);
  }
  std::vector<std::string> Take() { return std::move(files_); }

 private:
  std::set<std::string> present_;
  std::set<std::string> added_;
  std::vector<std::string> files_;
};

std::string InFolder(const std::string& folder, const std::string& name) {
  return folder.empty() ? name : absl::StrCat(folder, "/", name);
}

// The shard names of an index (its weight_map's values), each inside the repository.
absl::StatusOr<std::vector<std::string>> ShardsOf(const std::string& index_file, const std::string& folder,
                                                  const ReadRepoFile& read) {
  ASSIGN_OR_RETURN(std::string text, read(index_file));
  ASSIGN_OR_RETURN(nlohmann::json index, ParseJson(text, index_file));
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_file, ": has no \"weight_map\" object"));
  }
  std::vector<std::string> shards;
  std::set<std::string> seen;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string() || !IsSafeRepoPath(shard.get<std::string>())) {
      return absl::InvalidArgumentError(absl::StrCat(index_file, ": \"weight_map\" entry \"", tensor,
                                                     "\" is not a file name inside the repository: ",
                                                     JsonValueForMessage(shard)));
    }
    const std::string name = InFolder(folder, shard.get<std::string>());
    if (seen.insert(name).second) shards.push_back(name);
  }
  if (shards.empty()) return absl::InvalidArgumentError(absl::StrCat(index_file, ": \"weight_map\" is empty"));
  return shards;
}

// Adds the weights of the model in `folder`: one format, in relserve's order of preference.
// NOT_FOUND when there are none (or a shard is missing).
absl::Status AddWeights(Selection* s, const std::string& folder, bool allow_shards, const ReadRepoFile& read) {
  struct Format {
    const char* single;
    const char* index;
  };
  for (const Format& f : {Format{"model.safetensors", "model.safetensors.index.json"},
                          Format{"pytorch_model.bin", "pytorch_model.bin.index.json"}}) {
    if (s->Present(InFolder(folder, f.single))) {
      s->Add(InFolder(folder, f.single));
      return absl::OkStatus();
    }
    const std::string index = InFolder(folder, f.index);
    if (!allow_shards || !s->Present(index)) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> shards, ShardsOf(index, folder, read));
    std::vector<std::string> missing;
    for (const std::string& shard : shards) {
      if (!s->Present(shard)) missing.push_back(shard);
    }
    if (!missing.empty()) {
      return absl::NotFoundError(absl::StrCat(index, " names shards that are missing: ", absl::StrJoin(missing, ", ")));
    }
    s->Add(index);
    for (const std::string& shard : shards) s->Add(shard);
    return absl::OkStatus();
  }
  const std::string where = folder.empty() ? "" : absl::StrCat(" in ", folder, "/");
  return absl::NotFoundError(absl::StrCat("no weights", where, ": none of model.safetensors",
                                          allow_shards ? ", model.safetensors.index.json" : "", ", pytorch_model.bin",
                                          allow_shards ? " or pytorch_model.bin.index.json" : "", " is there"));
}

struct Module {
  std::string path;
  std::string type;
};

absl::StatusOr<std::vector<Module>> ModulesOf(const ReadRepoFile& read) {
  ASSIGN_OR_RETURN(std::string text, read("modules.json"));
  ASSIGN_OR_RETURN(nlohmann::json modules, ParseJson(text, "modules.json"));
  if (!modules.is_array()) return absl::InvalidArgumentError("modules.json: not a JSON list");
  std::vector<Module> out;
  for (size_t i = 0; i < modules.size(); ++i) {
    const nlohmann::json& m = modules[i];
    if (!m.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("modules.json: entry ", i, " is not an object: ", JsonValueForMessage(m)));
    }
    JsonFieldReader r(m, absl::StrCat("modules.json: entry ", i));
    Module module;
    RETURN_IF_ERROR(r.String("path", &module.path));
    RETURN_IF_ERROR(r.String("type", &module.type));
    while (!module.path.empty() && module.path.back() == '/') module.path.pop_back();
    if (!module.path.empty() && !IsSafeRepoPath(module.path)) {
      return r.Error("path", absl::StrCat("\"", module.path, "\" is not a folder inside the repository"));
    }
    out.push_back(std::move(module));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SelectModelFiles(const std::vector<std::string>& repo_files,
                                                          const ReadRepoFile& read) {
  Selection s(repo_files);
  if (!s.Present("config.json")) return absl::NotFoundError("no config.json: not a transformers model");
  s.Add("config.json");
  for (const char* f : kTokenizerFiles) s.AddIfPresent(f);
  for (const char* f : kSentenceTransformersFiles) s.AddIfPresent(f);

  // Module folders: their configuration now, their weights after the tokenizer's and before
  // the model's.
  std::vector<std::string> module_weight_folders;
  if (s.Present("modules.json")) {
    ASSIGN_OR_RETURN(std::vector<Module> modules, ModulesOf(read));
    for (const Module& m : modules) {
      if (m.path.empty()) continue;  // the Transformer itself: the repository's top level
      const bool pooling = absl::EndsWith(m.type, "models.Pooling");
      const bool dense = absl::EndsWith(m.type, "models.Dense");
      const std::string config = InFolder(m.path, "config.json");
      if ((pooling || dense) && !s.Present(config)) {
        return absl::NotFoundError(absl::StrCat("no ", config, ", which modules.json's ", m.type, " module needs"));
      }
      s.AddIfPresent(config);
      if (dense) module_weight_folders.push_back(m.path);
    }
  }
  for (const std::string& folder : module_weight_folders) {
    RETURN_IF_ERROR(AddWeights(&s, folder, /*allow_shards=*/false, read));
  }
  for (const char* f : kHeadFiles) s.AddIfPresent(f);
  RETURN_IF_ERROR(AddWeights(&s, "", /*allow_shards=*/true, read));
  return s.Take();
}

}  // namespace relserve
