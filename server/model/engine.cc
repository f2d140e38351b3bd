#include "server/model/engine.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <cstring>
#include <new>
#include <optional>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/model/captured_forwards.h"
#include "server/model/heads/output_heads.h"
#include "server/model_config/colbert_config.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/shape_time_log.h"
#include "server/model/runtime/device_graph.h"
#include "server/util/log.h"
#include "server/model/runtime/cpu_tensor_allocator.h"
#include "server/model/runtime/device.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/families/family_models.h"
#include "server/model/families/family_registry.h"
#include "server/model/families/model_tokenizer.h"
#include "server/model_config/max_length.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/layers/int8_linear.h"
#include "server/model/layers/packed_linear.h"
#include "server/model/layers/layers.h"
#include "server/model_config/model_limits.h"
#include "server/model/heads/pooler.h"
#include "server/model/layers/token_packing.h"
#include "server/model/layers/weight_loader.h"
#include "server/checkpoint/model_checkpoint.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"
#include "server/util/file_util.h"
#include "server/util/process_tuning.h"
#include "server/util/status_macros.h"

namespace relserve {

struct Engine::Impl {
  at::ScalarType dtype = at::kFloat;  // of the weights as loaded and of the activations
  bool int8 = false;                   // the encoder layers' projections quantized (int8_linear.h)
  c10::Device device{c10::kCPU};
  std::unique_ptr<EncoderModel> model;
  std::unique_ptr<Pooler> pooler;
  int64_t pad_id = 0;
  std::unique_ptr<CapturedForwards> graphs;  // on a GPU with options.cuda_graph_tokens > 0
  AttentionKernels kernels;                   // what every forward's attention is told (options' path, kernels)
  AttentionStats attention_stats;             // every forward's attention calls
  std::unique_ptr<ShapeTimeLog> shape_log;    // with options.log_shape_times
  BatchRounding batch_rounding = BatchRounding::kOnDevice;  // options.batch_rounding
  bool first_token_forwards = true;                         // options.kernels'
  std::atomic<int64_t> first_token_forwards_run{0};         // forwards that took it
  // The sparse, multi-vector and token-classification heads beside the encoder.
  OutputHeads heads;
};

namespace {

// The weights' and activations' scalar type: int8 keeps float32 weights (the encoder's
// projections are quantized after load).
at::ScalarType ScalarTypeOf(DType t) {
  switch (t) {
    case DType::kBFloat16: return at::kBFloat16;
    case DType::kFloat16: return at::kHalf;
    case DType::kFloat32:
    case DType::kInt8: break;
  }
  return at::kFloat;
}

DType DTypeOf(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return DType::kBFloat16;
    case at::kHalf: return DType::kFloat16;
    default: return DType::kFloat32;
  }
}

// Torch reports failures as exceptions; the engine's callers get statuses.
// c10::Error's text carries the C++ backtrace after the message, as "\nException raised from
// ..." or, for failed enforcements such as an allocation, "\nframe #0: ...": only the message
// is for users.
absl::Status TorchError(const std::exception& e, const char* what) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory (", e.what(), ")"));
  }
  std::string msg = e.what();
  for (const char* trace : {"\nException raised from", "\nframe #"}) {
    const auto start = msg.find(trace);
    if (start != std::string::npos) msg.resize(start);
  }
  if (absl::StrContains(msg, "out of memory") || absl::StrContains(msg, "DefaultCPUAllocator: can't allocate")) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory: ", msg));
  }
  return absl::InternalError(absl::StrCat(what, ": ", msg));
}

// The checkpoint's file(s), for messages about tensors in them.
std::string CheckpointFiles(const std::string& dir, const Checkpoint& checkpoint) {
  const std::vector<std::string>& names = checkpoint.file_names();
  if (names.size() == 1) return JoinPath(dir, names.front());
  return absl::StrCat(dir, " (", absl::StrJoin(names, ", "), ")");
}

// The tokenizer's cls, eos, pad and unk ids (bge-m3's sparse weights leave them out); none
// without a tokenizer.
std::optional<std::vector<int>> BgeM3DroppedIds(const Tokenizer* tokenizer) {
  if (tokenizer == nullptr) return std::nullopt;
  return std::vector<int>{tokenizer->cls_id(), tokenizer->eos_id(), tokenizer->pad_id(), tokenizer->unk_id()};
}

// A ColBERT checkpoint's rules in the tokenizer's ids: the markers as convert_tokens_to_ids
// finds them (PyLate and Stanford alike), the expansion token ([MASK]), and the skiplist as
// each library makes it: PyLate converts each word as one token (the unknown token's id where
// the vocabulary lacks it, as transformers does), Stanford encodes each and keeps the first id.
absl::StatusOr<LateInteractionInfo> ResolveLateInteraction(const ColbertConfig& c, const Tokenizer& tokenizer) {
  LateInteractionInfo li;
  li.enabled = true;
  li.layout = c.layout == ColbertConfig::Layout::kStanford ? "stanford" : "pylate";
  li.query_length = c.query_length;
  li.document_length = c.document_length;
  li.do_query_expansion = c.do_query_expansion;
  li.attend_to_expansion_tokens = c.attend_to_expansion_tokens;
  auto marker = [&](const std::string& token, const char* key) -> absl::StatusOr<int32_t> {
    if (token.empty()) return -1;
    const int id = tokenizer.TokenToId(token);
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(c.source, ": ", key, " \"", token,
                                                     "\" is not a token of the model's tokenizer"));
    }
    return id;
  };
  const bool stanford = c.layout == ColbertConfig::Layout::kStanford;
  ASSIGN_OR_RETURN(li.query_marker_id, marker(c.query_prefix, stanford ? "query_token_id" : "query_prefix"));
  ASSIGN_OR_RETURN(li.document_marker_id, marker(c.document_prefix, stanford ? "doc_token_id" : "document_prefix"));
  li.expansion_id = tokenizer.mask_id() >= 0 ? tokenizer.mask_id() : tokenizer.eos_id();
  if (li.do_query_expansion && li.expansion_id < 0) {
    return absl::InvalidArgumentError(absl::StrCat(c.source, ": query expansion needs a [MASK] (or EOS) token, "
                                                   "and the model's tokenizer has none"));
  }
  const int marker_tokens = li.query_marker_id >= 0 ? 1 : 0;
  if (li.query_length < tokenizer.NumSpecialTokens(false) + marker_tokens + 1 ||
      li.document_length < tokenizer.NumSpecialTokens(false) + (li.document_marker_id >= 0 ? 1 : 0) + 1) {
    return absl::InvalidArgumentError(absl::StrCat(c.source, ": query and document lengths ", li.query_length, ", ",
                                                   li.document_length, " leave no room for a token beside ",
                                                   "the special tokens and the marker"));
  }
  for (const std::string& word : c.skiplist_words) {
    int id = -1;
    if (c.skiplist_by_encoding) {
      auto ids = tokenizer.EncodeRaw(word);
      if (ids.ok() && !ids->empty()) id = ids->front();
    } else {
      id = tokenizer.TokenToId(word);
      if (id < 0) id = tokenizer.unk_id();
    }
    if (id >= 0 && std::find(li.skiplist_ids.begin(), li.skiplist_ids.end(), id) == li.skiplist_ids.end()) {
      li.skiplist_ids.push_back(id);
    }
  }
  return li;
}

