#ifndef RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_DESCRIPTOR_H_
#define RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_DESCRIPTOR_H_

// One descriptor per model family: the only place that knows a family's config.json keys and
// transformers' defaults for them, its checkpoint layout (tensor names and shapes), the
// checkpoint prefixes transformers ignores, its masked-LM head, its tokenizer family, its FLOPs,
// and what `relserve-model create` writes for it. Its model (LibTorch) lives in the same folder.
//
// How a new family plugs in (everything in server/model/families/<name>/):
//  1. <name>_config.h (torch-free, CMake target relserve_family_<name>_config): the family's
//     config struct, derived from FamilyConfig, with transformers' defaults.
//  2. <name>_family.{h,cc} (same torch-free target): a FamilyDescriptor subclass and a
//     function returning its one instance (`const FamilyDescriptor& <Name>Family()`); see
//     bert/ for a complete one.
//     ParseConfig fills the family struct and the shared fields of ModelConfig (hidden_size,
//     num_layers, vocab_size, type_vocab_size, pad_token_id, max_length, max_length_limit);
//     the registry has already read model_type, architectures (checked against
//     architectures()) and, for classification heads, the labels. CheckpointLayout lists
//     every tensor transformers 4.40.2 saves for the config, in module registration order.
//  3. <name>_model.{h,cc} (LibTorch, target relserve_family_<name>): an EncoderModel
//     (server/model/layers/encoder_model.h) built from the shared blocks of relserve_model_layers
//     (layers.h, weight_loader.h, relative_attention.h, token_packing.h), with
//     `static absl::StatusOr<std::unique_ptr<<Name>Model>> Load(const ModelConfig&,
//     WeightLoader&)`. Load takes every tensor it uses with WeightLoader::Get (which names a
//     missing or misshaped tensor) and Skips buffers; the engine then refuses any tensor
//     neither taken nor under IgnoredPrefixes(). Forward returns hidden_states[0] (embedding
//     output) ... [N] as transformers' output_hidden_states, and logits for classifiers.
//  4. Register, inside the folder: its CMakeLists.txt is one relserve_model_family() call
//     (families/CMakeLists.txt) naming the folder, the descriptor function and the model class
//     with their headers and sources. families/CMakeLists.txt finds every folder with a
//     CMakeLists.txt, builds both targets, and writes the lists AllFamilies and the model
//     loaders read (generated registered_families.h and registered_family_models.h), so
//     nothing outside the folder names the family. The folder is named as name() with '_' for
//     '-' (family_registry_test checks folders against the registry).
//
// `relserve-model create --family V` finds the descriptor whose create_variants() holds V,
// builds config.json with CreateConfig (then the user's --config overrides, the family's own
// options from create_options() such as --position-embedding-type, and
// RederiveAfterOverrides), parses it back with ParseModelConfig and writes exactly the tensors
// CheckpointLayout lists, with random values (ModelTensorSpec::init). So a family's tests
// build a model directory with CreateModelDirectory (server/tools/model_creator.h; see
// tests/model/switch_test_support.h) and edit its config.json or weights from there; the
// layout the creator writes is the one the loader must accept.
//
// Descriptors are immutable singletons, safe to use from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/model_config/model_config.h"
#include "server/tokenizer/descriptor/tokenizer_family.h"
#include "server/util/json_util.h"

