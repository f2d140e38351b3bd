#include "server/model/engine.h"

#include <dlfcn.h>

#include <algorithm>
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
#include "server/model/bge_m3_heads.h"
#include "server/model/captured_forwards.h"
#include "server/model/colbert_head.h"
#include "server/model/config/colbert_config.h"
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
#include "server/model/config/max_length.h"
#include "server/model/layers/int8_linear.h"
#include "server/model/layers/layers.h"
#include "server/model/masked_lm_head.h"
#include "server/model/config/model_limits.h"
#include "server/model/pooler.h"
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
  bool attention_in_bfloat16 = false;  // int8: attention's products in bfloat16 (EngineOptions::int8_attention)
  c10::Device device{c10::kCPU};
  std::unique_ptr<EncoderModel> model;
  std::unique_ptr<Pooler> pooler;
  int64_t pad_id = 0;
  std::unique_ptr<CapturedForwards> graphs;  // on a GPU with options.cuda_graph_tokens > 0
  AttentionOptions attention;                 // options.gpu_attention
  AttentionStats attention_stats;             // every forward's attention calls
  std::unique_ptr<ShapeTimeLog> shape_log;    // with options.log_shape_times
  BatchRounding batch_rounding = BatchRounding::kOnDevice;  // options.batch_rounding

  // Which head answers kOutputSparse.
  enum class SparseHead { kNone, kSplade, kBgeM3 };
  SparseHead sparse_head = SparseHead::kNone;
  // sentence-transformers' SpladePooling (a sparse encoder's modules.json): max or sum, relu or
  // log1p_relu; SPLADE's max of log(1 + relu) without one.
  MaskedLmHead::Pooling splade_pooling;
  std::optional<MaskedLmHead> masked_lm;  // a *ForMaskedLM checkpoint's head, where it holds one
  BgeM3Heads bge_m3;                      // sparse_linear.pt, colbert_linear.pt, where present
  std::optional<ColbertHead> colbert;     // a ColBERT checkpoint's projection (colbert_head.h)
  std::vector<int32_t> lexical_dropped_ids;  // bge-m3's sparse weights leave these ids out
  // Why kOutputSparse / kOutputMultiVector are refused, for FAILED_PRECONDITION.
  std::string no_sparse;
  std::string no_multi_vector;
  // A *ForTokenClassification checkpoint's classifier (FamilyDescriptor::TokenClassifier):
  // hidden_size -> labels on every token.
  Linear token_classifier;
};

