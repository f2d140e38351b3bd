#include "server/tools/model_creator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <random>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/model/families/family_registry.h"
#include "server/model_config/model_limits.h"
#include "server/safetensors/dtype.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;
using Init = ModelTensorSpec::Init;

constexpr char kTransformersVersion[] = "4.40.2";

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<const FamilyDescriptor*> FindVariant(const std::string& name) {
  const FamilyDescriptor* family = FindFamilyByCreateVariant(name);
  if (family == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("family: unknown model family \"", name, "\" (known: ",
                                                   SupportedCreateVariants(), ")"));
  }
  return family;
}

// ---------------------------------------------------------------------------------------------
// Options and config.json.

absl::Status CheckNonNegative(const char* option, int value) {
  if (value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, ": must be positive (0 = the family default), got ", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<StDType> ParseStorageDType(const std::string& dtype) {
  if (dtype == "float32") return StDType::kF32;
  if (dtype == "float16") return StDType::kF16;
  if (dtype == "bfloat16") return StDType::kBF16;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype: unknown dtype \"", dtype, "\" (known: float32, float16, bfloat16)"));
}

// The options every family shares; the family checks its own (CreateConfig).
absl::Status CheckOptions(const CreateModelOptions& o, int64_t vocab_from_file) {
  RETURN_IF_ERROR(CheckNonNegative("hidden", o.hidden));
  RETURN_IF_ERROR(CheckNonNegative("layers", o.layers));
  RETURN_IF_ERROR(CheckNonNegative("heads", o.heads));
  RETURN_IF_ERROR(CheckNonNegative("intermediate", o.intermediate));
  RETURN_IF_ERROR(CheckNonNegative("vocab", o.vocab));
  RETURN_IF_ERROR(CheckNonNegative("embedding_size", o.embedding_size));
  RETURN_IF_ERROR(CheckNonNegative("num_labels", o.num_labels));
  RETURN_IF_ERROR(CheckNonNegative("dense_out", o.dense_out));
  if (vocab_from_file < 0 || vocab_from_file > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_file: bad vocabulary size ", vocab_from_file));
  }
  if (!std::isfinite(o.init_std) || o.init_std < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_std: must be a finite value >= 0, got ", o.init_std));
  }
  RETURN_IF_ERROR(ParseStorageDType(o.dtype).status());
  if (!o.config_overrides.is_object() && !o.config_overrides.is_null()) {
    return absl::InvalidArgumentError("config_overrides: must be a JSON object");
  }
  if (o.dense_out > 0 && !o.sentence_transformers) {
    return absl::InvalidArgumentError("dense_out: needs sentence_transformers");
  }
  return absl::OkStatus();
}