namespace relserve {

// One state_dict entry of a checkpoint.
struct ModelTensorSpec {
  enum class Init { kNormal, kZeros, kOnes };
  std::string name;
  std::vector<int64_t> shape;
  Init init = Init::kNormal;
  // Another entry's name when transformers saves one module under two names (T5's
  // encoder.embed_tokens is `shared`): the creator gives both the same values.
  std::string tied_to;
};

// An architecture config.json may name for a model_type.
struct ArchitectureSpec {
  std::string name;
  HeadKind head = HeadKind::kNone;
  // Whether `relserve-model create` can write it (a backbone taken out of a checkpoint with
  // another head, such as *ForPreTraining, is loaded but not created).
  bool creatable = true;
};

// The masked-language-model head of a *ForMaskedLM architecture, as transformers 4.40.2 builds
// it: transform(h) = LayerNorm(act(dense(h))) with `width` features, then
// logits = transform(h) . decoder^T + bias over the vocabulary. Unless tie_word_embeddings is
// false the decoder is the word embeddings ([vocab, width]), and save_pretrained leaves it out
// of model.safetensors (older pytorch_model.bin files keep a copy, which is then read).
struct MaskedLmHeadLayout {
  std::string dense;       // nn.Linear prefix, hidden -> width: "cls.predictions.transform.dense"
  std::string activation;  // ACT2FN name: config.hidden_act (BERT, DeBERTa-v2) or "gelu"
  std::string layer_norm;  // nn.LayerNorm prefix: "cls.predictions.transform.LayerNorm"
  double layer_norm_eps = 1e-12;
  int64_t hidden = 0, width = 0, vocab = 0;
  std::string decoder_weight;  // [vocab, width]: "cls.predictions.decoder.weight"
  // The output bias [vocab]: bias.front() is the name save_pretrained keeps; the others are
  // aliases of the same parameter (decoder.bias) that a file may hold instead or as well.
  std::vector<std::string> bias;
  // The bias belongs to the decoder Linear itself (ELECTRA's generator_lm_head), which comes
  // after the transform in the state dict; otherwise it is the head's own parameter, first.
  bool bias_after_decoder = false;
  bool tied = true;  // config.json's tie_word_embeddings
  // The word embeddings the decoder is tied to, as the *ForMaskedLM class names them.
  std::string word_embeddings;

  // Every name the head's tensors may have in a checkpoint.
  std::vector<std::string> TensorNames() const {
    std::vector<std::string> names = {dense + ".weight", dense + ".bias", layer_norm + ".weight",
                                      layer_norm + ".bias", decoder_weight};
    names.insert(names.end(), bias.begin(), bias.end());
    return names;
  }
};

// What `relserve-model create` asks of a family. 0 means the variant's default.
struct CreateRequest {
  std::string variant;  // one of create_variants()
  int hidden = 0, layers = 0, heads = 0, intermediate = 0, vocab = 0;
  int embedding_size = 0;  // 0: hidden
  int num_labels = 0;      // > 0: the variant's sequence-classification architecture
  double init_std = 0.02;  // written as initializer_range where the family has one
  // The user's config.json overrides, applied after CreateConfig (read-only here: a family may
  // skip a check an override makes moot, such as T5's d_kv).
  nlohmann::json overrides = nlohmann::json::object();
};

// The tokenizer files `create --vocab-file F` writes beside the model.
struct CreateTokenizerSpec {
  enum class VocabFormat {
    kNone,           // the variant takes no vocabulary file
    kSentencePiece,  // a SentencePiece ModelProto: vocabulary = pieces + special tokens not among them
    kLines,          // one token per line (WordPiece vocab.txt): vocabulary = lines
    kFairseq,        // XLM-R's SentencePiece model: vocabulary = pieces + <pad>'s offset + <mask>
  };
  VocabFormat format = VocabFormat::kNone;
  // where F is copied: "spm.model", "spiece.model", "vocab.txt", "sentencepiece.bpe.model"
  std::string vocab_file_name;
  // The tokenizer the files are for: its descriptor's special tokens are written into
  // tokenizer_config.json and special_tokens_map.json (one source with what serving reads).
  TokenizerFamily tokenizer_family = TokenizerFamily::kBert;
  // tokenizer_config.json's other keys (the class, its switches, model_max_length).
  nlohmann::json tokenizer_config = nlohmann::json::object();
};

// A `relserve-model create` option of a family: `--flag VALUE` sets config.json's `config_key`
// (as --config would), parsed as `type`.
struct CreateOption {
  enum class Type { kString, kInt, kNumber, kBool };
  std::string flag;        // without the dashes: "position-embedding-type"
  std::string config_key;  // "position_embedding_type"
  Type type = Type::kString;
  std::string help;        // one line for --help
};

class FamilyDescriptor {
 public:
  virtual ~FamilyDescriptor() = default;

