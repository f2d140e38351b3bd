#include "server/tools/engine_flags.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "server/hub/model_resolver.h"
#include "server/model/cpu_gemm_choice.h"
#include "server/util/environment_reader.h"
#include "server/util/process_tuning.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

constexpr char kModelOptions[] = "model options";

}  // namespace

std::vector<Flag<CliArgs>> ModelFlags() {
  return {CliRequired("model", "DIR|ORG/REPO[@REVISION]",
                      "a model directory, or a Hub model fetched into the Hugging Face cache (a path that exists "
                      "wins)")
              .In(kModelOptions),
          CliBool("offline", "Hub models from the cache only, no network (as HF_HUB_OFFLINE=1)").In(kModelOptions)};
}

Flag<CliArgs> MaxLengthFlag() {
  return CliInt("max-length", "longest sequence accepted, special tokens included", 0, 0, "N", "the model's")
      .In(kModelOptions);
}

Flag<CliArgs> SentencePieceModuleFlag() {
  return CliString("sentencepiece-module", "FILE",
                   "the SentencePiece module (librelserve_sentencepiece.so) that reads SentencePiece vocabularies", "",
                   {}, "found beside the program (../lib, ../lib/relserve, its folder), else the build tree's")
      .FromEnvironment();
}

Flag<CliArgs> NoTruncateFlag() {
  return CliBool("no-truncate", "a text longer than the max length is an error instead of being truncated");
}

std::vector<Flag<CliArgs>> EngineFlags() {
  std::vector<Flag<CliArgs>> flags = ModelFlags();
  flags.push_back(CliString("dtype", "float32|bfloat16|float16|int8",
                            "weights and activations (int8: the encoder's projections quantized)", "float32",
                            {"float32", "bfloat16", "float16", "int8"})
                      .In(kModelOptions));
  flags.push_back(
      CliString("device", "DEVICE", "where the model runs: cpu, cuda or cuda:N (cuda needs a CUDA build)", "cpu")
          .In(kModelOptions));
  flags.push_back(CliInt("threads", "compute threads (LibTorch and OpenBLAS)",
                         static_cast<int64_t>(std::thread::hardware_concurrency()), 1, "N", "all cores")
                      .In(kModelOptions));
  flags.push_back(MaxLengthFlag());
  flags.push_back(SentencePieceModuleFlag().In(kModelOptions));
  flags.push_back(CliInt("cuda-graph-tokens",
                         "on a GPU, batches of at most N tokens (batch rounded up to 1, 2, 3, 4, 6, 8, 12, ... x length) replay "
                         "the forward from a CUDA graph captured on its first run; 0: never",
                         4096, 0, "N")
                      .In(kModelOptions));
  flags.push_back(CliString("gpu-attention", "PATH[:BACKEND]",
                            "on a GPU, how relative attention runs: bias (every term one bias for LibTorch's fused "
                            "kernel) or tables (DeBERTa's terms read through their tables by relserve's kernel), and "
                            "the SDPA backend the bias takes: default (LibTorch's choice without cuDNN), auto (cuDNN "
                            "included), cudnn, efficient, flash or math",
                            "bias")
                      .In(kModelOptions));
  flags.push_back(CliString("int8-attention", "auto|float32|bfloat16",
                            "under --dtype int8, the precision of attention's products (q.k, the relative terms, "
                            "probabilities x v): auto is bfloat16 where the CPU has AVX512-BF16, except in the batches relserve's "
                            "float32 tiles take (at most 192 tokens on AVX-512 CPUs, with relserve's int8 GEMM), else "
                            "float32",
                            "auto")
                      .In(kModelOptions));
  flags.push_back(CliString("int8-weight-bits", "auto|7|8", std::string(Int8WeightBitsHelp()), "auto",
                            {"auto", "7", "8"})
                      .In(kModelOptions));
  for (const CpuGemmChoice& choice : CpuGemmChoices()) {
    flags.push_back(CliString(choice.flag, CpuGemmValueName(choice), choice.help, "auto", {"auto", choice.fallback})
                        .In(kModelOptions));
  }
  flags.push_back(CliString("float32-attention", "auto|blas|tiles",
                            "under --dtype float32 on a CPU with AVX-512F or AVX2, what runs attention's products: "
                            "auto, relserve's register tiles head by head for the batches the packed GEMM takes (so they "
                            "make no BLAS call) and, with AVX-512, OpenBLAS's batched products for longer ones (with "
                            "AVX2 only, the tiles for those too: faster there); blas, OpenBLAS always; tiles, the tiles "
                            "always (for measuring)",
                            "auto", {"auto", "blas", "tiles"})
                      .In(kModelOptions));
  flags.push_back(CliString("bfloat16-attention", "auto|onednn|tiles",
                            "under --dtype bfloat16 on a CPU with AVX512-BF16, what runs attention's products: auto, "
                            "relserve's AVX512-BF16 registers head by head for batches of at most 192 tokens (so a short "
                            "forward calls no oneDNN) and oneDNN's batched products for longer ones; onednn, oneDNN "
                            "always; tiles, the registers always (for measuring)",
                            "auto", {"auto", "onednn", "tiles"})
                      .In(kModelOptions));
  flags.push_back(CliBool("log-shape-times",
                          "log the host time of forwards and their attention per (thread, batch, length): the "
                          "first two of each and any much slower than the shape's mean")
                      .In(kModelOptions));
  flags.push_back(CliString("pooling", "MODE",
                            "pooling of the embeddings: mean, cls, max, mean_sqrt_len, weightedmean or lasttoken", "",
                            {}, "the model's sentence-transformers config, else mean")
                      .In(kModelOptions));
  return flags;
}