std::vector<float> ToFloatVector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace

bool Engine::WarmsUpPerThread() const { return !impl_->device.is_cpu(); }

std::vector<int> Engine::WarmUpBatchSizes(int max_batch_size) const {
  const bool rounded = impl_->batch_rounding == BatchRounding::kRounded ||
                       (impl_->batch_rounding == BatchRounding::kOnDevice && !impl_->device.is_cpu());
  if (!rounded) return InferenceBackend::WarmUpBatchSizes(max_batch_size);
  // The sizes batches of at most max_batch_size sequences run at (the last one rounded up too).
  std::vector<int> sizes = DeviceBatchSizes(max_batch_size);
  if (!sizes.empty()) sizes.back() = DeviceBatchSize(sizes.back(), std::numeric_limits<int>::max());
  return sizes;
}

int64_t Engine::captured_graphs() const { return impl_->graphs ? impl_->graphs->graphs() : 0; }
int64_t Engine::graph_replays() const { return impl_->graphs ? impl_->graphs->replays() : 0; }

Engine::AttentionCounts Engine::attention_counts() const {
  const AttentionStats& s = impl_->attention_stats;
  AttentionCounts counts;
  counts.cpu = s.cpu_calls.load();
  counts.cpu_tiled = s.cpu_tiled_calls.load();
  counts.bias = s.bias_calls.load();
  counts.tables = s.table_calls.load();
  counts.host_seconds = static_cast<double>(s.host_nanoseconds.load()) * 1e-9;
  return counts;
}

int64_t Engine::first_token_forwards() const { return impl_->first_token_forwards_run.load(); }

std::vector<int> Engine::WarmUpLengths(int max_length) const {
  if (impl_->device.is_cpu()) return InferenceBackend::WarmUpLengths(max_length);
  return DeviceBatchLengths(max_length);
}