// Applies the overrides key by key (a null value removes the key).
void ApplyOverrides(const json& overrides, json* config) {
  if (overrides.is_null()) return;
  for (const auto& [key, value] : overrides.items()) {
    if (value.is_null()) {
      config->erase(key);
    } else {
      (*config)[key] = value;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Weights.

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// One independent stream per tensor: values do not depend on which other tensors exist.
uint64_t TensorSeed(uint64_t seed, std::string_view name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return SplitMix64(SplitMix64(seed) ^ h);
}

// Normal(0, stddev) by Marsaglia's polar method on 53-bit uniforms from mt19937_64: portable
// (unlike std::normal_distribution, whose algorithm is up to the standard library) and fast.
void FillNormal(uint64_t stream_seed, double stddev, float* out, size_t n) {
  if (stddev == 0.0) {
    std::fill(out, out + n, 0.0f);
    return;
  }
  std::mt19937_64 rng(stream_seed);
  constexpr double kScale = 2.0 / 9007199254740992.0;  // 2 * 2^-53
  size_t i = 0;
  while (i < n) {
    const double u = static_cast<double>(rng() >> 11) * kScale - 1.0;
    const double v = static_cast<double>(rng() >> 11) * kScale - 1.0;
    const double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    const double m = stddev * std::sqrt(-2.0 * std::log(s) / s);
    out[i++] = static_cast<float>(u * m);
    if (i < n) out[i++] = static_cast<float>(v * m);
  }
}

size_t StorageSize(StDType dtype) { return dtype == StDType::kF32 ? 4 : 2; }

// Converts buf[0, n) in place from float32 to the 16-bit storage type (element i moves from
// byte 4i to byte 2i, so a forward pass never overwrites what it has yet to read).
void ConvertInPlace(float* buf, size_t n, StDType dtype) {
  if (dtype == StDType::kF32) return;
  auto* out = reinterpret_cast<uint16_t*>(buf);
  for (size_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, buf + i, sizeof(f));
    const uint16_t h = dtype == StDType::kF16 ? FloatToHalfBits(f) : FloatToBFloat16Bits(f);
    std::memcpy(out + i, &h, sizeof(h));
  }
}

// Generates each tensor into one reused buffer and hands it to the writer (which keeps a copy).
class WeightWriter {
 public:
  WeightWriter(uint64_t seed, double stddev, StDType dtype)
      : seed_(seed), stddev_(stddev), dtype_(dtype) {
    writer_.SetMetadata({{"format", "pt"}});
  }

  // `values_from` names the tensor whose stream to use (tied weights); "" = this one's.
  absl::Status Add(const ModelTensorSpec& spec, const std::string& values_from = "") {
    uint64_t numel = 1;
    for (int64_t d : spec.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) ||
          numel > (uint64_t{1} << 40)) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", spec.name, "\" is too large"));
      }
    }
    const size_t n = static_cast<size_t>(numel);
    if (n > capacity_) {
      buffer_.reset();
      capacity_ = 0;
      buffer_.reset(new (std::nothrow) float[n]);
      if (buffer_ == nullptr) {
        return absl::ResourceExhaustedError(absl::StrCat("tensor \"", spec.name, "\" ", ShapeText(spec.shape),
                                                         ": cannot allocate ", n * sizeof(float), " bytes"));
      }
      capacity_ = n;
    }
    float* buf = buffer_.get();
    switch (spec.init) {
      case Init::kNormal:
        FillNormal(TensorSeed(seed_, values_from.empty() ? spec.name : values_from), stddev_, buf, n);
        break;
      case Init::kZeros:
        std::fill(buf, buf + n, 0.0f);
        break;
      case Init::kOnes:
        std::fill(buf, buf + n, 1.0f);
        break;
    }
    ConvertInPlace(buf, n, dtype_);
    return writer_.Add(spec.name, dtype_, spec.shape, buf, n * StorageSize(dtype_));
  }

  absl::Status Write(const std::string& path) const { return writer_.WriteFile(path); }

 private:
  uint64_t seed_;
  double stddev_;
  StDType dtype_;
  SafetensorsWriter writer_;
  std::unique_ptr<float[]> buffer_;
  size_t capacity_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Files.

std::string DumpJson(const json& j) {
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::Status WriteJson(const std::string& path, const json& j) {
  return WriteStringToFile(path, DumpJson(j));
}

absl::Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !IsDirectory(dir)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, ": cannot create directory", ec ? absl::StrCat(": ", ec.message()) : ""));
  }
  return absl::OkStatus();
}


// The vocabulary a tokenizer file implies: SentencePiece pieces plus the special tokens the
// tokenizer appends because they are not pieces (or fairseq's layout for XLM-R); or one entry
// per line of a vocab.txt.
absl::StatusOr<int64_t> VocabNeeded(const std::string& path, const std::string& bytes, const CreateTokenizerSpec& t,
                                    const json& special_tokens, const SentencePieceModuleOptions& module) {
  if (t.format == CreateTokenizerSpec::VocabFormat::kLines) {
    // transformers' load_vocab: every line is a token, the last one even without a newline.
    if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat("vocab_file: ", path, ": is empty"));
    int64_t lines = std::count(bytes.begin(), bytes.end(), '\n');
    if (bytes.back() != '\n') ++lines;
    return lines;
  }
  auto pieces = ReadSentencePiecePieces(bytes, module);
  if (!pieces.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_file: ", path, ": ", pieces.status().message()));
  }
  // XLMRobertaTokenizer: fairseq's four tokens in front (one more id than SentencePiece's own
  // three), the pieces one up, then <mask>.
  if (t.format == CreateTokenizerSpec::VocabFormat::kFairseq) return static_cast<int64_t>(pieces->size() + 2);
  std::set<std::string> have(pieces->begin(), pieces->end());
  std::set<std::string> missing;
  for (const auto& [key, value] : special_tokens.items()) {
    if (value.is_string() && have.count(value.get<std::string>()) == 0) {
      missing.insert(value.get<std::string>());
    }
  }
  return static_cast<int64_t>(pieces->size() + missing.size());
}

