#include "server/model_config/colbert_config.h"

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/model_config/model_limits.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

// A length key: a positive integer no larger than what the weights can take.
absl::Status ReadLength(const JsonFieldReader& r, const char* key, int limit, int* out) {
  RETURN_IF_ERROR(r.Int(key, out, 2, limit > 0 ? limit : kMaxSequenceLength));
  return absl::OkStatus();
}

absl::StatusOr<json> ReadObject(const std::string& path) {
  ASSIGN_OR_RETURN(json j, ReadJsonFile(path));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  return j;
}

// PyLate's ColBERT keys of config_sentence_transformers.json.
absl::Status ReadPyLate(const std::string& model_dir, const ModelConfig& config, ColbertConfig* c) {
  c->layout = ColbertConfig::Layout::kPyLate;
  c->query_prefix = "[Q] ";
  c->document_prefix = "[D] ";
  c->query_length = 32;
  c->document_length = 180;
  c->skiplist_words = PunctuationWords();
  const std::string path = JoinPath(model_dir, "config_sentence_transformers.json");
  c->source = path;
  ASSIGN_OR_RETURN(const bool exists, OptionalFileExists(path));
  if (!exists) return absl::OkStatus();
  ASSIGN_OR_RETURN(json j, ReadObject(path));
  JsonFieldReader r(j, path);
  RETURN_IF_ERROR(r.String("query_prefix", &c->query_prefix));
  RETURN_IF_ERROR(r.String("document_prefix", &c->document_prefix));
  RETURN_IF_ERROR(ReadLength(r, "query_length", config.max_length_limit, &c->query_length));
  RETURN_IF_ERROR(ReadLength(r, "document_length", config.max_length_limit, &c->document_length));
  RETURN_IF_ERROR(r.Bool("do_query_expansion", &c->do_query_expansion));
  RETURN_IF_ERROR(r.Bool("attend_to_expansion_tokens", &c->attend_to_expansion_tokens));
  if (r.Has("skiplist_words")) {
    const json& words = j.at("skiplist_words");
    if (!words.is_array()) return r.Error("skiplist_words", "must be a list of strings");
    c->skiplist_words.clear();
    for (const json& w : words) {
      if (!w.is_string()) return r.Error("skiplist_words", "must be a list of strings");
      c->skiplist_words.push_back(w.get<std::string>());
    }
  }
  // PyLate: without query expansion the expansion tokens are not attended to.
  if (!c->do_query_expansion) c->attend_to_expansion_tokens = false;
  return absl::OkStatus();
}

// Stanford ColBERT's artifact.metadata (ColBERTConfig's defaults where a key is absent).
absl::Status ReadStanford(const std::string& model_dir, const ModelConfig& config, ColbertConfig* c) {
  c->layout = ColbertConfig::Layout::kStanford;
  c->query_prefix = "[unused0]";
  c->document_prefix = "[unused1]";
  c->query_length = 32;
  c->document_length = 180;
  c->dim = 128;
  c->skiplist_by_encoding = true;
  bool mask_punctuation = true;
  const std::string path = JoinPath(model_dir, "artifact.metadata");
  c->source = path;
  ASSIGN_OR_RETURN(const bool exists, OptionalFileExists(path));
  if (exists) {
    ASSIGN_OR_RETURN(json j, ReadObject(path));
    JsonFieldReader r(j, path);
    RETURN_IF_ERROR(r.String("query_token_id", &c->query_prefix));
    RETURN_IF_ERROR(r.String("doc_token_id", &c->document_prefix));
    RETURN_IF_ERROR(ReadLength(r, "query_maxlen", config.max_length_limit, &c->query_length));
    RETURN_IF_ERROR(ReadLength(r, "doc_maxlen", config.max_length_limit, &c->document_length));
    RETURN_IF_ERROR(r.Bool("attend_to_mask_tokens", &c->attend_to_expansion_tokens));
    RETURN_IF_ERROR(r.Bool("mask_punctuation", &mask_punctuation));
    RETURN_IF_ERROR(r.Int("dim", &c->dim, 1, kMaxModelWidth));
  } else {
    c->source = JoinPath(model_dir, "config.json");
  }
  if (mask_punctuation) c->skiplist_words = PunctuationWords();
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> PunctuationWords() {
  const std::string punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  std::vector<std::string> words;
  for (char ch : punctuation) words.emplace_back(1, ch);
  return words;
}

absl::StatusOr<std::optional<ColbertConfig>> LoadColbertConfig(const std::string& model_dir, const ModelConfig& config,
                                                               const SentenceTransformersConfig& st) {
  ColbertConfig c;
  if (st.colbert_dense.has_value()) {
    RETURN_IF_ERROR(ReadPyLate(model_dir, config, &c));
    c.dense = st.colbert_dense;
    c.dim = st.colbert_dense->out_features;
    if (st.colbert_dense->in_features != config.hidden_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          st.colbert_dense->directory, "/config.json: \"in_features\" ", st.colbert_dense->in_features,
          " is not the model's hidden_size ", config.hidden_size));
    }
    return c;
  }
  if (config.architecture == "HF_ColBERT") {
    RETURN_IF_ERROR(ReadStanford(model_dir, config, &c));
    return c;
  }
  return std::nullopt;
}

}  // namespace relserve