void SetComputeThreads(int threads) {
  if (threads <= 0) return;
  at::set_num_threads(threads);
  // OpenBLAS keeps its own pool; LibTorch does not size it.
  using SetThreadsFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreadsFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) fn(threads);
}

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Load(const std::string& dir, const EngineOptions& options) {
  // The steps below turn the failures they expect into statuses; whatever still escapes as an
  // exception (an allocation, a library) fails the load with its message, never the process.
  try {
    return LoadOrThrow(dir, options);
  } catch (const std::exception& e) {
    return TorchError(e, "loading the model");
  }
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& dir, const EngineOptions& options, bool load_tokenizer) {
  LoadedModel loaded;
  EngineOptions with_tokenizer = options;
  if (load_tokenizer && IsDirectory(dir)) {
    // The same files and length the engine reads next; a problem with them is the engine's to
    // report, in its words, so the tokenizer is only looked for where they are sound.
    auto config = LoadModelConfig(dir);
    auto st = config.ok() ? LoadSentenceTransformersConfig(dir) : config.status();
    auto max_length = st.ok() ? ResolveMaxLength(*config, *st, options.max_length) : st.status();
    if (max_length.ok()) {
      ASSIGN_OR_RETURN(ModelTokenizer tokenizer, LoadModelTokenizer(dir, *config, *st, max_length->tokens, options.sentencepiece));
      loaded.tokenizer = std::move(tokenizer.tokenizer);
      with_tokenizer.tokenizer = loaded.tokenizer.get();
      with_tokenizer.no_tokenizer_reason = std::move(tokenizer.no_tokenizer_reason);
    }
  }
  ASSIGN_OR_RETURN(loaded.engine, Engine::Load(dir, with_tokenizer));
  return loaded;
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::LoadOrThrow(const std::string& dir, const EngineOptions& options) {
  if (!IsDirectory(dir)) return absl::NotFoundError(absl::StrCat("model directory ", dir, " does not exist"));
  // Before the weights, so that they and every activation come from the same allocator.
  if (options.allocator == AllocatorMode::kCache) UseBufferCacheForCpuTensors();
  std::unique_ptr<Engine> engine(new Engine());
  ASSIGN_OR_RETURN(engine->config_, LoadModelConfig(dir));
  const ModelConfig& config = engine->config_;
  engine->impl_->dtype = ScalarTypeOf(options.dtype);
  ASSIGN_OR_RETURN(engine->impl_->device, ParseDevice(options.device));
  const c10::Device device = engine->impl_->device;
  if (engine->impl_->dtype == at::kHalf && device.is_cpu()) {
    // LibTorch has no float16 matrix product on the CPU ("addmm_impl_cpu_" not implemented).
    return absl::InvalidArgumentError(
        "dtype float16 runs on a GPU only (LibTorch has no float16 matrix product on the CPU); use bfloat16 or "
        "float32 on the CPU");
  }
  if (engine->impl_->dtype == at::kBFloat16 && device.is_cpu() && !CpuHasBfloat16Products()) {
    LogWarning(absl::StrCat(dir, ": dtype bfloat16 on a CPU without AVX512-BF16: its products are converted in "
                            "software (oneDNN on AVX-512) or run by LibTorch's reference loops (without AVX-512), "
                            "slower than float32 may be; measure with relserve-model bench"));
  }
  if (options.dtype == DType::kInt8) {
    if (!device.is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dtype int8 runs on the CPU only (device ", device.str(), "); use bfloat16 or float16 there"));
    }
    if (ChooseInt8Gemm(options.kernels.packed_int8_gemm) == Int8Gemm::kOneDnn) RETURN_IF_ERROR(EnableInt8Engine());
    engine->impl_->int8 = true;
    if (options.int8_attention == Int8Attention::kBfloat16 && !CpuHasBfloat16Products()) {
      return absl::InvalidArgumentError(
          "int8 attention bfloat16: this CPU has no bfloat16 instructions (AVX512-BF16); use auto or float32");
    }
    engine->impl_->kernels.cpu_products_in_bfloat16 =
        options.int8_attention == Int8Attention::kBfloat16 ||
        (options.int8_attention == Int8Attention::kAuto && CpuHasBfloat16Products());
    engine->impl_->kernels.cpu_tiles_before_bfloat16 =
        options.int8_attention == Int8Attention::kAuto && engine->impl_->kernels.cpu_products_in_bfloat16;
    // Weight bits the GEMM cannot take are refused before any weight is read.
    RETURN_IF_ERROR(Int8WeightLevel(ChooseInt8Gemm(options.kernels.packed_int8_gemm), options.int8_weight_bits).status());
  }

  // The sentence-transformers files: pooling, and the Transformer module's max_seq_length and
  // do_lower_case, read before the weights so that a bad length fails at once.
  ASSIGN_OR_RETURN(SentenceTransformersConfig st, LoadSentenceTransformersConfig(dir));

  ASSIGN_OR_RETURN(const MaxLength resolved_length, ResolveMaxLength(config, st, options.max_length));
  int max_length = resolved_length.tokens;
  std::string max_length_source = resolved_length.source;
  // A ColBERT checkpoint: its query and document lengths, not sentence-transformers'
  // max_seq_length (PyLate writes document_length - 1 there and sets it per side).
  ASSIGN_OR_RETURN(const std::optional<ColbertConfig> colbert, LoadColbertConfig(dir, config, st));
  if (colbert.has_value() && options.max_length == 0) {
    max_length = std::max(colbert->query_length, colbert->document_length);
    max_length_source = absl::StrCat("the longer of query and document lengths ", colbert->query_length, ", ",
                                     colbert->document_length, " of ", colbert->source);
  }

  ASSIGN_OR_RETURN(auto checkpoint, OpenModelCheckpoint(dir));
  std::string projections = "libtorch";  // ModelInfo::projections
  int int8_weight_bits = 0;              // ModelInfo::int8_weight_bits
  int64_t packed_float32_rows = 0;       // the most tokens the packed float32 GEMM takes (0: none)
  static_assert(kPackedLinearEveryRow == ModelInfo::kEveryBatch, "one bound means every batch");
  int packed_float32_heads = 0;          // ModelInfo::packed_float32_heads
  // The bound it would take: the engine's option, or the tiles' default.
  const int64_t packed_rows = options.kernels.packed_gemm_max_rows > 0
                                  ? options.kernels.packed_gemm_max_rows
                                  : DefaultPackedLinearMaxRows(PackedWeights::Best());
  try {
    c10::InferenceMode guard;
    WeightLoader weights(*checkpoint, engine->impl_->dtype, device);
    auto model = LoadFamilyModel(config, weights);
    if (!model.ok()) return absl::Status(model.status().code(), absl::StrCat(dir, ": ", model.status().message()));
    engine->impl_->model = std::move(*model);
    if (engine->impl_->int8) {
      // int8: relserve's GEMM in AMX tiles, VNNI or AVX2 registers where the CPU has them
      // (int8_linear.h), else oneDNN's.
      const Int8Gemm gemm = ChooseInt8Gemm(options.kernels.packed_int8_gemm);
      RETURN_IF_ERROR(QuantizeLinearsInt8(engine->impl_->model->EncoderLinears(), gemm, options.int8_weight_bits));
      projections = Int8GemmName(gemm);
      int8_weight_bits =
          *Int8WeightLevel(gemm, options.int8_weight_bits) == PackedInt8Weights::kSevenBitLevel ? 7 : 8;
      if (gemm != Int8Gemm::kOneDnn &&
          (!engine->impl_->kernels.cpu_products_in_bfloat16 || engine->impl_->kernels.cpu_tiles_before_bfloat16) &&
          options.kernels.packed_float32_gemm && PackedWeights::Supported()) {
        // With relserve's int8 GEMM and attention's products in float32 (in short batches at least:
        // cpu_tiles_before_bfloat16), the rest of a short batch's forward leaves OpenBLAS too, as in
        // float32: the heads (float32) packed for relserve's float32 GEMM, attention's products in the
        // tiles (TiledAttention). OpenBLAS's threads, once woken, yield on the cores the int8 GEMM's
        // threads need.
        // The bound as before AMD's every-batch default (packed_linear.h), which was measured for
        // float32's forwards alone: past 192 tokens on AVX-512, int8's attention products stay in
        // bfloat16 (Int8Attention::kAuto), where they measured faster than in float32.
        const int64_t int8_rows = options.kernels.packed_gemm_max_rows > 0
                                      ? options.kernels.packed_gemm_max_rows
                                      : DefaultPackedLinearMaxRows(PackedWeights::Best(), /*amd_cpu=*/false);
        RETURN_IF_ERROR(PackLinearsFloat32(engine->impl_->model->HeadLinears(), int8_rows));
        packed_float32_rows = int8_rows;
      }
    } else if (engine->impl_->dtype == at::kBFloat16 && device.is_cpu() && options.kernels.packed_bfloat16_gemm &&
               PackedBFloat16Weights::Supported()) {
      // bfloat16 on the CPU: the encoder's weights packed once for relserve's GEMM, in AMX tiles or
      // AVX512-BF16 registers (packed_linear.h).
      RETURN_IF_ERROR(PackLinearsBFloat16(engine->impl_->model->ProjectionLinears()));
      projections = absl::StrCat("relserve-", BFloat16KernelName(PackedBFloat16Weights::Best()));
    } else if (engine->impl_->dtype == at::kFloat && device.is_cpu() && options.kernels.packed_float32_gemm &&
               PackedWeights::Supported()) {
      // float32 on the CPU: the encoder's weights packed once for relserve's GEMM (packed_linear.h),
      // the heads' beside them, so that a short batch's forward wakes no OpenBLAS thread (whose
      // yielding, after a pooler's one row, took 6-18% of a core beside the two computing).
      RETURN_IF_ERROR(
          PackLinearsFloat32(engine->impl_->model->ProjectionLinears(), packed_rows));
      projections = absl::StrCat("relserve-", Float32KernelName(PackedWeights::Best()));
      packed_float32_rows = packed_rows;
    }
    // The heads beside the encoder that the checkpoint holds (heads/output_heads.h).
    RETURN_IF_ERROR(engine->impl_->heads.LoadFromWeights(config, colbert, weights, engine->impl_->model->word_embeddings(),
                                                         device, dir, CheckpointFiles(dir, *checkpoint)));
    absl::Status unused = weights.CheckNoneUnused(config.family->IgnoredPrefixes(config));
    if (!unused.ok()) return absl::InvalidArgumentError(absl::StrCat(dir, ": ", unused.message()));
  } catch (const std::exception& e) {
    return TorchError(e, "loading weights");
  }

  // Pooling: an explicit mode wins, then the sentence-transformers modules, then mean.
  PoolingConfig pooling;
  std::vector<DenseConfig> dense;
  bool normalize = false;
  if (!options.pooling.empty()) {
    ASSIGN_OR_RETURN(pooling, PoolingFromMode(options.pooling, config.hidden_size));
  } else if (st.present && st.has_pooling) {
    pooling = st.pooling;
  } else {
    // No modules.json, or a sparse encoder's (SpladePooling, no Pooling): the mean.
    ASSIGN_OR_RETURN(pooling, PoolingFromMode("mean", config.hidden_size));
  }
  if (st.present) {
    dense = st.dense;
    normalize = st.normalize;
  }
  try {
    ASSIGN_OR_RETURN(Pooler pooler, Pooler::Create(pooling, dense, normalize, config.hidden_size));
    engine->impl_->pooler = std::make_unique<Pooler>(std::move(pooler));
    engine->impl_->pooler->MoveTo(device);
    SynchronizeDevice(device);  // the weights are read next by the workers' own streams
  } catch (const std::exception& e) {
    return TorchError(e, "loading pooling modules");
  }
  // bge-m3's heads beside the weights.
  RETURN_IF_ERROR(engine->impl_->heads.LoadBesideWeights(dir, config.hidden_size, device));
  if (packed_float32_rows != 0) {
    // The output heads (a token classifier, ColBERT's and bge-m3's projections) and the Dense
    // modules after pooling, float32 wherever the encoder's weights are packed, take the packed
    // GEMM too: a forward that asks for them then wakes no OpenBLAS thread either.
    std::vector<Linear*> heads = engine->impl_->heads.Linears();
    for (Linear* dense : engine->impl_->pooler->Linears()) heads.push_back(dense);
    std::vector<Linear*> float32_heads;
    for (Linear* head : heads) {
      if (head->weight.defined() && head->weight.scalar_type() == at::kFloat) float32_heads.push_back(head);
    }
    try {
      RETURN_IF_ERROR(PackLinearsFloat32(float32_heads, packed_float32_rows));
    } catch (const std::exception& e) {
      return TorchError(e, "packing the output heads");
    }
    packed_float32_heads = static_cast<int>(float32_heads.size());
  }
  // What loading freed (copies converted to another type, the weights as loaded where every batch
  // takes the packed copy) goes back to the system rather than waiting in the buffer cache.
  if (device.is_cpu()) ClearCpuTensorCache();

  ModelInfo& info = engine->info_;
  info.architecture = config.architecture;
  info.model_type = config.model_type;
  info.hidden_size = config.hidden_size;
  info.num_layers = config.num_layers;
  info.vocab_size = config.vocab_size;
  info.type_vocab_size = config.type_vocab_size;
  info.max_length = max_length;
  info.max_length_source = max_length_source;
  info.embedding_dim = engine->impl_->pooler->output_dim();
  info.pooling = engine->impl_->pooler->Info();
  info.prompts = st.prompts;
  info.default_prompt_name = st.default_prompt_name;
  info.similarity_fn_name = st.similarity_fn_name;
  info.is_matryoshka = config.is_matryoshka;
  info.matryoshka_dimensions = config.matryoshka_dimensions;
  info.pooling_includes_prompt = pooling.include_prompt;
  if (config.head == HeadKind::kTokenClassification) {
    info.token_labels = config.id2label;
  } else {
    info.labels = config.id2label;
  }
  // A head without problem_type: regression with one label, single-label with more.
  info.problem_type = config.problem_type.empty() && info.labels.size() == 1 ? ProblemType::kRegression
                                                                             : ProblemTypeFromConfig(config.problem_type);
  info.dtype = engine->impl_->int8 ? DType::kInt8 : DTypeOf(engine->impl_->dtype);
  info.device = device.str();
  info.projections = projections;
  info.int8_weight_bits = int8_weight_bits;
  info.packed_float32_max_tokens = packed_float32_rows;
  info.packed_float32_heads = packed_float32_heads;
  info.has_tokenizer = options.tokenizer != nullptr;
  if (options.tokenizer != nullptr) info.tokenizer_file = options.tokenizer->source_file();
  info.no_tokenizer_reason = options.no_tokenizer_reason;
  engine->special_token_ids_ = BgeM3DroppedIds(options.tokenizer);
  if (colbert.has_value() && options.tokenizer != nullptr) {
    ASSIGN_OR_RETURN(info.late_interaction, ResolveLateInteraction(*colbert, *options.tokenizer));
  }
  engine->impl_->pad_id = config.pad_token_id;
  if (options.cuda_graph_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_graph_tokens ", options.cuda_graph_tokens, " is negative"));
  }
  engine->impl_->first_token_forwards = options.kernels.first_token_forwards;
  engine->impl_->kernels.path = options.gpu_attention.path;
  engine->impl_->kernels.device_path_on_cpu = options.kernels.gpu_attention_on_cpu;
  engine->impl_->kernels.fused = options.kernels.fused_attention;
  engine->impl_->kernels.avx512 = options.kernels.avx512_softmax;
  engine->impl_->kernels.cpu_tiled_max_tokens =
      TiledAttentionMaxTokens(options.kernels.tiled_attention, packed_float32_rows,
                              PackedWeights::Supported() && PackedWeights::Best() == Float32Kernel::kAvx2);
  engine->impl_->kernels.cpu_tiled_bfloat16_max_tokens =
      BFloat16TiledAttentionMaxTokens(options.kernels.bfloat16_tiled_attention);
  engine->impl_->batch_rounding = options.batch_rounding;
  if (!device.is_cpu()) {
    if (absl::Status backend = UseSdpaBackend(options.gpu_attention.sdpa); !backend.ok()) {
      return absl::Status(backend.code(), absl::StrCat("--gpu-attention ", AttentionOptionsName(options.gpu_attention),
                                                       ": ", backend.message()));
    }
  }
  if (options.log_shape_times) engine->impl_->shape_log = std::make_unique<ShapeTimeLog>(config.architecture);
  if (options.cuda_graph_tokens > 0 && DeviceGraphsAvailable(device, options.kernels.device_graphs_on_cpu)) {
    engine->impl_->graphs =
        std::make_unique<CapturedForwards>(*engine->impl_->model, device, options.cuda_graph_tokens,
                                           engine->impl_->pad_id, engine->impl_->kernels,
                                           options.kernels.device_graphs_on_cpu);
  }
  if (st.splade.has_value()) {
    MaskedLmHead::Pooling pooling;
    pooling.sum = st.splade->sum;
    pooling.log1p_relu = st.splade->log1p_relu;
    RETURN_IF_ERROR(engine->impl_->heads.SetSpladePooling(pooling, dir, config.architecture));
  }
  engine->heads_description_ = engine->impl_->heads.Describe(config, engine->special_token_ids_, &engine->info_);
  return engine;
}

absl::Status Engine::Validate(const SequenceInput& s) const {
  const size_t n = s.input_ids.size();
  if (n == 0) return absl::InvalidArgumentError("input_ids is empty");
  if (static_cast<int64_t>(n) > info_.max_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence has ", n, " tokens, more than the maximum of ", info_.max_length));
  }
  for (size_t i = 0; i < n; ++i) {
    if (s.input_ids[i] < 0 || s.input_ids[i] >= info_.vocab_size) {
      return FieldError(FieldErrorKind::kOutOfVocabulary, absl::StrCat("input_ids[", i, "]"),
                        absl::StrCat("input_ids[", i, "] = ", s.input_ids[i], " is outside the vocabulary [0, ",
                                     info_.vocab_size, ")"));
    }
  }
  if (!s.token_type_ids.empty()) {
    if (s.token_type_ids.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("token_type_ids has ", s.token_type_ids.size(),
                                                     " entries for ", n, " input_ids"));
    }
    // Without token-type embeddings (type_vocab_size 0, e.g. DeBERTa-v3, T5) transformers
    // ignores token_type_ids, which tokenizers still fill with 0/1 for pairs.
    const int limit = info_.type_vocab_size;
    for (size_t i = 0; i < n && limit > 0; ++i) {
      if (s.token_type_ids[i] < 0 || s.token_type_ids[i] >= limit) {
        return absl::InvalidArgumentError(absl::StrCat("token_type_ids[", i, "] = ", s.token_type_ids[i],
                                                       " is outside [0, ", limit, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SequenceOutput>> Engine::Run(const std::vector<SequenceInput>& batch, uint32_t outputs) {
  return RunTimed(batch, outputs, nullptr);
}

// The prepare stage's work: the batch as tensors on the host (in page-locked memory for a GPU,
// so that the forward stage's copies are asynchronous).
struct Engine::HostBatch {
  int64_t B = 0;  // sequences
  int64_t R = 0;  // rows run: B, or B rounded up to a device batch size (device_shapes.h)
  int64_t L = 0;  // the length the batch runs at
  bool padded = false;      // a row holds fewer than L tokens
  bool unattended = false;  // a sequence has tokens computed but not attended to (attended_length)
  int64_t tokens = 0;       // real tokens, one per row past B
  at::Tensor ids, mask, types;  // [R, L] int64; types undefined where no sequence has token types
  at::Tensor pool_mask;         // pooling's own mask where a prompt is left out of pooling, else undefined
  at::Tensor present;           // which positions hold a sequence's tokens (the heads' rows)
};

// The forward stage's work: the encoder's outputs on the device, and what reads them.
struct Engine::Forwarded {
  EncoderOutputs out;
  at::Tensor attention_mask;  // the batch's mask on the device (the graph's for a replay)
  at::Tensor token_rows;      // the real tokens' rows, where the eager forward was given them
  at::Tensor present;         // HostBatch::present on the device
  at::Tensor pool_mask;       // HostBatch::pool_mask on the device
  // A replay's outputs, holding the graphs' lock until the collect stage has read them.
  std::optional<CapturedForwards::Replayed> replayed;
  bool capture = false;  // the first eager batch of a length meant for graphs: capture them next
  absl::Time started, finished;  // the forward stage's (the end of preparing, its own end)
};

absl::Status Engine::CheckBatch(const std::vector<SequenceInput>& batch, uint32_t outputs) const {
  if ((outputs & kOutputLogits) && info_.labels.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.architecture, " has no classification head"));
  }
  RETURN_IF_ERROR(impl_->heads.CheckOutputs(outputs, info_.architecture));
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::Status s = Validate(batch[i]);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": ", s.message()));
  }
  return absl::OkStatus();
}

Engine::HostBatch Engine::Prepare(const std::vector<SequenceInput>& batch, uint32_t outputs) const {
  HostBatch h;
  const int64_t B = h.B = static_cast<int64_t>(batch.size());
  int64_t L = 0;
  bool has_types = false;
  bool skips = false;  // a sequence leaves a prompt out of pooling
  // A sequence has tokens computed but not attended to (SequenceInput::attended_length): the
  // batch then keeps every position (pack_rows false) and masks those as keys only.
  bool unattended = false;
  for (const SequenceInput& s : batch) {
    skips = skips || s.pooling_skip > 0;
    unattended = unattended || (s.attended_length > 0 && s.attended_length < static_cast<int32_t>(s.input_ids.size()));
    L = std::max<int64_t>(L, static_cast<int64_t>(s.input_ids.size()));
    has_types = has_types || (!s.token_type_ids.empty() &&
                              (info_.type_vocab_size > 0 || config_.token_types_are_segment_ids));
  }
  const bool on_device = !impl_->device.is_cpu();
  if (on_device) L = DeviceBatchLength(static_cast<int>(L), info_.max_length);
  // The rows the batch runs at: B, or B rounded up to a device batch size (device_shapes.h);
  // rows past B hold one real token each (a row without any would be a softmax over nothing)
  // and their outputs are never read.
  const bool round_rows = impl_->batch_rounding == BatchRounding::kRounded ||
                          (impl_->batch_rounding == BatchRounding::kOnDevice && on_device);
  const int64_t R = round_rows ? DeviceBatchSize(static_cast<int>(B), std::numeric_limits<int>::max()) : B;
  h.R = R;
  h.L = L;
  h.unattended = unattended;
  // Built on the host (in page-locked memory for a GPU, so the copies are asynchronous), then
  // sent to the device in one go each by the forward stage.
  const auto host = at::TensorOptions().dtype(at::kLong).pinned_memory(on_device);
  h.ids = at::empty({R, L}, host).fill_(impl_->pad_id);
  h.mask = at::zeros({R, L}, host);
  if (has_types) h.types = at::zeros({R, L}, host);
  h.padded = R > B;
  h.tokens = R - B;
  auto ids_a = h.ids.accessor<int64_t, 2>();
  auto mask_a = h.mask.accessor<int64_t, 2>();
  for (int64_t b = B; b < R; ++b) mask_a[b][0] = 1;
  for (int64_t b = 0; b < B; ++b) {
    const SequenceInput& s = batch[b];
    const int64_t n = static_cast<int64_t>(s.input_ids.size());
    h.padded = h.padded || n < L;
    h.tokens += n;
    const int64_t attended = s.attended_length > 0 ? std::min<int64_t>(s.attended_length, n) : n;
    for (int64_t t = 0; t < n; ++t) {
      ids_a[b][t] = s.input_ids[t];
      mask_a[b][t] = t < attended ? 1 : 0;
    }
    if (has_types && !s.token_type_ids.empty()) {
      auto types_a = h.types.accessor<int64_t, 2>();
      for (int64_t t = 0; t < n; ++t) types_a[b][t] = s.token_type_ids[t];
    }
  }
  // Pooling's own mask: the attention mask without the prompt tokens of sequences that skip
  // them (sentence-transformers' Pooling with include_prompt false zeroes them).
  if (skips && (outputs & kOutputPooled)) {
    h.pool_mask = h.mask.clone();
    auto pool_a = h.pool_mask.accessor<int64_t, 2>();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t n = static_cast<int64_t>(batch[b].input_ids.size());
      for (int64_t t = 0, k = std::min<int64_t>(std::max(batch[b].pooling_skip, 0), n); t < k; ++t) {
        pool_a[b][t] = 0;
      }
    }
  }
  // Which positions hold a sequence's tokens, attended to or not (the heads' rows).
  h.present = h.mask;
  if (unattended) {
    h.present = at::zeros({R, L}, host);
    auto present_a = h.present.accessor<int64_t, 2>();
    for (int64_t b = B; b < R; ++b) present_a[b][0] = 1;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0, n = static_cast<int64_t>(batch[b].input_ids.size()); t < n; ++t) present_a[b][t] = 1;
    }
  }
  return h;
}

