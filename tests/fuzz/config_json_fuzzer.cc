// Fuzzes the readers of the JSON files a model directory holds, with the input as each file in
// turn: config.json (ParseModelConfig), tokenizer_config.json and special_tokens_map.json
// (ApplyTokenizerConfigJson), sentence-transformers' modules.json and its Pooling and Dense
// config.json (LoadSentenceTransformersConfig), and model.safetensors.index.json
// (SafetensorsCheckpoint). A bad file must come back as an error status, never as an exception
// or a crash, and what is accepted must be usable.

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/model/families/deberta_v2/deberta_v2_config.h"
#include "server/model/families/family_registry.h"
#include "server/model/families/t5/t5_config.h"
#include "server/model_config/model_config.h"
#include "server/model_config/sentence_transformers_config.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_temp_dir.h"

namespace relserve {
namespace {

void MustWrite(const std::string& path, const std::string& contents) {
  const absl::Status status = WriteStringToFile(path, contents);
  FUZZ_CHECK(status.ok(), "setup: %s", status.ToString().c_str());
}

std::string MustMakeDir(const std::string& path) {
  FUZZ_CHECK(mkdir(path.c_str(), 0700) == 0 || IsDirectory(path), "setup: cannot create %s",
             path.c_str());
  return path;
}

// Model directories whose files are fixed except the one each input is written to.
struct Dirs {
  std::string modules;  // modules.json is the input
  std::string pooling;  // 1_Pooling/config.json is the input
  std::string dense;    // 2_Dense/config.json is the input (after a valid Pooling)
  std::string index;    // model.safetensors.index.json is the input
};

const Dirs& FuzzDirs() {
  static const Dirs* dirs = [] {
    const std::string templ = fuzz::MakeTempDir("relserve_config_fuzz");
    auto* d = new Dirs{MustMakeDir(JoinPath(templ, "modules")),
                       MustMakeDir(JoinPath(templ, "pooling")),
                       MustMakeDir(JoinPath(templ, "dense")),
                       MustMakeDir(JoinPath(templ, "index"))};
    MustWrite(JoinPath(d->pooling, "modules.json"),
              R"([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"}])");
    MustMakeDir(JoinPath(d->pooling, "1_Pooling"));
    MustWrite(JoinPath(d->dense, "modules.json"),
              R"([{"type": "sentence_transformers.models.Pooling", "path": "1_Pooling"},)"
              R"( {"type": "sentence_transformers.models.Dense", "path": "2_Dense"}])");
    MustMakeDir(JoinPath(d->dense, "1_Pooling"));
    MustMakeDir(JoinPath(d->dense, "2_Dense"));
    MustWrite(JoinPath(d->dense, "1_Pooling/config.json"),
              R"({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": true})");
    return d;
  }();
  return *dirs;
}

bool IsFileError(absl::StatusCode code) {
  return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
         code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kUnavailable;
}