namespace {

absl::StatusOr<at::ScalarType> ParseDType(const std::string& name) {
  if (name == "float32" || name == "fp32") return at::kFloat;
  if (name == "bfloat16" || name == "bf16") return at::kBFloat16;
  if (name == "float16" || name == "fp16") return at::kHalf;
  if (name == "int8") return at::kChar;  // float32 weights, the encoder's projections quantized
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", name, "\" (known: float32, bfloat16, float16, int8)"));
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
  counts.bias = s.bias_calls.load();
  counts.tables = s.table_calls.load();
  counts.host_seconds = static_cast<double>(s.host_nanoseconds.load()) * 1e-9;
  return counts;
}

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
      ASSIGN_OR_RETURN(ModelTokenizer tokenizer, LoadModelTokenizer(dir, *config, *st, max_length->tokens));
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
  ASSIGN_OR_RETURN(const AllocatorMode allocator, AllocatorModeFromEnvironment());
  if (allocator == AllocatorMode::kCache) UseBufferCacheForCpuTensors();
  std::unique_ptr<Engine> engine(new Engine());
  ASSIGN_OR_RETURN(engine->config_, LoadModelConfig(dir));
  const ModelConfig& config = engine->config_;
  ASSIGN_OR_RETURN(engine->impl_->dtype, ParseDType(options.dtype));
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
  if (engine->impl_->dtype == at::kChar) {
    if (!device.is_cpu()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dtype int8 runs on the CPU only (device ", device.str(), "); use bfloat16 or float16 there"));
    }
    RETURN_IF_ERROR(EnableInt8Engine());
    engine->impl_->int8 = true;
    if (options.int8_attention == Int8Attention::kBfloat16 && !CpuHasBfloat16Products()) {
      return absl::InvalidArgumentError(
          "int8 attention bfloat16: this CPU has no bfloat16 instructions (AVX512-BF16); use auto or float32");
    }
    engine->impl_->attention_in_bfloat16 =
        options.int8_attention == Int8Attention::kBfloat16 ||
        (options.int8_attention == Int8Attention::kAuto && CpuHasBfloat16Products());
    engine->impl_->dtype = at::kFloat;
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
  try {
    c10::InferenceMode guard;
    WeightLoader weights(*checkpoint, engine->impl_->dtype, device);
    auto model = LoadFamilyModel(config, weights);
    if (!model.ok()) return absl::Status(model.status().code(), absl::StrCat(dir, ": ", model.status().message()));
    engine->impl_->model = std::move(*model);
    if (engine->impl_->int8) RETURN_IF_ERROR(QuantizeLinearsInt8(engine->impl_->model->EncoderLinears()));
    // A *ForMaskedLM checkpoint's masked-LM head, where it holds one: SPLADE vectors. Without
    // it the backbone still serves embeddings, as it did before.
    if (std::optional<MaskedLmHeadLayout> layout = config.family->MaskedLmHead(config)) {
      if (MaskedLmHead::Present(weights, *layout)) {
        auto head = MaskedLmHead::Load(weights, *layout, engine->impl_->model->word_embeddings());
        if (!head.ok()) {
          return absl::Status(head.status().code(),
                              absl::StrCat(CheckpointFiles(dir, *checkpoint), ": the masked-LM head of ",
                                           config.architecture, ": ", head.status().message()));
        }
        engine->impl_->masked_lm = std::move(*head);
      } else {
        engine->impl_->no_sparse = absl::StrCat("its checkpoint holds no masked-LM head (no ", layout->dense,
                                                ".weight, ", layout->bias.front(), ", ...) and there is no ",
                                                BgeM3Heads::kSparseFile);
      }
    }
    if (colbert.has_value()) {
      auto head = ColbertHead::Load(*colbert, config.hidden_size, weights, device);
      if (!head.ok()) return absl::Status(head.status().code(), absl::StrCat(dir, ": ", head.status().message()));
      engine->impl_->colbert = std::move(*head);
    }
    if (std::optional<std::string> name = config.family->TokenClassifier(config)) {
      auto head = LoadLinear(weights, *name, config.hidden_size, config.num_labels, true);
      if (!head.ok()) {
        return absl::Status(head.status().code(),
                            absl::StrCat(CheckpointFiles(dir, *checkpoint), ": the token classifier of ",
                                         config.architecture, ": ", head.status().message()));
      }
      engine->impl_->token_classifier = std::move(*head);
    }
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
  ASSIGN_OR_RETURN(engine->impl_->bge_m3, BgeM3Heads::Load(dir, config.hidden_size, device));

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
  engine->impl_->attention = options.gpu_attention;
  engine->impl_->batch_rounding = options.batch_rounding;
  if (!device.is_cpu()) {
    if (absl::Status backend = UseSdpaBackend(options.gpu_attention.sdpa); !backend.ok()) {
      return absl::Status(backend.code(), absl::StrCat("--gpu-attention ", AttentionOptionsName(options.gpu_attention),
                                                       ": ", backend.message()));
    }
  }
  if (options.log_shape_times) engine->impl_->shape_log = std::make_unique<ShapeTimeLog>(config.architecture);
  if (options.cuda_graph_tokens > 0 && DeviceGraphsAvailable(device)) {
    engine->impl_->graphs = std::make_unique<CapturedForwards>(*engine->impl_->model, device, options.cuda_graph_tokens,
                                                               engine->impl_->pad_id, options.gpu_attention.path);
  }
  if (st.splade.has_value()) {
    if (!engine->impl_->masked_lm.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": modules.json has a SpladePooling module, but the checkpoint holds no masked-LM head for it (",
          config.architecture, ")"));
    }
    engine->impl_->splade_pooling.sum = st.splade->sum;
    engine->impl_->splade_pooling.log1p_relu = st.splade->log1p_relu;
  }
  engine->DescribeHeads();
  return engine;
}