bool Engine::ReadsFirstTokensOnly(uint32_t outputs, const HostBatch& h) const {
  if (!impl_->first_token_forwards || !impl_->model->RunsFirstTokenOnly()) return false;
  // The family's logits read the first token; pooling does where it is CLS alone.
  constexpr uint32_t kFirstTokenOutputs = kOutputLogits | kOutputPooled | kOutputPooledUnnormalized;
  if ((outputs & ~kFirstTokenOutputs) != 0) return false;
  if ((outputs & (kOutputPooled | kOutputPooledUnnormalized)) != 0 && !impl_->pooler->ReadsFirstTokenOnly()) return false;
  // Position 0 of every row a real token (the rows are right-padded; Validate refuses empty ones).
  return h.L > 0 && h.mask.select(1, 0).ne(0).all().item<bool>();
}

Engine::Forwarded Engine::Forward(const std::vector<SequenceInput>& batch, uint32_t outputs, const HostBatch& h) {
  const c10::Device device = impl_->device;
  const bool on_device = !device.is_cpu();
  const int64_t B = h.B, R = h.R, L = h.L;
  Forwarded f;
  EncoderInputs in{h.ids, h.mask, h.types, h.padded || h.unattended, at::Tensor()};
  if (h.unattended) in.pack_rows = false;
  AttentionStats forward_stats;  // this forward's attention calls
  in.attention = impl_->kernels;
  in.attention_stats = &forward_stats;
  f.present = h.present;
  f.pool_mask = h.pool_mask;
  // A CUDA graph of this shape, where one is meant for it and captured (captured_forwards.h).
  CapturedForwards* graphs = impl_->graphs.get();
  const bool graphable = graphs != nullptr && !h.types.defined() && !h.unattended &&
                         (outputs & (kOutputSparse | kOutputMultiVector)) == 0 && graphs->GraphBatch(R, L) > 0;
  const bool replay = graphable && graphs->Captured(L);
  in.first_token_only = graphs == nullptr && ReadsFirstTokensOnly(outputs, h);
  if (in.first_token_only) impl_->first_token_forwards_run.fetch_add(1, std::memory_order_relaxed);
  f.capture = graphable && !replay;
  if (on_device && f.pool_mask.defined()) f.pool_mask = f.pool_mask.to(device, /*non_blocking=*/true);
  // The replay copies its inputs into the graph's; where there is none (a capture failed on
  // another thread since), the batch runs eagerly.
  f.started = absl::Now();
  if (replay) f.replayed = graphs->Run(h.ids, h.mask);
  if (on_device && !f.replayed) {
    if (h.padded && !h.unattended) {
      const auto host = at::TensorOptions().dtype(at::kLong).pinned_memory(true);
      at::Tensor rows = at::empty({h.tokens}, host);
      int64_t* r = rows.data_ptr<int64_t>();
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t t = 0, n = static_cast<int64_t>(batch[b].input_ids.size()); t < n; ++t) *r++ = b * L + t;
      }
      for (int64_t b = B; b < R; ++b) *r++ = b * L;
      in.token_rows = rows.to(device, /*non_blocking=*/true);
    }
    in.input_ids = h.ids.to(device, /*non_blocking=*/true);
    in.attention_mask = h.mask.to(device, /*non_blocking=*/true);
    if (h.unattended) f.present = f.present.to(device, /*non_blocking=*/true);
    if (h.types.defined()) in.token_type_ids = h.types.to(device, /*non_blocking=*/true);
  }
  if (!f.replayed) f.started = absl::Now();
  if (f.replayed) {
    f.out = f.replayed->out;
    f.attention_mask = f.replayed->attention_mask;
  } else {
    f.out = impl_->model->Forward(in, /*all_hidden_states=*/false);
    f.attention_mask = in.attention_mask;
    f.token_rows = in.token_rows;
  }
  f.finished = absl::Now();
  AttentionStats& total = impl_->attention_stats;
  total.cpu_calls += forward_stats.cpu_calls.load();
  total.cpu_tiled_calls += forward_stats.cpu_tiled_calls.load();
  total.bias_calls += forward_stats.bias_calls.load();
  total.table_calls += forward_stats.table_calls.load();
  total.host_nanoseconds += forward_stats.host_nanoseconds.load();
  if (impl_->shape_log) {
    impl_->shape_log->Record(R, L, f.finished - f.started, absl::Nanoseconds(forward_stats.host_nanoseconds.load()),
                             f.replayed.has_value());
  }
  return f;
}