void CheckModelConfig(const nlohmann::json& json) {
  auto config = ParseModelConfig(json, "config.json");
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               config.status().ToString().c_str());
    return;
  }
  FUZZ_CHECK(config->family != nullptr, "no family for %s", config->model_type.c_str());
  FUZZ_CHECK(config->hidden_size > 0, "hidden size %d", config->hidden_size);
  FUZZ_CHECK(config->num_layers >= 0, "%d layers", config->num_layers);
  FUZZ_CHECK(config->vocab_size > 0, "vocabulary of %d", config->vocab_size);
  FUZZ_CHECK(config->max_length > 0, "max length %d", config->max_length);
  FUZZ_CHECK(config->type_vocab_size >= 0, "type vocabulary of %d", config->type_vocab_size);
  FUZZ_CHECK(config->max_length_limit >= 0, "max length limit %d", config->max_length_limit);
  // The layout `create` would write: every shape positive or zero, nothing overflowing.
  auto layout = config->family->CheckpointLayout(*config);
  if (layout.ok()) {
    for (const ModelTensorSpec& t : *layout) {
      for (int64_t d : t.shape) FUZZ_CHECK(d >= 0, "%s has a negative dimension", t.name.c_str());
    }
  }
  const double flops = config->family->FlopsPerToken(*config, config->max_length);
  FUZZ_CHECK(flops >= 0, "%g FLOPs per token", flops);
  if (std::string(config->family->name()) == "deberta-v2") {
    const DebertaV2Config& d = config->family_config_as<DebertaV2Config>();
    FUZZ_CHECK(d.attention_head_size > 0, "head size %d", d.attention_head_size);
    // Sizes the engine derives when it loads the weights.
    FUZZ_CHECK(d.all_head_size() > 0, "all heads %d", d.all_head_size());
    if (d.relative_attention) {
      FUZZ_CHECK(d.rel_embeddings_rows() > 0, "%d relative embedding rows",
                 d.rel_embeddings_rows());
      FUZZ_CHECK(d.attention_span() > 0, "attention span %d", d.attention_span());
    }
  } else if (std::string(config->family->name()) == "t5") {
    const T5Config& t5 = config->family_config_as<T5Config>();
    FUZZ_CHECK(t5.inner_dim() > 0, "T5 heads %d x %d", t5.num_heads, t5.d_kv);
  }
  if (config->head == HeadKind::kSequenceClassification) {
    FUZZ_CHECK(config->num_labels > 0 &&
                   config->id2label.size() == static_cast<size_t>(config->num_labels),
               "%d labels, %zu names", config->num_labels, config->id2label.size());
  }
}

void CheckTokenizerConfig(const nlohmann::json& json) {
  for (TokenizerFamily family : {TokenizerFamily::kDeberta, TokenizerFamily::kT5}) {
    TokenizerConfig config = DefaultTokenizerConfig(Describe(family));
    const absl::Status status = ApplyTokenizerConfigJson(json, "tokenizer_config.json", &config);
    if (!status.ok()) {
      FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument, "%s",
                 status.ToString().c_str());
      continue;
    }
    FUZZ_CHECK(!config.model_max_length || *config.model_max_length > 0, "model_max_length %d",
               *config.model_max_length);
  }
}

void CheckSentenceTransformers(const std::string& model_dir) {
  auto st = LoadSentenceTransformersConfig(model_dir);
  if (!st.ok()) {
    FUZZ_CHECK(IsFileError(st.status().code()), "%s", st.status().ToString().c_str());
    return;
  }
  if (!st->present) return;
  // A dimension of 0 stands for the model's hidden size, filled in later.
  FUZZ_CHECK(!st->pooling.Describe().empty() && st->pooling.word_embedding_dimension >= 0 &&
                 st->pooling.output_dimension() >= st->pooling.word_embedding_dimension,
             "pooling %s of %d values gives %d", st->pooling.Describe().c_str(),
             st->pooling.word_embedding_dimension, st->pooling.output_dimension());
  for (const DenseConfig& dense : st->dense) {
    FUZZ_CHECK(dense.in_features > 0 && dense.out_features > 0, "Dense %d -> %d",
               dense.in_features, dense.out_features);
  }
}

}  // namespace
}  // namespace relserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace relserve;
  const Dirs& dirs = FuzzDirs();
  const std::string text(reinterpret_cast<const char*>(data), size);

  auto json = ParseJson(text, "fuzz.json");
  if (!json.ok()) {
    FUZZ_CHECK(json.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               json.status().ToString().c_str());
  } else {
    CheckModelConfig(*json);
    CheckTokenizerConfig(*json);
  }

  MustWrite(JoinPath(dirs.modules, "modules.json"), text);
  CheckSentenceTransformers(dirs.modules);
  MustWrite(JoinPath(dirs.pooling, "1_Pooling/config.json"), text);
  CheckSentenceTransformers(dirs.pooling);
  MustWrite(JoinPath(dirs.dense, "2_Dense/config.json"), text);
  CheckSentenceTransformers(dirs.dense);

  // No shard exists, so an index that passes its own checks ends at the first missing shard.
  MustWrite(JoinPath(dirs.index, SafetensorsCheckpoint::kIndexFile), text);
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dirs.index);
  FUZZ_CHECK(!checkpoint.ok() && IsFileError(checkpoint.status().code()), "%s",
             checkpoint.status().ToString().c_str());
  return 0;
}