// Files an earlier run may have left that this run does not write (on overwrite).
const char* const kManagedFiles[] = {
    "spm.model",          "spiece.model",           "vocab.txt",    "sentencepiece.bpe.model", "tokenizer_config.json",
    "special_tokens_map.json", "modules.json",      "sentence_bert_config.json",
    "1_Pooling/config.json",   "2_Dense/config.json", "2_Dense/model.safetensors"};
const char* const kManagedDirs[] = {"1_Pooling", "2_Dense", "2_Normalize", "3_Normalize"};

void RemoveStaleFiles(const std::string& dir) {
  std::error_code ec;
  for (const char* f : kManagedFiles) std::filesystem::remove(JoinPath(dir, f), ec);
  for (const char* d : kManagedDirs) std::filesystem::remove(JoinPath(dir, d), ec);  // if empty
}

absl::Status WriteSentenceTransformers(const CreateModelOptions& o, const std::string& dir,
                                       int64_t hidden, StDType dtype) {
  json modules = json::array();
  auto add_module = [&](const std::string& path, const std::string& type) {
    const int idx = static_cast<int>(modules.size());
    modules.push_back({{"idx", idx},
                       {"name", std::to_string(idx)},
                       {"path", path},
                       {"type", "sentence_transformers.models." + type}});
  };
  add_module("", "Transformer");
  add_module("1_Pooling", "Pooling");
  RETURN_IF_ERROR(MakeDirs(JoinPath(dir, "1_Pooling")));
  RETURN_IF_ERROR(WriteJson(JoinPath(dir, "1_Pooling/config.json"),
                            {{"word_embedding_dimension", hidden},
                             {"pooling_mode_cls_token", false},
                             {"pooling_mode_mean_tokens", true},
                             {"pooling_mode_max_tokens", false},
                             {"pooling_mode_mean_sqrt_len_tokens", false},
                             {"pooling_mode_weightedmean_tokens", false},
                             {"pooling_mode_lasttoken", false},
                             {"include_prompt", true}}));
  if (o.dense_out > 0) {
    add_module("2_Dense", "Dense");
    const std::string dense_dir = JoinPath(dir, "2_Dense");
    RETURN_IF_ERROR(MakeDirs(dense_dir));
    WeightWriter w(o.seed, o.init_std, dtype);
    RETURN_IF_ERROR(w.Add({"linear.weight", {o.dense_out, hidden}, Init::kNormal, ""}, "2_Dense/linear.weight"));
    RETURN_IF_ERROR(w.Add({"linear.bias", {o.dense_out}, Init::kZeros, ""}));
    RETURN_IF_ERROR(w.Write(JoinPath(dense_dir, "model.safetensors")));
    RETURN_IF_ERROR(WriteJson(JoinPath(dense_dir, "config.json"),
                              {{"in_features", hidden},
                               {"out_features", o.dense_out},
                               {"bias", true},
                               {"activation_function", "torch.nn.modules.activation.Tanh"}}));
  }
  const std::string normalize = modules.size() == 3 ? "3_Normalize" : "2_Normalize";
  add_module(normalize, "Normalize");
  RETURN_IF_ERROR(MakeDirs(JoinPath(dir, normalize)));
  RETURN_IF_ERROR(WriteJson(JoinPath(dir, "sentence_bert_config.json"),
                            {{"max_seq_length", 512}, {"do_lower_case", false}}));
  return WriteJson(JoinPath(dir, "modules.json"), modules);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

uint16_t FloatToHalfBits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x47800000u) {  // >= 65536 (or inf / NaN): always infinity or NaN in half
    if (x > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
    return static_cast<uint16_t>(sign | 0x7C00u);
  }
  if (x < 0x38800000u) {  // below half's smallest normal (2^-14): subnormal or zero
    // Adding 0.5 aligns the value's bits at half's subnormal unit (2^-24); the FPU rounds
    // to nearest even.
    float f, magic;
    const uint32_t magic_bits = 0x3F000000u;  // 0.5f
    std::memcpy(&f, &x, sizeof(f));
    std::memcpy(&magic, &magic_bits, sizeof(magic));
    const float s = f + magic;
    uint32_t r;
    std::memcpy(&r, &s, sizeof(r));
    return static_cast<uint16_t>(sign | (r - magic_bits));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even; a
  // carry out of the mantissa correctly bumps the exponent (up to infinity at 65520).
  const uint32_t mant_odd = (x >> 13) & 1u;
  x += 0xC8000000u + 0xFFFu + mant_odd;
  return static_cast<uint16_t>(sign | (x >> 13));
}

uint16_t FloatToBFloat16Bits(float value) {
  uint32_t x;
  std::memcpy(&x, &value, sizeof(x));
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

absl::StatusOr<std::vector<std::string>> ReadSentencePiecePieces(std::string_view model_proto,
                                                                 const SentencePieceModuleOptions& module) {
  // SentencePiece itself reads the file, as the tokenizer will.
  auto model = SentencePieceModel::LoadSerialized(model_proto, "the model", module);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a SentencePiece model SentencePiece can load: ", model.status().message()));
  }
  std::vector<std::string> pieces;
  pieces.reserve(static_cast<size_t>((*model)->vocab_size()));
  for (int id = 0; id < (*model)->vocab_size(); ++id) pieces.push_back((*model)->IdToPiece(id));
  return pieces;
}

absl::StatusOr<std::vector<ModelTensorSpec>> ModelTensorSpecs(const nlohmann::json& config) {
  ASSIGN_OR_RETURN(ModelConfig parsed, ParseModelConfig(config, "config"));
  return parsed.family->CheckpointLayout(parsed);
}

absl::StatusOr<nlohmann::json> BuildModelConfig(const CreateModelOptions& options,
                                                int64_t vocab_from_file) {
  ASSIGN_OR_RETURN(const FamilyDescriptor* family, FindVariant(options.family));
  RETURN_IF_ERROR(CheckOptions(options, vocab_from_file));
  CreateRequest request;
  request.variant = options.family;
  request.hidden = options.hidden;
  request.layers = options.layers;
  request.heads = options.heads;
  request.intermediate = options.intermediate;
  request.vocab = options.vocab > 0 ? options.vocab : static_cast<int>(vocab_from_file);
  request.embedding_size = options.embedding_size;
  request.num_labels = options.num_labels;
  request.init_std = options.init_std;
  if (options.config_overrides.is_object()) request.overrides = options.config_overrides;
  ASSIGN_OR_RETURN(json config, family->CreateConfig(request));
  const json want_type = config["model_type"];
  config["torch_dtype"] = options.dtype;
  config["transformers_version"] = kTransformersVersion;
  ApplyOverrides(options.config_overrides, &config);
  RETURN_IF_ERROR(family->RederiveAfterOverrides(request.overrides, &config));
  if (!config.contains("model_type") || config["model_type"] != want_type) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config_overrides: model_type must stay ", want_type.dump(), " for family ", options.family));
  }
  return config;
}

