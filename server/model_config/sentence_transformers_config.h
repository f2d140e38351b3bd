#ifndef RELSERVE_SERVER_MODEL_CONFIG_SENTENCE_TRANSFORMERS_CONFIG_H_
#define RELSERVE_SERVER_MODEL_CONFIG_SENTENCE_TRANSFORMERS_CONFIG_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/model_types.h"

namespace relserve {

// sentence_transformers.models.Pooling's config.json. Several modes may be on; their
// results are concatenated in the order sentence-transformers uses:
// cls, max, mean, mean_sqrt_len, weightedmean, lasttoken.
struct PoolingConfig {
  int word_embedding_dimension = 0;
  bool cls = false;
  bool max = false;
  bool mean = false;
  bool mean_sqrt_len = false;
  bool weighted_mean = false;
  bool last_token = false;
  // include_prompt (sentence-transformers 2.4+, default true): false leaves the tokens of a
  // prompt put before the text out of every mode but cls (INSTRUCTOR-style models).
  bool include_prompt = true;
  int output_dimension() const;
  std::vector<PoolingMode> Modes() const;  // the modes on, in that order
  std::string Describe() const;            // their names, comma-separated
};

// sentence_transformers.models.Dense: Linear(in, out, bias) then an activation.
struct DenseConfig {
  std::string directory;  // e.g. "<model>/2_Dense"
  int in_features = 0;
  int out_features = 0;
  bool bias = true;
  std::string activation;  // transformers ACT2FN name ("tanh", "linear", ...)
};

// The prompts of config_sentence_transformers.json, (name, text) pairs:
// SentenceTransformer.encode(prompt_name=name) puts `text` before each text, with nothing
// between them.
using SentencePrompts = std::vector<std::pair<std::string, std::string>>;

// sentence_transformers.sparse_encoder.models.SpladePooling's config.json (a SparseEncoder:
// MLMTransformer then SpladePooling): log(1 + activation(logit)) of the masked-LM head's logits,
// pooled over the tokens.
struct SpladePoolingConfig {
  bool sum = false;         // pooling_strategy "sum"; "max" (the default) otherwise
  bool log1p_relu = false;  // activation_function "log1p_relu" (a second log1p); "relu" otherwise
  std::string Describe() const;  // "splade(max, relu)"
};

struct SentenceTransformersConfig {
  bool present = false;  // the directory has modules.json
  // Whether modules.json has a Pooling module; a SparseEncoder has SpladePooling instead, and
  // its dense embedding is then the mean of the token states.
  bool has_pooling = false;
  PoolingConfig pooling;
  std::optional<SpladePoolingConfig> splade;  // a SpladePooling module
  std::vector<DenseConfig> dense;
  bool normalize = false;
  // PyLate's Dense module (pylate.models.Dense.Dense): a ColBERT checkpoint's projection of
  // every token (colbert_config.h); such a model has no Pooling module.
  std::optional<DenseConfig> colbert_dense;

  // The Transformer module's sentence_bert_config.json (in its folder of modules.json, else
  // the model directory's): read wherever the file is, modules.json or not, as TEI does.
  std::string transformer_config_path;  // the file read; empty when there is none
  int max_seq_length = 0;               // 0: not given (or null)
  bool do_lower_case = false;           // str.lower() of every text before tokenizing

  // config_sentence_transformers.json (sentence-transformers 3), when present.
  SentencePrompts prompts;              // in the JSON object's (sorted) key order
  std::string default_prompt_name;      // empty: none; else one of prompts
  std::string similarity_fn_name;       // "cosine", "dot", "euclidean", "manhattan", "MaxSim"; empty: not given
};

// Reads modules.json and the module folders it names, sentence_bert_config.json and
// config_sentence_transformers.json; modules.json's types are sentence_transformers.models'
// Transformer, Pooling, Dense and Normalize, and sparse_encoder.models' MLMTransformer (read as a
// Transformer) and SpladePooling, and PyLate's Dense (a ColBERT model, which has no Pooling).
// A directory without modules.json gives
// `present == false` (and may still give the other two files' settings). Unknown module
// types are an error naming them; a bad value is INVALID_ARGUMENT naming the file and the key:
// max_seq_length not a positive integer, do_lower_case not a boolean, prompts not an object of
// strings, default_prompt_name not one of the prompts, similarity_fn_name not one of
// sentence-transformers' four, include_prompt not a boolean.
absl::StatusOr<SentenceTransformersConfig> LoadSentenceTransformersConfig(const std::string& model_dir);

// The text SentenceTransformer.encode puts before each text: that of the prompt named
// `prompt_name`, else that of the default prompt, else none (nullptr). INVALID_ARGUMENT for a
// name the prompts do not have: `prompt_name "x" is not one of the model's prompts: document,
// query` (or `...: the model has no prompts`).
absl::StatusOr<const std::string*> FindSentencePrompt(const SentencePrompts& prompts,
                                                      const std::string& default_prompt_name,
                                                      const std::string& prompt_name);

// Parses a pooling mode given on the command line: "mean", "cls", "max", "mean_sqrt_len",
// "weightedmean", "lasttoken".
absl::StatusOr<PoolingConfig> PoolingFromMode(const std::string& mode, int hidden_size);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CONFIG_SENTENCE_TRANSFORMERS_CONFIG_H_