std::vector<SequenceOutput> Engine::Collect(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                            const HostBatch& h, Forwarded& f) const {
  const int64_t B = h.B, L = h.L;
  const EncoderOutputs& out = f.out;
  // The only copies back, and the only waits for the device: the results.
  std::vector<SequenceOutput> results(batch.size());
  at::Tensor pooled, pooled_raw, logits, states;
  auto to_host = [](const at::Tensor& t) { return t.to(at::kFloat).to(at::kCPU).contiguous(); };
  if (outputs & (kOutputPooled | kOutputPooledUnnormalized)) {
    // Pooling and Dense once; the Normalize module on top for `pooled`. The batcher ORs its
    // sequences' flags, so a batch may need both.
    const Pooler& pooler = *impl_->pooler;
    const at::Tensor raw =
        pooler(out.last_hidden_state, f.pool_mask.defined() ? f.pool_mask : f.attention_mask, /*normalize=*/false);
    if (outputs & kOutputPooledUnnormalized) pooled_raw = to_host(raw);
    if (outputs & kOutputPooled) pooled = to_host(pooler.Normalize(raw));
  }
  if (outputs & kOutputLogits) logits = to_host(out.logits);
  if (outputs & kOutputTokenStates) states = to_host(out.last_hidden_state);
  const int64_t H = out.last_hidden_state.size(2);
  at::Tensor token_logits;  // [B, L, labels]
  if (outputs & kOutputTokenLogits) token_logits = to_host(impl_->heads.TokenLogits(out.last_hidden_state));
  // A graph's outputs are read (the copies above wait for them; sparse and multi-vector outputs
  // never come from a graph): the next replay may start while this batch's replies are built.
  f.replayed.reset();

  for (int64_t b = 0; b < B; ++b) results[b].num_tokens = static_cast<int32_t>(batch[b].input_ids.size());
  if (outputs & (kOutputSparse | kOutputMultiVector)) {
    // The sparse and multi-vector heads run on the real tokens only, packed sequence after
    // sequence.
    const at::Tensor packed = h.unattended ? TokenPacking(f.present, at::Tensor()).Pack(out.last_hidden_state)
                              : h.padded   ? TokenPacking(f.attention_mask, f.token_rows).Pack(out.last_hidden_state)
                                           : out.last_hidden_state.reshape({B * L, H});
    impl_->heads.Collect(outputs, packed, batch, &results);
  }
  for (int64_t b = 0; b < B; ++b) {
    SequenceOutput& r = results[b];
    if (states.defined()) {
      const float* p = states.data_ptr<float>() + b * L * H;
      r.token_states.assign(p, p + r.num_tokens * H);
    }
    if (pooled.defined()) {
      const float* p = pooled.data_ptr<float>() + b * pooled.size(1);
      r.pooled.assign(p, p + pooled.size(1));
    }
    if (pooled_raw.defined()) {
      const float* p = pooled_raw.data_ptr<float>() + b * pooled_raw.size(1);
      r.pooled_unnormalized.assign(p, p + pooled_raw.size(1));
    }
    if (logits.defined()) {
      const float* p = logits.data_ptr<float>() + b * logits.size(1);
      r.logits.assign(p, p + logits.size(1));
    }
    if (token_logits.defined()) {
      const int64_t labels = token_logits.size(2);
      const float* p = token_logits.data_ptr<float>() + b * token_logits.size(1) * labels;
      r.token_logits.assign(p, p + r.num_tokens * labels);
    }
  }
  return results;
}