  // The family's name in messages and registries: "deberta-v2", "t5", "bert".
  virtual const char* name() const = 0;
  // The config.json model_type values it reads.
  virtual std::vector<std::string> model_types() const = 0;
  // The architectures it runs for a model_type; the first is the default when config.json
  // names none.
  virtual std::vector<ArchitectureSpec> architectures(const std::string& model_type) const = 0;

  // Reads the family's keys (transformers' defaults for absent ones) into
  // config->family_config and the shared fields. Errors are INVALID_ARGUMENT naming the key
  // (JsonFieldReader::Error).
  virtual absl::Status ParseConfig(const JsonFieldReader& reader, const nlohmann::json& json,
                                   ModelConfig* config) const = 0;

  // Every tensor transformers 4.40.2 saves for this config, in module registration order;
  // INVALID_ARGUMENT naming `architectures` for one that is not creatable.
  virtual absl::StatusOr<std::vector<ModelTensorSpec>> CheckpointLayout(const ModelConfig& config) const = 0;
  // Checkpoint name prefixes that the model does not use and transformers drops when it loads
  // this architecture (other heads, an unused pooler).
  virtual std::vector<std::string> IgnoredPrefixes(const ModelConfig& config) const = 0;
  // The masked-LM head of a config whose head is HeadKind::kMaskedLm; nullopt for other
  // configs and for families without one. CheckpointLayout lists its tensors for such configs.
  virtual std::optional<MaskedLmHeadLayout> MaskedLmHead(const ModelConfig& config) const {
    (void)config;
    return std::nullopt;
  }

  // The token classifier of a config whose head is HeadKind::kTokenClassification: the prefix
  // of an nn.Linear(hidden_size, num_labels) applied to every token's last hidden state, which
  // the engine loads beside the backbone; nullopt for other configs. Every
  // *ForTokenClassification of transformers 4.40.2 for these families (BERT, RoBERTa,
  // XLM-RoBERTa, ELECTRA, DeBERTa-v2, MPNet, XLNet) is the backbone without a pooler, a dropout
  // (nothing at inference) and `classifier`; CheckpointLayout lists it for such configs.
  virtual std::optional<std::string> TokenClassifier(const ModelConfig& config) const {
    if (config.head != HeadKind::kTokenClassification) return std::nullopt;
    return std::string("classifier");
  }

  // Special tokens, template and files of the tokenizer (which files mean a model directory has
  // one: Tokenizer::HasFiles); without them the model serves token ids only.
  virtual TokenizerFamily tokenizer_family(const ModelConfig& config) const = 0;

  // Multiply-add FLOPs (2 per MAC) per token of one forward pass over sequences of `length`:
  // every projection, the feed-forward, q.k and p.v and the relative-position products.
  // Embedding look-ups, norms, softmax and activations are not counted.
  virtual double FlopsPerToken(const ModelConfig& config, int64_t length) const = 0;

  // `relserve-model create --family V` for each V here.
  virtual std::vector<std::string> create_variants() const = 0;
  // config.json as transformers' save_pretrained writes it for the request, before
  // torch_dtype, transformers_version and the overrides. INVALID_ARGUMENT naming the option
  // (heads, embedding_size, num_labels) the variant cannot honour.
  virtual absl::StatusOr<nlohmann::json> CreateConfig(const CreateRequest& request) const = 0;
  // After the overrides: re-derives keys that follow an overridden key unless overridden too.
  virtual absl::Status RederiveAfterOverrides(const nlohmann::json& overrides, nlohmann::json* config) const = 0;
  virtual CreateTokenizerSpec CreateTokenizer(const std::string& variant) const = 0;
  // Options of `create` beyond the shared ones; none by default.
  virtual std::vector<CreateOption> create_options() const { return {}; }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_FAMILIES_FAMILY_DESCRIPTOR_H_
