#ifndef RELSERVE_SERVER_MODEL_CONFIG_COLBERT_CONFIG_H_
#define RELSERVE_SERVER_MODEL_CONFIG_COLBERT_CONFIG_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model_config/model_config.h"
#include "server/model_config/sentence_transformers_config.h"

namespace relserve {

// A ColBERT (late-interaction) checkpoint's settings, in the two layouts users have:
//   PyLate / sentence-transformers: modules.json with a Transformer and PyLate's Dense
//     (pylate.models.Dense.Dense, its weights in the Dense folder), and the ColBERT keys of
//     config_sentence_transformers.json (pylate/models/colbert.py's ColBERT.__init__ defaults
//     where a key is absent: query_prefix "[unused0]", document_prefix "[unused1]", query_length
//     32, document_length 180, attend_to_expansion_tokens false, do_query_expansion true,
//     skiplist_words string.punctuation);
//   Stanford ColBERT: config.json's architecture HF_ColBERT (colbert/modeling/hf_colbert.py),
//     `bert.*` weights beside `linear.weight` in the one checkpoint, and artifact.metadata
//     (colbert/infra/config: query_token_id, doc_token_id, query_maxlen, doc_maxlen,
//     attend_to_mask_tokens, mask_punctuation, dim; ColBERTConfig's defaults where absent:
//     "[unused0]", "[unused1]", 32, 180, false, true, 128).
struct ColbertConfig {
  enum class Layout { kPyLate, kStanford };
  Layout layout = Layout::kPyLate;
  // The marker tokens put after [CLS] (an empty PyLate prefix: none).
  std::string query_prefix;
  std::string document_prefix;
  int query_length = 32;     // a query's tokens with its marker: cut to it, padded to it (expansion)
  int document_length = 180; // a document's tokens with its marker: cut to it
  bool do_query_expansion = true;  // queries padded with [MASK] to query_length, every position scored
  bool attend_to_expansion_tokens = false;  // those [MASK]s attended to (as keys) or not
  // The words whose tokens leave the document side (PyLate's skiplist_words, Stanford's
  // string.punctuation under mask_punctuation), and how they become ids: PyLate converts each
  // word as one token (convert_tokens_to_ids), Stanford encodes each and takes the first id.
  std::vector<std::string> skiplist_words;
  bool skiplist_by_encoding = false;
  // The projection of every token: PyLate's Dense folder (its config), or Stanford's
  // `linear.weight` in the checkpoint (no bias) with `dim` outputs.
  std::optional<DenseConfig> dense;
  int dim = 0;
  std::string source;  // the file the settings came from, for the load log and messages
};

// Python's string.punctuation, one character a word.
std::vector<std::string> PunctuationWords();

// The ColBERT settings of a model directory, nullopt when it is not a ColBERT checkpoint (no
// PyLate Dense, not HF_ColBERT). INVALID_ARGUMENT naming the file and key for a bad value
// (lengths not positive or beyond `max_length_limit` when that is > 0, prefixes not strings,
// skiplist_words not a list of strings), and for a PyLate Dense whose in_features is not the
// model's hidden size.
absl::StatusOr<std::optional<ColbertConfig>> LoadColbertConfig(const std::string& model_dir, const ModelConfig& config,
                                                               const SentenceTransformersConfig& st);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CONFIG_COLBERT_CONFIG_H_