absl::StatusOr<std::vector<SequenceOutput>> Engine::RunTimed(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                                             RunTimings* timings) {
  const absl::Time started = absl::Now();
  if (timings != nullptr) *timings = RunTimings();
  RETURN_IF_ERROR(CheckBatch(batch, outputs));
  if (batch.empty()) return std::vector<SequenceOutput>();
  try {
    c10::InferenceMode guard;
    DeviceStreamScope stream(impl_->device);
    // RunTimings' three stages: prepare (host tensors), forward (copies to the device, the
    // encoder or its graph), results (pooling, heads, copies back).
    const HostBatch host = Prepare(batch, outputs);
    Forwarded forwarded = Forward(batch, outputs, host);
    std::vector<SequenceOutput> results = Collect(batch, outputs, host, forwarded);
    if (timings != nullptr) {
      timings->prepare = forwarded.started - started;
      timings->forward = forwarded.finished - forwarded.started;
      timings->results = absl::Now() - forwarded.finished;
    }
    if (forwarded.capture) {
      // The first batch of this length (the warm-up's, on a GPU) ran eagerly: capture its graphs.
      const absl::Status captured = impl_->graphs->CaptureLength(host.L);
      if (!captured.ok()) {
        LogWarning(absl::StrCat(info_.architecture, " on ", impl_->device.str(), ": ", captured.message()));
      }
    }
    return results;
  } catch (const std::exception& e) {
    absl::Status status = TorchError(e, "forward");
    // What a failed batch left cached goes back to the device, for the halves the batcher
    // retries after RESOURCE_EXHAUSTED.
    if (absl::IsResourceExhausted(status)) ReleaseCachedDeviceMemory(impl_->device);
    return status;
  }
}

