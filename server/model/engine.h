#ifndef RELSERVE_SERVER_MODEL_ENGINE_H_
#define RELSERVE_SERVER_MODEL_ENGINE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/device_shapes.h"
#include "server/backend/inference_backend.h"
#include "server/model/layers/attention_options.h"
#include "server/model/layers/int8_weight_bits.h"
#include "server/model/tiled_attention.h"
#include "server/model_config/model_config.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/process_tuning.h"

namespace relserve {

enum class BatchRounding { kOnDevice, kRounded, kExact };

// Which implementation an engine's forwards take where the serving one is not the only one:
// the defaults are what serves; tests set the others per engine, to check on the CPU what GPUs
// run and each CPU kernel against its portable twin. Passed down with every forward
// (EncoderInputs::attention, attention_options.h), never held by a process-wide switch.
struct EngineKernels {
  // Attention takes the path of GPUs (EngineOptions::gpu_attention's: the bias, biased_attention.h,
  // or the tables, table_attention.h) on the CPU too.
  bool gpu_attention_on_cpu = false;
  // The bias path calls LibTorch's fused scaled_dot_product_attention where this LibTorch has it;
  // false: its unfused ATen operations (matmul, float32 softmax, matmul).
  bool fused_attention = true;
  // The CPU's relative softmax gathers, and normalizes each float32 or bfloat16 row, with AVX-512
  // where the CPU has it (relative_softmax.h); false: its portable loops.
  bool avx512_softmax = true;
  // CUDA graphs (cuda_graph_tokens) stood in for on the CPU: a graph is its work, run again on
  // each replay (device_graph.h), so that what is built around graphs is tested without a GPU.
  bool device_graphs_on_cpu = false;
  // float32 on a CPU with AVX-512F, or AVX2 and FMA: the encoder layers' weights are also packed
  // once at load for relserve's GEMM (kernels/packed_gemm.h, in the registers of the widest), which
  // inputs of at most packed_gemm_max_rows tokens take (0: DefaultPackedLinearMaxRows of the tiles,
  // layers/packed_linear.h: 192 for AVX-512's, where the GEMM is ahead of OpenBLAS, every input for
  // AVX2's); false: LibTorch's linear (OpenBLAS) on the weights as loaded, always.
  bool packed_float32_gemm = true;
  int64_t packed_gemm_max_rows = 0;
  // bfloat16 on a CPU with AMX-BF16: the encoder layers' weights are packed once at load, in place
  // of the weights as loaded, for relserve's GEMM in AMX tiles (kernels/amx_gemm.h), which every
  // input takes; false: LibTorch's linear (oneDNN, which reorders the weight on every call).
  bool packed_bfloat16_gemm = true;
  // int8 on an x86-64 CPU with AMX-INT8, AVX-512 VNNI or AVX2: the encoder layers' weights are
  // quantized and packed once at load for relserve's int8 GEMM (kernels/amx_gemm.h, GemmInt8: in AMX
  // tiles where there are, else in VNNI registers, else in AVX2 ones, with 7-bit weights by default
  // there, int8_weight_bits below; each token's activation quantized with its own scale); false, or a CPU with none of them: LibTorch's oneDNN
  // quantized linear (one scale per call's activation tensor).
  bool packed_int8_gemm = true;
  // float32 attention on a CPU with AVX-512F or AVX2: which batches run each head of each sequence
  // as a task of its own, its products in relserve's register tiles (tiled_attention.h).
  TiledAttention tiled_attention = TiledAttention::kAuto;
  // bfloat16 attention on a CPU with AVX512-BF16: which batches run each head of each sequence as a
  // task of its own, its products in relserve's AVX512-BF16 registers (tiled_attention.h).
  BFloat16TiledAttention bfloat16_tiled_attention = BFloat16TiledAttention::kAuto;
  // A batch whose outputs read each sequence's first token alone (logits of a classifier on it,
  // CLS pooling), in a family that can (EncoderModel::RunsFirstTokenOnly), on an engine without
  // CUDA graphs: the last layer's output projection and feed-forward run on those tokens only
  // (EncoderInputs::first_token_only); false: on every token.
  bool first_token_forwards = true;
};

struct EngineOptions {
  DType dtype = DType::kFloat32;  // weights and activations (kInt8: the encoder's projections, on the CPU)
  std::string device = "cpu";
  int max_length = 0;             // longest accepted sequence; 0 = the model's own maximum
  std::string pooling;            // "" = the directory's sentence-transformers Pooling, else mean
  // The model's tokenizer, loaded beside the engine (LoadModel, families/model_tokenizer.h), or
  // null: the engine reads its cls, eos, pad and unk ids (bge-m3's sparse weights leave them
  // out) and names it in ModelInfo; it keeps no pointer to it.
  const Tokenizer* tokenizer = nullptr;
  std::string no_tokenizer_reason;  // ModelInfo's, where there is no tokenizer
  // Where the tokenizer LoadModel loads beside the engine finds SentencePiece's code
  // (--sentencepiece-module; empty: the module's search path).
  SentencePieceModuleOptions sentencepiece;
  // Where CPU tensors' memory comes from (process_tuning.h: RELSERVE_ALLOCATOR, read at the
  // programs' start and handed down): kCache puts LibTorch's large CPU tensors in relserve's
  // buffer cache (runtime/cpu_tensor_allocator.h), installed before the weights load.
  AllocatorMode allocator = AllocatorMode::kCache;
  // On a GPU, batches of at most this many tokens (batch rounded up to a device batch size,
  // times length) replay the encoder's forward from a CUDA graph captured at warm-up
  // (captured_forwards.h); 0 runs every batch eagerly. Unused on the CPU.
  int64_t cuda_graph_tokens = 4096;
  // How attention runs on a GPU: the path (bias or tables) and the SDPA backend the bias path may
  // use (attention_options.h; the backend is LibTorch's process-wide choice, set at load). Unused
  // on the CPU, whose own path runs every family.
  AttentionOptions gpu_attention;
  // Under dtype int8 on the CPU, the precision of attention's products (attention_options.h:
  // auto = bfloat16 where the CPU has bfloat16 instructions); unused under other dtypes.
  Int8Attention int8_attention = Int8Attention::kAuto;
  // Under dtype int8 on the CPU, the bits of the weights (int8_weight_bits.h: auto = 8 where that
  // runs as fast, 7 on relserve's AVX2 kernel and on oneDNN's without VNNI).
  Int8WeightBits int8_weight_bits = Int8WeightBits::kAuto;
  // Logs the host time of forwards per (thread, batch, length) (shape_time_log.h): the first two
  // of each, and any much slower than the shape's mean, so that a cold shape shows.
  bool log_shape_times = false;
  // Which batch sizes batches run at: kOnDevice rounds them up to DeviceBatchSize on a GPU (so
  // that a few shapes, all warmed up, reach the kernels) and runs them as they are on the CPU;
  // kRounded rounds everywhere (tests); kExact never (--gpu-batch-sizes exact).
  BatchRounding batch_rounding = BatchRounding::kOnDevice;
  EngineKernels kernels;  // tests only: the serving defaults otherwise
};

// A padded batch in transformers' layout: row-major [batch, length] int64.
struct PaddedBatch {
  int64_t batch = 0;
  int64_t length = 0;
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> token_type_ids;  // empty = zeros
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major float32
};

// One model directory loaded for inference: the encoder, its pooling and head. Implements the
// serving backend interface. Its tokenizer is loaded beside it (LoadModel below).
//
// Sparse, multi-vector and token-classification outputs (kOutputSparse, kOutputMultiVector,
// kOutputTokenLogits) come from heads beside the encoder (heads/output_heads.h): a *ForMaskedLM
// checkpoint's masked-LM head gives SPLADE vectors (heads/masked_lm_head.h); bge-m3's
// sparse_linear.pt and colbert_linear.pt beside the weights give its lexical weights and ColBERT
// vectors (heads/bge_m3_heads.h); a ColBERT checkpoint's projection its vectors
// (heads/colbert_head.h). The pooled embedding is the model's pooling (heads/pooler.h) either way.
class Engine : public InferenceBackend {
 public:
  // Reads config.json, the weights (model.safetensors or a sharded index), the
  // sentence-transformers modules, and the heads above where the directory has them. Any
  // problem is an error that names it; nothing is half-loaded. Sizes in config.json must agree
  // with the checkpoint's tensors and stay within model_limits.h; options.max_length within
  // kMaxSequenceLength. A head that is there but malformed (a missing or misshaped tensor) is
  // INVALID_ARGUMENT naming its file and the tensor. An allocation that fails is
  // RESOURCE_EXHAUSTED, never an exception.
  static absl::StatusOr<std::unique_ptr<Engine>> Load(const std::string& model_dir, const EngineOptions& options);
  ~Engine() override;

  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput& sequence) const override;
  // kOutputSparse: SPLADE's v[j] = max over every token of log(1 + relu(logits[t, j])), or
  // bge-m3's largest relu(sparse_linear(h_t)) per token id without the tokenizer's cls, eos, pad
  // and unk; entries above 0, ids ascending. kOutputMultiVector: colbert_linear(h_t),
  // L2-normalised, for the tokens after the first (n - 1 vectors). kOutputPooledUnnormalized:
  // pooled_unnormalized, the pooled embedding without the Normalize module (`pooled` keeps it). FAILED_PRECONDITION naming the
  // architecture and what is missing for a head the model does not have.
  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch,
                                                  uint32_t outputs) override;
  absl::StatusOr<std::vector<SequenceOutput>> RunTimed(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                                       RunTimings* timings) override;
  // CUDA graphs captured so far, and batches replayed through them (both 0 without graphs).
  int64_t captured_graphs() const;
  int64_t graph_replays() const;
  // The attention calls of every forward so far, by the path that ran them, and their host time
  // (attention_options.h): a check that the path asked for is the one taken.
  struct AttentionCounts {
    int64_t cpu = 0, bias = 0, tables = 0;
    int64_t cpu_tiled = 0;  // of the cpu calls, those whose products ran in register tiles
    double host_seconds = 0;
  };
  AttentionCounts attention_counts() const;
  // The forwards whose last layer ran on each sequence's first token alone
  // (EngineKernels::first_token_forwards), warm-up ones included.
  int64_t first_token_forwards() const;
  // On the CPU the default doubling; on other devices every length batches run at there
  // (DeviceBatchLength), each a kernel configuration of its own.
  std::vector<int> WarmUpLengths(int max_length) const override;
  // On a GPU: warmed on every worker's thread (its libraries' per-thread caches, its stream), at
  // every batch size batches are rounded to (EngineOptions::batch_rounding).
  bool WarmsUpPerThread() const override;
  std::vector<int> WarmUpBatchSizes(int max_batch_size) const override;

  // transformers' forward on a padded batch: last_hidden_state, hidden_state_0..N and, for
  // classification models, logits. Used by `relserve-model forward` and the parity tests.
  absl::StatusOr<std::vector<NamedTensor>> ForwardPadded(const PaddedBatch& batch, bool all_hidden_states);

  const ModelConfig& config() const { return config_; }
  // The sparse and multi-vector heads found at load, where from, and why one is missing, for
  // the load log and `relserve-model info`: "sparse: splade, masked-LM head cls.predictions.*
  // (decoder: the word embeddings); multi-vector: none (no colbert_linear.pt)".
  const std::string& heads_description() const { return heads_description_; }

 private:
  struct Impl;  // torch state
  Engine();
  // Load, with exceptions left to the caller.
  static absl::StatusOr<std::unique_ptr<Engine>> LoadOrThrow(const std::string& model_dir,
                                                             const EngineOptions& options);
  // RunTimed's stages, as RunTimings names them. CheckBatch: the outputs asked for have their
  // heads, every sequence is valid. Prepare: the batch as host tensors (ids, masks, the pooling
  // mask). Forward: the copies to the device and the encoder's forward, eager or replayed from a
  // CUDA graph. Collect: pooling and the heads (heads/output_heads.h) on the forward's last hidden
  // state, and the copies back into each sequence's output.
  struct HostBatch;
  struct Forwarded;
  absl::Status CheckBatch(const std::vector<SequenceInput>& batch, uint32_t outputs) const;
  HostBatch Prepare(const std::vector<SequenceInput>& batch, uint32_t outputs) const;
  Forwarded Forward(const std::vector<SequenceInput>& batch, uint32_t outputs, const HostBatch& host);
  // Whether the batch's outputs read each sequence's first token alone, so that its forward may
  // keep only those after the last attention (EngineKernels::first_token_forwards).
  bool ReadsFirstTokensOnly(uint32_t outputs, const HostBatch& host) const;
  std::vector<SequenceOutput> Collect(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                      const HostBatch& host, Forwarded& forwarded) const;

  ModelConfig config_;
  ModelInfo info_;
  std::string heads_description_;
  std::optional<std::vector<int>> special_token_ids_;  // the tokenizer's, where there is one
  std::unique_ptr<Impl> impl_;
};

// A model directory loaded: its tokenizer (null where it has none: token ids only) and its
// engine, cutting at the same maximum length (config/max_length.h).
struct LoadedModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Engine> engine;
  // Copies of the engine on other devices (the server's --device list), sharing the tokenizer.
  std::vector<std::unique_ptr<Engine>> copies;
};
// `load_tokenizer` false: the engine alone (the model then takes token ids).
absl::StatusOr<LoadedModel> LoadModel(const std::string& model_dir, const EngineOptions& options,
                                      bool load_tokenizer = true);

// DeviceBatchLength, the length a GPU batch runs at: server/backend/device_shapes.h.

// Sets LibTorch's intra-op threads and, when OpenBLAS is the BLAS, OpenBLAS's threads.
// 0 leaves the defaults. Process-wide: call once at start-up.
void SetComputeThreads(int threads);

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_ENGINE_H_
