#ifndef RELSERVE_SERVER_BACKEND_INFERENCE_BACKEND_H_
#define RELSERVE_SERVER_BACKEND_INFERENCE_BACKEND_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/backend/model_types.h"

namespace relserve {

// A ColBERT (late-interaction) model's rules for queries and documents, read from its
// checkpoint (model_config/colbert_config.h) and resolved to the tokenizer's ids. The serving
// layer tokenizes by them (serving/late_interaction.h), the engine's kOutputMultiVector gives
// one projected, L2-normalised vector per token, and a query's score against a document is
// MaxSim over the positions these rules keep.
struct LateInteractionInfo {
  bool enabled = false;
  std::string layout;  // "pylate" or "stanford"
  // The marker put after [CLS] of each side; -1: none (an empty PyLate prefix).
  int32_t query_marker_id = -1;
  int32_t document_marker_id = -1;
  int query_length = 0;     // a query's tokens, marker included: cut to it (and padded, with expansion)
  int document_length = 0;  // a document's tokens, marker included: cut to it
  bool do_query_expansion = true;   // queries padded with expansion_id to query_length, all positions kept
  bool attend_to_expansion_tokens = false;
  int32_t expansion_id = -1;        // the [MASK] token queries are padded with
  std::vector<int32_t> skiplist_ids;  // token ids dropped from a document's vectors
};

// What a loaded model is, for ListModels, validation and metrics labels.
struct ModelInfo {
  std::string architecture;  // e.g. "DebertaV2ForSequenceClassification"
  std::string model_type;    // "deberta-v2", "t5", "mt5"
  int hidden_size = 0;
  int num_layers = 0;
  int vocab_size = 0;
  int type_vocab_size = 0;   // 0: token_type_ids must be absent or all 0
  int max_length = 0;        // longest sequence accepted, special tokens included
  // Where max_length comes from, for the load log: "max_seq_length 384 of .../sentence_bert_config.json",
  // "max_position_embeddings 512", "--max-length", ... Empty when not said.
  std::string max_length_source;
  int embedding_dim = 0;     // length of a pooled embedding
  // The pooled embedding: modes, Dense widths, and whether the model L2-normalises it
  // (sentence-transformers Normalize). pooling.Describe(): "mean+dense(256)+normalize".
  PoolingInfo pooling;
  // sentence-transformers' config_sentence_transformers.json: the prompts (name, text) that
  // Embed may put before each text, the one used when a request names none (empty: none), and
  // the similarity the model was trained for ("cosine", "dot", "euclidean", "manhattan"; empty:
  // not said, which sentence-transformers reads as cosine).
  std::vector<std::pair<std::string, std::string>> prompts;
  std::string default_prompt_name;
  std::string similarity_fn_name;
  // Pooling's include_prompt: false leaves a prompt's tokens out of pooling (SequenceInput's
  // pooling_skip says how many, as sentence-transformers counts them).
  bool pooling_includes_prompt = true;
  std::vector<std::string> labels;  // classification labels; empty without a classification head
  // Token-classification labels (a *ForTokenClassification head, kOutputTokenLogits), index ->
  // name as config.json's id2label; empty without such a head. A token classifier has no
  // sequence labels: `labels` stays empty.
  std::vector<std::string> token_labels;
  ProblemType problem_type = ProblemType::kSingleLabel;  // meaningful with labels
  DType dtype = DType::kFloat32;
  std::string device;        // "cpu", "cuda:0"
  // What runs the encoder layers' projections: "relserve-amx" (bfloat16 weights packed once for
  // relserve's AMX GEMM), "relserve-avx512" / "relserve-avx2" (float32 weights packed once for
  // relserve's GEMM in AVX-512 or AVX2 registers, up to packed_float32_max_tokens; longer batches
  // take LibTorch's), "relserve-amx-int8" (int8 weights packed once for relserve's AMX int8 GEMM, each
  // token quantized with its own scale),
  // "onednn-int8" (LibTorch's oneDNN dynamic int8 linear) or "libtorch" (LibTorch's linear:
  // OpenBLAS, oneDNN or cuBLAS).
  std::string projections = "libtorch";
  // Under int8, the bits of the projections' weights (7 or 8: --int8-weight-bits); 0 otherwise.
  int int8_weight_bits = 0;
  // Where float32 weights are packed for relserve's GEMM: the most tokens a batch may have to run
  // on them (kEveryBatch: every batch, as on AVX2 CPUs); 0 otherwise.
  static constexpr int64_t kEveryBatch = std::numeric_limits<int64_t>::max();
  int64_t packed_float32_max_tokens = 0;
  // How many of the layers beside the encoder (output heads' projections, the Dense modules after
  // pooling) run on relserve's packed float32 GEMM with the encoder's projections.
  int packed_float32_heads = 0;
  bool has_tokenizer = false;
  // The file the tokenizer's vocabulary came from ("spm.model", "vocab.txt", "tokenizer.json"
  // ...); empty without a tokenizer.
  std::string tokenizer_file;
  // Why a model without a tokenizer has none where that is not a missing file: e.g. a
  // tokenizer_class relserve has no tokenizer for.
  std::string no_tokenizer_reason;
  // Sparse (lexical) vectors over the vocabulary, kOutputSparse: "splade" for a masked-LM head
  // (*ForMaskedLM: log(1 + relu(logits)) max-pooled over the sequence's tokens), "bge-m3" for
  // bge-m3's sparse_linear.pt (relu(linear(h)) per token, the largest weight per token id, the
  // special tokens left out), "" when the model has neither.
  std::string sparse_kind;
  // Multi-vector (ColBERT-style) token vectors, kOutputMultiVector: "colbert" for bge-m3's
  // colbert_linear.pt (linear on every token after the first, L2-normalised) and for a ColBERT
  // checkpoint (its projection of every token, L2-normalised; late_interaction.enabled), ""
  // without one.
  std::string multi_vector_kind;
  int multi_vector_dim = 0;  // length of one such vector; 0 without a projection
  // A ColBERT checkpoint: how its queries and documents are tokenized and scored.
  LateInteractionInfo late_interaction;
  // Whether the model was Matryoshka-trained (config.json's is_matryoshka; true with
  // matryoshka_dimensions), unset where it does not say, and the sizes it may be cut to (empty:
  // any). Requests for `dimensions` are refused where it says no (vLLM's rule).
  std::optional<bool> is_matryoshka;
  std::vector<int> matryoshka_dimensions;
};

// Where one backend call's time went, on the calling thread's clock. On a GPU the forward is
// queued, not waited for: `forward` is the time to launch its kernels (and any wait the
// launches meet; for a batch replayed from a CUDA graph, the wait for the graphs' turn, the
// input copies and the one launch), `results` the wait for the device to finish and the copies
// back.
struct RunTimings {
  absl::Duration prepare;  // the padded batch built on the host and its copies to the device queued
  absl::Duration forward;  // the encoder's forward queued (all of it, on a CPU)
  absl::Duration results;  // heads, the wait for the device, outputs copied out
};

// One tokenized sequence, special tokens included.
struct SequenceInput {
  std::vector<int32_t> input_ids;
  std::vector<int32_t> token_type_ids;  // empty = all 0
  // Leading tokens the pooled embedding leaves out (all modes but cls): a prompt's, for models
  // whose Pooling has include_prompt false. 0 for every other sequence.
  int32_t pooling_skip = 0;
  // > 0: only the first n tokens are attended to (keys); the rest are computed and answered as
  // every other token (a ColBERT query's [MASK] expansion tokens when attend_to_expansion_tokens
  // is false, as transformers computes positions whose attention mask is 0). 0: all of them.
  int32_t attended_length = 0;
};

enum OutputFlag : uint32_t {
  kOutputTokenStates = 1u << 0,  // last hidden state per token
  kOutputPooled = 1u << 1,       // pooled embedding (model's pooling, dense, normalize)
  kOutputLogits = 1u << 2,       // classification logits
  // SequenceOutput::pooled_unnormalized: the pooled embedding before the model's Normalize
  // module (long inputs combine the pooled vectors of their windows, then normalise). A field of
  // its own, not a change to `pooled`: the batcher ORs the flags of every sequence in a batch.
  kOutputPooledUnnormalized = 1u << 3,
  kOutputSparse = 1u << 4,       // sparse vector (ModelInfo::sparse_kind must not be empty)
  kOutputMultiVector = 1u << 5,  // projected token vectors (ModelInfo::multi_vector_kind must not be empty)
  kOutputTokenLogits = 1u << 6,  // per-token classification logits (ModelInfo::token_labels must not be empty)
};

struct SequenceOutput {
  int32_t num_tokens = 0;
  std::vector<float> token_states;  // [num_tokens, hidden_size] row-major when asked for
  std::vector<float> pooled;        // [embedding_dim]
  std::vector<float> pooled_unnormalized;  // [embedding_dim], kOutputPooledUnnormalized
  std::vector<float> logits;        // [labels]
  // kOutputSparse: (vocabulary id, weight) for every weight > 0, ids ascending.
  std::vector<std::pair<int32_t, float>> sparse;
  // kOutputMultiVector: num_vectors x ModelInfo::multi_vector_dim, row-major (bge-m3: one per
  // token after the first; a ColBERT checkpoint: one per token).
  std::vector<float> multi_vector;
  int32_t num_vectors = 0;
  // kOutputTokenLogits: num_tokens x ModelInfo::token_labels.size(), row-major, every token
  // (special tokens included) in the sequence's order.
  std::vector<float> token_logits;
};

// A model that runs batches. Implementations are thread-safe: several workers may call Run
// at once on one shared instance.
class InferenceBackend {
 public:
  virtual ~InferenceBackend() = default;

