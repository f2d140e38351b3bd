#ifndef RELSERVE_SERVER_MODEL_SENTENCE_TRANSFORMERS_CONFIG_H_
#define RELSERVE_SERVER_MODEL_SENTENCE_TRANSFORMERS_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

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
  int output_dimension() const;
  std::string Describe() const;
};

// sentence_transformers.models.Dense: Linear(in, out, bias) then an activation.
struct DenseConfig {
  std::string directory;  // e.g. "<model>/2_Dense"
  int in_features = 0;
  int out_features = 0;
  bool bias = true;
  std::string activation;  // transformers ACT2FN name ("tanh", "linear", ...)
};

struct SentenceTransformersConfig {
  bool present = false;  // the directory has modules.json
  PoolingConfig pooling;
  std::vector<DenseConfig> dense;
  bool normalize = false;
};

// Reads modules.json and the module folders it names. A directory without modules.json
// gives `present == false`. Unknown module types are an error naming them.
absl::StatusOr<SentenceTransformersConfig> LoadSentenceTransformersConfig(const std::string& model_dir);

// Parses a pooling mode given on the command line: "mean", "cls", "max", "mean_sqrt_len",
// "weightedmean", "lasttoken".
absl::StatusOr<PoolingConfig> PoolingFromMode(const std::string& mode, int hidden_size);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_SENTENCE_TRANSFORMERS_CONFIG_H_