void Engine::DescribeHeads() {
  Impl& impl = *impl_;
  ModelInfo& info = info_;
  std::string sparse, multi_vector;
  // sparse_linear.pt is a file someone put there for this: it wins over a masked-LM head. Its
  // weights leave out the tokenizer's cls, eos, pad and unk ids, which only a tokenizer knows.
  if (impl.bge_m3.has_sparse() && special_token_ids_.has_value()) {
    for (int id : *special_token_ids_) {
      if (id >= 0 && std::find(impl.lexical_dropped_ids.begin(), impl.lexical_dropped_ids.end(), id) ==
                         impl.lexical_dropped_ids.end()) {
        impl.lexical_dropped_ids.push_back(id);
      }
    }
    impl.sparse_head = Impl::SparseHead::kBgeM3;
    info.sparse_kind = "bge-m3";
    sparse = absl::StrCat("bge-m3 from ", BgeM3Heads::kSparseFile, " (special token ids ",
                          absl::StrJoin(impl.lexical_dropped_ids, ", "), " left out)");
  } else if (impl.masked_lm.has_value()) {
    const MaskedLmHeadLayout layout = *config_.family->MaskedLmHead(config_);
    impl.sparse_head = Impl::SparseHead::kSplade;
    info.sparse_kind = "splade";
    sparse = absl::StrCat("splade (", impl.splade_pooling.sum ? "sum" : "max", ", ",
                          impl.splade_pooling.log1p_relu ? "log1p_relu" : "relu", ") from the masked-LM head (",
                          layout.dense, ", ", layout.layer_norm, ", decoder ",
                          impl.masked_lm->decoder_is_word_embeddings() ? "tied to the word embeddings" : layout.decoder_weight,
                          ")");
  } else if (impl.bge_m3.has_sparse()) {
    impl.no_sparse = absl::StrCat(BgeM3Heads::kSparseFile, " is there, but without a tokenizer the special tokens ",
                                  "its weights leave out (cls, eos, pad, unk) are not known");
  } else if (impl.no_sparse.empty()) {
    impl.no_sparse = absl::StrCat("it is not a *ForMaskedLM architecture with a masked-LM head, and there is no ",
                                  BgeM3Heads::kSparseFile);
  }
  if (impl.colbert.has_value()) {
    info.multi_vector_kind = "colbert";
    info.multi_vector_dim = static_cast<int>(impl.colbert->dim());
    multi_vector = absl::StrCat(impl.colbert->Describe(), info.late_interaction.enabled ? absl::StrCat(
        "; MaxSim rerank, ", info.late_interaction.layout, " queries of ", info.late_interaction.query_length,
        " tokens, documents of ", info.late_interaction.document_length) : "; no tokenizer, so no MaxSim rerank");
  } else if (impl.bge_m3.has_colbert()) {
    info.multi_vector_kind = "colbert";
    info.multi_vector_dim = static_cast<int>(impl.bge_m3.colbert_dim());
    multi_vector = absl::StrCat("colbert from ", BgeM3Heads::kColbertFile, " (", config_.hidden_size, " -> ",
                                info.multi_vector_dim, ")");
  } else {
    impl.no_multi_vector = absl::StrCat("there is no ", BgeM3Heads::kColbertFile);
  }
  heads_description_ = absl::StrCat("sparse: ", sparse.empty() ? absl::StrCat("none (", impl.no_sparse, ")") : sparse,
                                    "; multi-vector: ",
                                    multi_vector.empty() ? absl::StrCat("none (", impl.no_multi_vector, ")") : multi_vector);
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

absl::StatusOr<std::vector<SequenceOutput>> Engine::RunTimed(const std::vector<SequenceInput>& batch, uint32_t outputs,
                                                             RunTimings* timings) {
  const absl::Time started = absl::Now();
  if (timings != nullptr) *timings = RunTimings();
  if ((outputs & kOutputLogits) && info_.labels.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.architecture, " has no classification head"));
  }
  if ((outputs & kOutputSparse) && impl_->sparse_head == Impl::SparseHead::kNone) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.architecture, " has no sparse head: ", impl_->no_sparse));
  }
  if ((outputs & kOutputMultiVector) && !impl_->bge_m3.has_colbert() && !impl_->colbert.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.architecture, " has no multi-vector head: ", impl_->no_multi_vector));
  }
  if ((outputs & kOutputTokenLogits) && !impl_->token_classifier.defined()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", info_.architecture, " has no token-classification head"));
  }
  if (batch.empty()) return std::vector<SequenceOutput>();
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::Status s = Validate(batch[i]);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("sequence ", i, ": ", s.message()));
  }
  const int64_t B = static_cast<int64_t>(batch.size());
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
  try {
    c10::InferenceMode guard;
    const c10::Device device = impl_->device;
    const bool on_device = !device.is_cpu();
    if (on_device) L = DeviceBatchLength(static_cast<int>(L), info_.max_length);
    // The rows the batch runs at: B, or B rounded up to a device batch size (device_shapes.h);
    // rows past B hold one real token each (a row without any would be a softmax over nothing)
    // and their outputs are never read.
    const bool round_rows = impl_->batch_rounding == BatchRounding::kRounded ||
                            (impl_->batch_rounding == BatchRounding::kOnDevice && on_device);
    const int64_t R = round_rows ? DeviceBatchSize(static_cast<int>(B), std::numeric_limits<int>::max()) : B;
    DeviceStreamScope stream(device);
    // Built on the host (in page-locked memory for a GPU, so the copies below are asynchronous),
    // then sent to the device in one go each.
    const auto host = at::TensorOptions().dtype(at::kLong).pinned_memory(on_device);
    at::Tensor ids = at::empty({R, L}, host).fill_(impl_->pad_id);
    at::Tensor mask = at::zeros({R, L}, host);
    at::Tensor types = has_types ? at::zeros({R, L}, host) : at::Tensor();
    bool padded = R > B;
    int64_t tokens = R - B;
    auto ids_a = ids.accessor<int64_t, 2>();
    auto mask_a = mask.accessor<int64_t, 2>();
    for (int64_t b = B; b < R; ++b) mask_a[b][0] = 1;
    for (int64_t b = 0; b < B; ++b) {
      const SequenceInput& s = batch[b];
      const int64_t n = static_cast<int64_t>(s.input_ids.size());
      padded = padded || n < L;
      tokens += n;
      const int64_t attended = s.attended_length > 0 ? std::min<int64_t>(s.attended_length, n) : n;
      for (int64_t t = 0; t < n; ++t) {
        ids_a[b][t] = s.input_ids[t];
        mask_a[b][t] = t < attended ? 1 : 0;
      }
      if (has_types && !s.token_type_ids.empty()) {
        auto types_a = types.accessor<int64_t, 2>();
        for (int64_t t = 0; t < n; ++t) types_a[b][t] = s.token_type_ids[t];
      }
    }
    // Pooling's own mask: the attention mask without the prompt tokens of sequences that skip
    // them (sentence-transformers' Pooling with include_prompt false zeroes them).
    at::Tensor pool_mask;
    if (skips && (outputs & kOutputPooled)) {
      pool_mask = mask.clone();
      auto pool_a = pool_mask.accessor<int64_t, 2>();
      for (int64_t b = 0; b < B; ++b) {
        const int64_t n = static_cast<int64_t>(batch[b].input_ids.size());
        for (int64_t t = 0, k = std::min<int64_t>(std::max(batch[b].pooling_skip, 0), n); t < k; ++t) {
          pool_a[b][t] = 0;
        }
      }
    }
    EncoderInputs in{ids, mask, types, padded || unattended, at::Tensor()};
    if (unattended) in.pack_rows = false;
    AttentionStats forward_stats;  // this forward's attention calls
    in.attention_path = impl_->attention.path;
    in.attention_stats = &forward_stats;
    in.cpu_attention_in_bfloat16 = impl_->attention_in_bfloat16;
    // Which positions hold a sequence's tokens, attended to or not (the heads' rows).
    at::Tensor present = mask;
    if (unattended) {
      present = at::zeros({R, L}, host);
      auto present_a = present.accessor<int64_t, 2>();
      for (int64_t b = B; b < R; ++b) present_a[b][0] = 1;
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t t = 0, n = static_cast<int64_t>(batch[b].input_ids.size()); t < n; ++t) present_a[b][t] = 1;
      }
    }
    // A CUDA graph of this shape, where one is meant for it and captured (captured_forwards.h).
    CapturedForwards* graphs = impl_->graphs.get();
    const bool graphable = graphs != nullptr && !types.defined() && !unattended &&
                           (outputs & (kOutputSparse | kOutputMultiVector)) == 0 && graphs->GraphBatch(R, L) > 0;
    const bool replay = graphable && graphs->Captured(L);
    if (on_device && pool_mask.defined()) pool_mask = pool_mask.to(device, /*non_blocking=*/true);
    // The replay copies its inputs into the graph's; where there is none (a capture failed on
    // another thread since), the batch runs eagerly.
    std::optional<CapturedForwards::Replayed> replayed;  // holds the graphs' lock until the outputs are read
    absl::Time prepared = absl::Now();
    if (replay) replayed = graphs->Run(ids, mask);
    if (on_device && !replayed) {
      if (padded && !unattended) {
        at::Tensor rows = at::empty({tokens}, host);
        int64_t* r = rows.data_ptr<int64_t>();
        for (int64_t b = 0; b < B; ++b) {
          for (int64_t t = 0, n = static_cast<int64_t>(batch[b].input_ids.size()); t < n; ++t) *r++ = b * L + t;
        }
        for (int64_t b = B; b < R; ++b) *r++ = b * L;
        in.token_rows = rows.to(device, /*non_blocking=*/true);
      }
      in.input_ids = ids.to(device, /*non_blocking=*/true);
      in.attention_mask = mask.to(device, /*non_blocking=*/true);
      if (unattended) present = present.to(device, /*non_blocking=*/true);
      if (types.defined()) in.token_type_ids = types.to(device, /*non_blocking=*/true);
    }
    EncoderOutputs out;
    if (!replayed) prepared = absl::Now();
    if (replayed) {
      out = replayed->out;
      in.attention_mask = replayed->attention_mask;
    } else {
      out = impl_->model->Forward(in, /*all_hidden_states=*/false);
    }
    const absl::Time forwarded = absl::Now();
    AttentionStats& total = impl_->attention_stats;
    total.cpu_calls += forward_stats.cpu_calls.load();
    total.bias_calls += forward_stats.bias_calls.load();
    total.table_calls += forward_stats.table_calls.load();
    total.host_nanoseconds += forward_stats.host_nanoseconds.load();
    if (impl_->shape_log) {
      impl_->shape_log->Record(R, L, forwarded - prepared, absl::Nanoseconds(forward_stats.host_nanoseconds.load()),
                               replayed.has_value());
    }

    // The only copies back, and the only waits for the device: the results.
    std::vector<SequenceOutput> results(batch.size());
    at::Tensor pooled, pooled_raw, logits, states;
    auto to_host = [](const at::Tensor& t) { return t.to(at::kFloat).to(at::kCPU).contiguous(); };
    if (outputs & (kOutputPooled | kOutputPooledUnnormalized)) {
      // Pooling and Dense once; the Normalize module on top for `pooled`. The batcher ORs its
      // sequences' flags, so a batch may need both.
      const Pooler& pooler = *impl_->pooler;
      const at::Tensor raw =
          pooler(out.last_hidden_state, pool_mask.defined() ? pool_mask : in.attention_mask, /*normalize=*/false);
      if (outputs & kOutputPooledUnnormalized) pooled_raw = to_host(raw);
      if (outputs & kOutputPooled) pooled = to_host(pooler.Normalize(raw));
    }
    if (outputs & kOutputLogits) logits = to_host(out.logits);
    if (outputs & kOutputTokenStates) states = to_host(out.last_hidden_state);
    const int64_t H = out.last_hidden_state.size(2);
    at::Tensor token_logits;  // [B, L, labels]
    if (outputs & kOutputTokenLogits) token_logits = to_host(impl_->token_classifier(out.last_hidden_state));
    // A graph's outputs are read (the copies above wait for them; sparse and multi-vector outputs
    // never come from a graph): the next replay may start while this batch's replies are built.
    replayed.reset();

    // The sparse and multi-vector heads run on the real tokens only, packed sequence after
    // sequence: sequence b's tokens are rows [first[b], first[b + 1]).
    const bool sparse = (outputs & kOutputSparse) != 0, multi_vector = (outputs & kOutputMultiVector) != 0;
    std::vector<int64_t> first(B + 1, 0);
    std::vector<std::vector<std::pair<int32_t, float>>> splade;
    at::Tensor token_weights, colbert;
    if (sparse || multi_vector) {
      std::vector<int64_t> lengths(B);
      for (int64_t b = 0; b < B; ++b) {
        lengths[b] = static_cast<int64_t>(batch[b].input_ids.size());
        first[b + 1] = first[b] + lengths[b];
      }
      const at::Tensor packed =
          unattended ? TokenPacking(present, at::Tensor()).Pack(out.last_hidden_state)
          : padded   ? TokenPacking(in.attention_mask, in.token_rows).Pack(out.last_hidden_state)
                     : out.last_hidden_state.reshape({B * L, H});
      if (sparse && impl_->sparse_head == Impl::SparseHead::kSplade) {
        splade = impl_->masked_lm->Splade(packed, lengths, impl_->splade_pooling);
      }
      if (sparse && impl_->sparse_head == Impl::SparseHead::kBgeM3) {
        token_weights = to_host(impl_->bge_m3.TokenWeights(packed));
      }
      if (multi_vector) {
        colbert = to_host(impl_->colbert.has_value() ? impl_->colbert->Vectors(packed)
                                                      : impl_->bge_m3.ColbertVectors(packed));
      }
    }
    for (int64_t b = 0; b < B; ++b) {
      SequenceOutput& r = results[b];
      r.num_tokens = static_cast<int32_t>(batch[b].input_ids.size());
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
      if (sparse) {
        r.sparse = impl_->sparse_head == Impl::SparseHead::kSplade
                       ? std::move(splade[b])
                       : LexicalWeights(batch[b].input_ids, token_weights.data_ptr<float>() + first[b],
                                        impl_->lexical_dropped_ids);
      }
      if (multi_vector) {
        // A ColBERT checkpoint's: every token. FlagEmbedding's colbert vectors: every token after
        // the first (the final </s> too).
        const int64_t D = colbert.size(1);
        const int64_t skip = impl_->colbert.has_value() ? 0 : 1;
        r.num_vectors = static_cast<int32_t>(r.num_tokens - skip);
        const float* p = colbert.data_ptr<float>() + (first[b] + skip) * D;
        r.multi_vector.assign(p, p + static_cast<int64_t>(r.num_vectors) * D);
      }
    }
    if (timings != nullptr) {
      timings->prepare = prepared - started;
      timings->forward = forwarded - prepared;
      timings->results = absl::Now() - forwarded;
    }
    if (graphable && !replay) {
      // The first batch of this length (the warm-up's, on a GPU) ran eagerly: capture its graphs.
      replayed.reset();
      const absl::Status captured = graphs->CaptureLength(L);
      if (!captured.ok()) LogWarning(absl::StrCat(info_.architecture, " on ", device.str(), ": ", captured.message()));
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
    in.attention_path = impl_->attention.path;
    in.attention_stats = &impl_->attention_stats;
    in.cpu_attention_in_bfloat16 = impl_->attention_in_bfloat16;
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