  virtual const ModelInfo& info() const = 0;

  // Checks one sequence against the model's limits (length, id ranges, token types), so that
  // a bad sequence is refused on its own instead of failing the batch it would join.
  virtual absl::Status Validate(const SequenceInput& sequence) const = 0;

  // Runs `batch` (any lengths; padded internally) and returns one output per input, in order.
  // FAILED_PRECONDITION if `outputs` asks for logits from a model without a classification
  // head, token logits from one without a token-classification head, or for a sparse or multi-vector output the model has no head for; RESOURCE_EXHAUSTED when the device ran out of memory; INTERNAL for other failures.
  virtual absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch,
                                                          uint32_t outputs) = 0;

  // Run, also saying where the time went. Backends that do not measure leave `timings` zero.
  virtual absl::StatusOr<std::vector<SequenceOutput>> RunTimed(const std::vector<SequenceInput>& batch,
                                                               uint32_t outputs, RunTimings* timings) {
    if (timings != nullptr) *timings = RunTimings();
    return Run(batch, outputs);
  }

  // The lengths worth running once before serving (server/batching/warm_up.h), ascending and
  // ending at max_length: the lengths batches will run at, so that allocator growth and kernel
  // selection happen before the first request. By default, doubling from 16 (or max_length,
  // if shorter).
  virtual std::vector<int> WarmUpLengths(int max_length) const {
    std::vector<int> lengths;
    for (int length = std::min(16, max_length); length >= 1; length = std::min(length * 2, max_length)) {
      lengths.push_back(length);
      if (length == max_length) break;
    }
    return lengths;
  }

  // Whether batches must be warmed up on every thread that runs them, at every batch size of
  // WarmUpBatchSizes and length of WarmUpLengths, before the model serves (ModelBatcher's
  // BatcherConfig::warm_up_workers, warm_up.h's WarmUpWorker): a GPU's libraries keep
  // per-thread caches (cuDNN's execution plans) and each worker has a stream of its own, so a
  // shape first met under load costs that batch tens of milliseconds. False by default: one
  // warm-up (WarmUp, batches of two) on any thread is enough.
  virtual bool WarmsUpPerThread() const { return false; }
  // The batch sizes batches run at (a GPU rounds them, server/backend/device_shapes.h),
  // ascending, none past max_batch_size; by default 2, the warm-up's batch.
  virtual std::vector<int> WarmUpBatchSizes(int max_batch_size) const {
    return {std::min(2, std::max(1, max_batch_size))};
  }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_BACKEND_INFERENCE_BACKEND_H_
