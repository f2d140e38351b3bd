#ifndef RELSERVE_SERVER_TOOLS_MODEL_CREATOR_H_
#define RELSERVE_SERVER_TOOLS_MODEL_CREATOR_H_

// Writes randomly initialised model directories in Hugging Face's on-disk format (config.json as
// transformers 4.40.2 `save_pretrained` writes it, model.safetensors under transformers' names),
// loadable by relserve and by `AutoModel.from_pretrained`. Backs `relserve-model create`.
// Torch-free: what each family writes comes from its descriptor
// (server/model/families/family_descriptor.h); here are the options, the random weights and
// the files.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/model/families/family_descriptor.h"
#include "server/tokenizer/sentencepiece/sentencepiece_module.h"

namespace relserve {

struct CreateModelOptions {
  // A create variant of a family descriptor (FamilyDescriptor::create_variants): "deberta-v3",
  // "deberta-v2" (v3 plus the convolution layer of microsoft/deberta-v2-xlarge), "t5"
  // (T5-base-like, ReLU feed-forward), "t5-v1.1" (gated-GELU, untied embeddings), "bert",
  // "roberta", "xlm-roberta", "electra", "mpnet" (all-mpnet-base-v2's layout),
  // "xlnet" (xlnet-base-cased's configuration).
  std::string family;
  // 0 = the family's default (DeBERTa: 768 / 12 / 12 / 3072 / 128100; T5: 768 / 12 / 12 /
  // 3072 (t5-v1.1: 2048) / 32128; BERT family: 768 / 12 / 12 / 3072 / 30522 (roberta 50265,
  // xlm-roberta 250002)). For T5, hidden is d_model, intermediate d_ff, and d_kv = hidden / heads.
  int hidden = 0, layers = 0, heads = 0, intermediate = 0, vocab = 0;
  // DeBERTa and ELECTRA only: 0 = hidden; anything else is written as "embedding_size" (and
  // adds DeBERTa's embeddings.embed_proj or ELECTRA's embeddings_project when it differs).
  int embedding_size = 0;
  // > 0 makes the family's *ForSequenceClassification with that many labels (id2label /
  // label2id "LABEL_i"); T5 has none.
  int num_labels = 0;
  // SentencePiece model copied in as spm.model (DeBERTa) or spiece.model (T5), or a WordPiece
  // vocab.txt (bert, electra), together with tokenizer_config.json and special_tokens_map.json
  // (FamilyDescriptor::CreateTokenizer). When `vocab` is 0 the vocabulary size becomes the
  // model's piece count plus one per special token that is not a piece (the tokenizer appends
  // those, e.g. DeBERTa-v3's "[MASK]"), or vocab.txt's line count. Empty: no tokenizer files.
  std::string vocab_file;
  // The SentencePiece module that reads a SentencePiece vocab_file (--sentencepiece-module).
  SentencePieceModuleOptions sentencepiece;
  // Every tensor draws from its own std::mt19937_64 stream, seeded from `seed` and the
  // tensor's name: the same options give the same bytes.
  uint64_t seed = 1;
  // Standard deviation of the normal init of matrices, embeddings and relative-position tables
  // (also written as DeBERTa's "initializer_range"). Biases are 0; layer norms weight 1 and bias 0.
  float init_std = 0.02f;
  // Storage dtype of the weights and config "torch_dtype": "float32", "float16" or "bfloat16"
  // (converted from float32 with round-to-nearest-even).
  std::string dtype = "float32";
  // Merged into config.json last, key by key (a null value removes the key). The weights
  // follow the final config, as transformers would build the model from it. Values derived
  // from an overridden key are re-derived unless overridden too: DeBERTa's pooler_hidden_size
  // from hidden_size; T5's dense_act_fn / is_gated_act from feed_forward_proj, d_kv from
  // d_model / num_heads, num_decoder_layers from num_layers.
  nlohmann::json config_overrides = nlohmann::json::object();
  // Also write a sentence-transformers layout: modules.json (Transformer, mean Pooling,
  // optional Dense, Normalize), sentence_bert_config.json, 1_Pooling/config.json.
  bool sentence_transformers = false;
  // > 0 (requires sentence_transformers): a 2_Dense module, hidden -> dense_out with Tanh,
  // weights in 2_Dense/model.safetensors as linear.weight / linear.bias.
  int dense_out = 0;
  // Replace a model already in out_dir (one with a config.json); otherwise FAILED_PRECONDITION.
  bool overwrite = false;
};

// Creates out_dir (and its parents) and writes the model there. INVALID_ARGUMENT naming the
// option for bad options (unknown family or dtype, negative sizes, heads not dividing hidden,
// ...) or naming the config key when the final config cannot be built; NOT_FOUND when
// vocab_file is missing. config.json is written last, so a failed run leaves no config.json.
absl::Status CreateModelDirectory(const CreateModelOptions& options, const std::string& out_dir);

// The config.json contents CreateModelDirectory writes, given the vocabulary size a
// vocab_file implies (0: none given). Validates the options as CreateModelDirectory does.
absl::StatusOr<nlohmann::json> BuildModelConfig(const CreateModelOptions& options,
                                                int64_t vocab_from_file = 0);

// Every tensor transformers 4.40.2 builds (and saves) for this config.json, in module
// registration order: the config read by ParseModelConfig, then its family's
// CheckpointLayout. INVALID_ARGUMENT naming the key for values it cannot build a model from.
// T5 lists encoder.embed_tokens.weight after shared.weight, tied to it.
absl::StatusOr<std::vector<ModelTensorSpec>> ModelTensorSpecs(const nlohmann::json& config);

// The pieces of a serialized SentencePiece ModelProto, by id, as SentencePiece loads them
// (server/tokenizer/sentencepiece/sentencepiece_model.h). INVALID_ARGUMENT, with SentencePiece's reason,
// when it refuses the bytes (not a model, cut short, no unknown piece).
absl::StatusOr<std::vector<std::string>> ReadSentencePiecePieces(std::string_view model_proto,
                                                                 const SentencePieceModuleOptions& module = {});

// float32 -> IEEE half / bfloat16 bits, rounding to nearest even (NaN stays NaN, overflow
// becomes infinity), as torch's .to(float16) / .to(bfloat16) do.
uint16_t FloatToHalfBits(float value);
uint16_t FloatToBFloat16Bits(float value);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_MODEL_CREATOR_H_