absl::StatusOr<std::vector<NamedTensor>> Engine::ForwardPadded(const PaddedBatch& batch, bool all_hidden_states) {
  const int64_t B = batch.batch, L = batch.length;
  if (B <= 0 || L <= 0) return absl::InvalidArgumentError("batch and length must be positive");
  const size_t n = static_cast<size_t>(B * L);
  if (batch.input_ids.size() != n || batch.attention_mask.size() != n ||
      (!batch.token_type_ids.empty() && batch.token_type_ids.size() != n)) {
    return absl::InvalidArgumentError(absl::StrCat("input arrays must each hold batch*length = ", n, " values"));
  }
  if (config_.max_length_limit > 0 && L > config_.max_length_limit) {
    return absl::InvalidArgumentError(absl::StrCat("length ", L, " exceeds ", config_.max_length_limit_source));
  }
  bool padded = false;
  for (size_t i = 0; i < n; ++i) {
    if (batch.input_ids[i] < 0 || batch.input_ids[i] >= info_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("input_ids[", i / L, "][", i % L, "] = ", batch.input_ids[i],
                                                     " is outside the vocabulary [0, ", info_.vocab_size, ")"));
    }
    if (batch.attention_mask[i] != 0 && batch.attention_mask[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("attention_mask[", i / L, "][", i % L, "] must be 0 or 1"));
    }
    padded = padded || batch.attention_mask[i] == 0;
    if (!batch.token_type_ids.empty() && info_.type_vocab_size > 0) {
      const int limit = info_.type_vocab_size;
      if (batch.token_type_ids[i] < 0 || batch.token_type_ids[i] >= limit) {
        return absl::InvalidArgumentError(absl::StrCat("token_type_ids[", i / L, "][", i % L, "] = ",
                                                       batch.token_type_ids[i], " is outside [0, ", limit, ")"));
      }
    }
  }
  try {
    c10::InferenceMode guard;
    DeviceStreamScope stream(impl_->device);
    auto make = [&](const std::vector<int64_t>& v) {
      return at::from_blob(const_cast<int64_t*>(v.data()), {B, L}, at::kLong)
          .to(impl_->device, at::kLong, /*non_blocking=*/false, /*copy=*/true);
    };
    EncoderInputs in{make(batch.input_ids), make(batch.attention_mask),
                     batch.token_type_ids.empty() ? at::Tensor() : make(batch.token_type_ids), padded,
                     at::Tensor()};
    in.attention = impl_->kernels;
    in.attention_stats = &impl_->attention_stats;
    EncoderOutputs out = impl_->model->Forward(in, all_hidden_states);
    std::vector<NamedTensor> result;
    auto add = [&](const std::string& name, const at::Tensor& t) {
      NamedTensor nt;
      nt.name = name;
      nt.shape = t.sizes().vec();
      nt.data = ToFloatVector(t.to(at::kCPU));
      result.push_back(std::move(nt));
    };
    add("last_hidden_state", out.last_hidden_state);
    for (size_t i = 0; i < out.hidden_states.size(); ++i) add(absl::StrCat("hidden_state_", i), out.hidden_states[i]);
    if (out.logits.defined()) add("logits", out.logits);
    add("pooled", (*impl_->pooler)(out.last_hidden_state, in.attention_mask));
    return result;
  } catch (const std::exception& e) {
    return TorchError(e, "forward");
  }
}

}  // namespace relserve