namespace {
absl::Status CreateModelDirectoryOrThrow(const CreateModelOptions& options, const std::string& out_dir);
}  // namespace

absl::Status CreateModelDirectory(const CreateModelOptions& options, const std::string& out_dir) {
  // The sizes are within the loader's limits, but their product can still exceed the memory
  // at hand (the writer holds every tensor until the file is written).
  try {
    return CreateModelDirectoryOrThrow(options, out_dir);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(out_dir, ": out of memory while generating the weights; choose smaller sizes"));
  }
}

namespace {

absl::Status CreateModelDirectoryOrThrow(const CreateModelOptions& options, const std::string& out_dir) {
  if (out_dir.empty()) return absl::InvalidArgumentError("out_dir: empty path");
  ASSIGN_OR_RETURN(const FamilyDescriptor* family, FindVariant(options.family));
  ASSIGN_OR_RETURN(StDType dtype, ParseStorageDType(options.dtype));
  // Validate everything that does not need the vocab file before reading it.
  RETURN_IF_ERROR(BuildModelConfig(options).status());

  const CreateTokenizerSpec tok = family->CreateTokenizer(options.family);
  // The special tokens serving reads by default for that tokenizer: its descriptor's.
  const json special_tokens = SpecialTokensJson(Tokenizer::DefaultSpecialTokens(tok.tokenizer_family));
  std::string vocab_bytes;
  int64_t vocab_from_file = 0;
  if (!options.vocab_file.empty()) {
    if (tok.format == CreateTokenizerSpec::VocabFormat::kNone) {
      return absl::InvalidArgumentError(absl::StrCat("vocab_file: family ", options.family,
                                                     " takes no vocabulary file"));
    }
    ASSIGN_OR_RETURN(vocab_bytes, ReadFileToString(options.vocab_file));
    ASSIGN_OR_RETURN(vocab_from_file, VocabNeeded(options.vocab_file, vocab_bytes, tok, special_tokens, options.sentencepiece));
  }
  ASSIGN_OR_RETURN(json config, BuildModelConfig(options, vocab_from_file));
  ASSIGN_OR_RETURN(ModelConfig parsed, ParseModelConfig(config, "config"));
  ASSIGN_OR_RETURN(std::vector<ModelTensorSpec> specs, family->CheckpointLayout(parsed));

  if (IsDirectory(out_dir) || FileExists(out_dir)) {
    if (!IsDirectory(out_dir)) {
      return absl::FailedPreconditionError(absl::StrCat(out_dir, ": exists and is not a directory"));
    }
    if (FileExists(JoinPath(out_dir, "config.json"))) {
      if (!options.overwrite) {
        return absl::FailedPreconditionError(absl::StrCat(
            out_dir, ": already holds a model (config.json); pass overwrite to replace it"));
      }
      std::error_code ec;
      std::filesystem::remove(JoinPath(out_dir, "config.json"), ec);
      RemoveStaleFiles(out_dir);
    }
  }
  RETURN_IF_ERROR(MakeDirs(out_dir));

  {
    WeightWriter weights(options.seed, options.init_std, dtype);
    for (const ModelTensorSpec& spec : specs) RETURN_IF_ERROR(weights.Add(spec, spec.tied_to));
    RETURN_IF_ERROR(weights.Write(JoinPath(out_dir, "model.safetensors")));
  }

  if (!options.vocab_file.empty()) {
    RETURN_IF_ERROR(WriteStringToFile(JoinPath(out_dir, tok.vocab_file_name), vocab_bytes));
    json tokenizer_config = tok.tokenizer_config;
    tokenizer_config.update(special_tokens);
    RETURN_IF_ERROR(WriteJson(JoinPath(out_dir, "tokenizer_config.json"), tokenizer_config));
    RETURN_IF_ERROR(WriteJson(JoinPath(out_dir, "special_tokens_map.json"), special_tokens));
  }
  if (options.sentence_transformers) {
    RETURN_IF_ERROR(WriteSentenceTransformers(options, out_dir, parsed.hidden_size, dtype));
  }
  // Last: a directory without config.json is not a model yet, so a failed run can be retried.
  return WriteJson(JoinPath(out_dir, "config.json"), config);
}

}  // namespace

}  // namespace relserve