absl::StatusOr<std::string> ModelDirFromFlags(const CliArgs& args) {
  ASSIGN_OR_RETURN(std::string spec, args.Required("model"));
  if (!NamesHubModel(spec)) return spec;
  ASSIGN_OR_RETURN(HubSettings settings, HubSettingsFromEnvironment(args.process_environment()));
  if (args.Bool("offline")) {
    settings.offline = true;
    settings.offline_source = "--offline";
  }
  DownloadProgress progress = DownloadProgress::ForStandardError();
  return ResolveModelDir(spec, settings, &progress);
}

absl::StatusOr<LoadedModel> LoadModelFromFlags(const CliArgs& args, std::string* loaded_dir) {
  ASSIGN_OR_RETURN(std::string dir, ModelDirFromFlags(args));
  if (loaded_dir != nullptr) *loaded_dir = dir;
  SetComputeThreads(args.Int("threads"));
  EngineOptions options;
  absl::StatusOr<DType> dtype = ParseDType(args.String("dtype"));
  if (!dtype.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message()));
  options.dtype = *dtype;
  options.device = args.String("device");
  options.max_length = args.Int("max-length");
  options.cuda_graph_tokens = args.Int("cuda-graph-tokens");
  options.pooling = args.String("pooling");
  absl::StatusOr<AttentionOptions> attention = ParseAttentionOptions(args.String("gpu-attention"));
  if (!attention.ok()) return absl::InvalidArgumentError(absl::StrCat("--gpu-attention: ", attention.status().message()));
  options.gpu_attention = *attention;
  absl::StatusOr<Int8Attention> int8_attention = ParseInt8Attention(args.String("int8-attention"));
  if (!int8_attention.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--int8-attention: ", int8_attention.status().message()));
  }
  options.int8_attention = *int8_attention;
  absl::StatusOr<Int8WeightBits> int8_weight_bits = ParseInt8WeightBits(args.String("int8-weight-bits"));
  if (!int8_weight_bits.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--int8-weight-bits: ", int8_weight_bits.status().message()));
  }
  options.int8_weight_bits = *int8_weight_bits;
  // The flag table allows only "auto" and the library's word (CliString's choices).
  for (const CpuGemmChoice& choice : CpuGemmChoices()) options.kernels.*choice.own = args.String(choice.flag) == "auto";
  const std::string float32_attention = args.String("float32-attention");
  options.kernels.tiled_attention = float32_attention == "tiles"  ? TiledAttention::kAlways
                                    : float32_attention == "blas" ? TiledAttention::kNever
                                                                  : TiledAttention::kAuto;
  const std::string bfloat16_attention = args.String("bfloat16-attention");
  options.kernels.bfloat16_tiled_attention = bfloat16_attention == "tiles"    ? BFloat16TiledAttention::kAlways
                                             : bfloat16_attention == "onednn" ? BFloat16TiledAttention::kNever
                                                                              : BFloat16TiledAttention::kAuto;
  options.log_shape_times = args.Bool("log-shape-times");
  options.sentencepiece.path = args.String("sentencepiece-module");
  // RELSERVE_ALLOCATOR, as the program's start read it (TuneProcessForInference, which refused a
  // bad value already).
  ASSIGN_OR_RETURN(options.allocator, AllocatorModeFromEnvironment(MapEnvironmentReader(args.environment())));
  return LoadModel(dir, options);
}

absl::StatusOr<std::unique_ptr<Engine>> LoadEngineFromFlags(const CliArgs& args, std::string* loaded_dir) {
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelFromFlags(args, loaded_dir));
  return std::move(loaded.engine);
}

}  // namespace relserve
