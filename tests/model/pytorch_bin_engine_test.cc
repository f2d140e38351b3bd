// The engine on pytorch_model.bin checkpoints: the same weights give the same outputs as from
// safetensors, whatever the storage layout (one storage per tensor, views with offsets and
// strides into shared storages, tied weights, shards, half precision), safetensors wins when both
// are there, and a broken checkpoint gets the error safetensors gets.
#include <cstdio>
#include <filesystem>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/tools/checkpoint_converter.h"
#include "server/tools/model_creator.h"
#include "server/util/file_util.h"
#include "tests/checkpoint/libtorch_archive.h"
#include "tests/model/model_dir_builder.h"
#include "tests/model/reference_fixture.h"

namespace relserve {
namespace {

using testing::ReferenceSequences;

using ::relserve::testing::HostTensor;
using ::relserve::testing::ModelDirBuilder;
using ::relserve::testing::NamedTensors;
using ::relserve::testing::ReadReferenceInputs;
using ::relserve::testing::ReferenceDir;
using ::relserve::testing::TensorMap;
using ::relserve::testing::TestEngineOptions;
using ::relserve::testing::WriteTorchSaveArchive;

at::ScalarType TorchType(StDType dtype) {
  switch (dtype) {
    case StDType::kF32: return at::kFloat;
    case StDType::kF16: return at::kHalf;
    case StDType::kBF16: return at::kBFloat16;
    case StDType::kF64: return at::kDouble;
    case StDType::kI64: return at::kLong;
    case StDType::kI32: return at::kInt;
    default: break;
  }
  ADD_FAILURE() << "unexpected dtype " << StDTypeName(dtype);
  return at::kFloat;
}

at::Tensor ToTorch(const HostTensor& t) {
  at::Tensor out = at::empty(t.shape, at::TensorOptions().dtype(TorchType(t.dtype)));
  if (!t.bytes.empty()) std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
  return out;
}

// How the state dict's tensors sit in their storages.
enum class Layout {
  kOwnStorages,  // one storage per tensor, as save_pretrained writes
  kSharedViews,  // one storage per dtype, tensors at offsets in it; matrices stored transposed
                 // (the view is .t(), strides (1, rows)); equal tensors tied to one storage
};

NamedTensors StateDict(const TensorMap& tensors, Layout layout) {
  NamedTensors out;
  if (layout == Layout::kOwnStorages) {
    for (const auto& [name, t] : tensors) out.emplace_back(name, ToTorch(t));
    return out;
  }
  std::map<at::ScalarType, int64_t> sizes;
  for (const auto& [name, t] : tensors) sizes[TorchType(t.dtype)] += ToTorch(t).numel() + 3;  // gaps: offsets vary
  std::map<at::ScalarType, at::Tensor> storages;
  std::map<at::ScalarType, int64_t> used;
  for (const auto& [type, n] : sizes) storages[type] = at::zeros({n}, at::TensorOptions().dtype(type));
  std::map<std::string, at::Tensor> placed;  // bytes -> view, for ties
  for (const auto& [name, t] : tensors) {
    auto tied = placed.find(t.bytes + ":" + std::to_string(static_cast<int>(t.dtype)));
    if (tied != placed.end() && tied->second.sizes().vec() == t.shape) {
      out.emplace_back(name, tied->second);
      continue;
    }
    const at::Tensor value = ToTorch(t);
    const at::ScalarType type = value.scalar_type();
    at::Tensor region = storages[type].narrow(0, used[type] + 3, value.numel());
    used[type] += value.numel() + 3;
    at::Tensor view;
    if (value.dim() == 2) {
      region.view({value.size(1), value.size(0)}).copy_(value.t());
      view = region.view({value.size(1), value.size(0)}).t();
    } else {
      region.copy_(value.reshape({-1}));
      view = region.view(value.sizes());
    }
    placed.emplace(t.bytes + ":" + std::to_string(static_cast<int>(t.dtype)), view);
    out.emplace_back(name, view);
  }
  return out;
}

// Writes the weights of `b` as pytorch_model.bin (or `shards` shards and their index) in place
// of model.safetensors.
void WritePytorchBin(ModelDirBuilder& b, Layout layout, int shards = 1) {
  b.Write();
  ASSERT_EQ(std::remove((b.dir() + "/model.safetensors").c_str()), 0);
  const NamedTensors all = StateDict(b.tensors(), layout);
  if (shards == 1) {
    WriteTorchSaveArchive(b.dir() + "/pytorch_model.bin", all);
    return;
  }
  std::vector<NamedTensors> parts(shards);
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t i = 0; i < all.size(); ++i) {
    const int shard = static_cast<int>(i % shards);
    parts[shard].push_back(all[i]);
    weight_map[all[i].first] = "pytorch_model-0000" + std::to_string(shard + 1) + "-of-0000" + std::to_string(shards) + ".bin";
  }
  for (int s = 0; s < shards; ++s) {
    WriteTorchSaveArchive(b.dir() + "/pytorch_model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".bin",
                          parts[s]);
  }
  b.WriteRaw("pytorch_model.bin.index.json", nlohmann::json({{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}).dump());
}

std::vector<SequenceOutput> RunOrDie(const std::string& dir, const std::vector<SequenceInput>& seqs) {
  auto engine = Engine::Load(dir, TestEngineOptions());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  const uint32_t outputs = kOutputTokenStates | kOutputPooled |
                           ((*engine)->info().labels.empty() ? 0u : static_cast<uint32_t>(kOutputLogits));
  auto out = (*engine)->Run(seqs, outputs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? std::move(*out) : std::vector<SequenceOutput>{};
}

void ExpectSameOutputs(const std::vector<SequenceOutput>& got, const std::vector<SequenceOutput>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].token_states, want[i].token_states) << "sequence " << i;
    EXPECT_EQ(got[i].pooled, want[i].pooled) << "sequence " << i;
    EXPECT_EQ(got[i].logits, want[i].logits) << "sequence " << i;
  }
}

struct Case {
  std::string model;
  Layout layout;
  int shards;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.model << (c.layout == Layout::kOwnStorages ? " own storages" : " shared views") << ", " << c.shards
      << " shard(s)";
}

class SameOutputsTest : public ::testing::TestWithParam<Case> {};

TEST_P(SameOutputsTest, AsFromSafetensors) {
  const Case& c = GetParam();
  const auto seqs = ReferenceSequences(c.model);
  const auto want = RunOrDie(ReferenceDir(c.model), seqs);
  ModelDirBuilder bin(ReferenceDir(c.model));
  WritePytorchBin(bin, c.layout, c.shards);
  ExpectSameOutputs(RunOrDie(bin.dir(), seqs), want);
}

INSTANTIATE_TEST_SUITE_P(
    ReferenceModels, SameOutputsTest,
    ::testing::Values(Case{"deberta_v3_like", Layout::kOwnStorages, 1}, Case{"deberta_v3_like", Layout::kSharedViews, 1},
                      Case{"deberta_v3_cls", Layout::kSharedViews, 1}, Case{"deberta_v3_cls", Layout::kOwnStorages, 3},
                      Case{"t5_v1_0", Layout::kOwnStorages, 1}, Case{"t5_v1_0", Layout::kSharedViews, 2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return info.param.model + (info.param.layout == Layout::kOwnStorages ? "_own_storages" : "_shared_views") +
             (info.param.shards > 1 ? "_sharded" : "");
    });

// The tied T5 embedding written as PyTorch writes it: one storage under both names.
TEST(PytorchBinEngineTest, TiedWeightsShareOneStorage) {
  ModelDirBuilder b(ReferenceDir("t5_v1_0"));
  ASSERT_EQ(b.tensors().count("shared.weight"), 1u);
  ASSERT_EQ(b.tensors().count("encoder.embed_tokens.weight"), 1u);
  const NamedTensors dict = StateDict(b.tensors(), Layout::kSharedViews);
  std::map<std::string, at::Tensor> by_name(dict.begin(), dict.end());
  EXPECT_TRUE(by_name["shared.weight"].is_same(by_name["encoder.embed_tokens.weight"]));
}

// Weights stored in float16 or bfloat16: the same values from either format, the same outputs.
TEST(PytorchBinEngineTest, HalfPrecisionStorages) {
  const auto seqs = ReferenceSequences("deberta_v3_like");
  for (at::ScalarType stored : {at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(stored));
    ModelDirBuilder half(ReferenceDir("deberta_v3_like"));
    for (auto& [name, t] : half.tensors()) {
      const at::Tensor converted = ToTorch(t).to(stored).contiguous();
      t.dtype = stored == at::kHalf ? StDType::kF16 : StDType::kBF16;
      t.bytes.assign(static_cast<const char*>(converted.data_ptr()), converted.nbytes());
    }
    half.Write();
    const auto want = RunOrDie(half.dir(), seqs);
    ModelDirBuilder bin(ReferenceDir("deberta_v3_like"));
    bin.tensors() = half.tensors();
    WritePytorchBin(bin, Layout::kSharedViews);
    ExpectSameOutputs(RunOrDie(bin.dir(), seqs), want);
  }
}

TEST(PytorchBinEngineTest, PrefersSafetensorsWhenBothArePresent) {
  const auto seqs = ReferenceSequences("deberta_v3_like");
  const auto want = RunOrDie(ReferenceDir("deberta_v3_like"), seqs);
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.Write();
  NamedTensors zeros;
  for (const auto& [name, t] : b.tensors()) zeros.emplace_back(name, at::zeros_like(ToTorch(t)));
  WriteTorchSaveArchive(b.dir() + "/pytorch_model.bin", zeros);
  ExpectSameOutputs(RunOrDie(b.dir(), seqs), want);
  // Without model.safetensors the zeros are read: the outputs change.
  ASSERT_EQ(std::remove((b.dir() + "/model.safetensors").c_str()), 0);
  const auto zeroed = RunOrDie(b.dir(), seqs);
  ASSERT_FALSE(zeroed.empty());
  EXPECT_NE(zeroed[0].pooled, want[0].pooled);
}

// Names, shapes and dtypes are checked as for safetensors, with the same messages.
TEST(PytorchBinEngineTest, BrokenCheckpointsGetTheSafetensorsErrors) {
  const std::vector<std::pair<std::string, std::function<void(TensorMap&)>>> breakages = {
      {"missing tensor", [](TensorMap& t) { t.erase("encoder.layer.1.attention.self.key_proj.weight"); }},
      {"wrong shape",
       [](TensorMap& t) {
         auto& w = t["encoder.layer.0.output.dense.bias"];
         w.shape = {16};
         w.bytes.resize(16 * 4);
       }},
      {"integer dtype",
       [](TensorMap& t) {
         auto& w = t["embeddings.LayerNorm.bias"];
         w.dtype = StDType::kI32;
       }},
      {"unexpected tensor", [](TensorMap& t) { t["encoder.unknown.weight"] = t["embeddings.LayerNorm.bias"]; }},
  };
  for (const auto& [what, breakage] : breakages) {
    SCOPED_TRACE(what);
    ModelDirBuilder st(ReferenceDir("deberta_v3_like"));
    breakage(st.tensors());
    st.Write();
    ModelDirBuilder bin(ReferenceDir("deberta_v3_like"));
    breakage(bin.tensors());
    WritePytorchBin(bin, Layout::kOwnStorages);
    auto from_st = Engine::Load(st.dir(), TestEngineOptions());
    auto from_bin = Engine::Load(bin.dir(), TestEngineOptions());
    ASSERT_FALSE(from_st.ok());
    ASSERT_FALSE(from_bin.ok());
    EXPECT_EQ(from_bin.status().code(), from_st.status().code());
    std::string message(from_bin.status().message());
    const size_t at = message.find(bin.dir());
    ASSERT_NE(at, std::string::npos) << message;
    message.replace(at, bin.dir().size(), st.dir());
    EXPECT_EQ(message, from_st.status().message());
  }
}

TEST(PytorchBinEngineTest, ARefusedPickleFailsTheLoadNamingTheFile) {
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.Write();
  ASSERT_EQ(std::remove((b.dir() + "/model.safetensors").c_str()), 0);
  auto malicious = ReadFileToString(::relserve::testing::TestDataDir() + "/pytorch_bin/malicious_system.bin");
  ASSERT_TRUE(malicious.ok()) << malicious.status();
  b.WriteRaw("pytorch_model.bin", *malicious);
  auto engine = Engine::Load(b.dir(), TestEngineOptions());
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(engine.status().message()),
              ::testing::AllOf(::testing::HasSubstr(b.dir() + "/pytorch_model.bin"),
                               ::testing::HasSubstr("refused global \"posix.system\"")));
}

// model.safetensors of `dir` rewritten as pytorch_model.bin.
void ReplaceWithPytorchBin(const std::string& dir) {
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  TensorMap tensors;
  for (const std::string& name : (*checkpoint)->Names()) {
    const TensorView* v = (*checkpoint)->Find(name);
    tensors[name] = HostTensor{v->dtype, v->shape, std::string(reinterpret_cast<const char*>(v->data), v->nbytes)};
  }
  WriteTorchSaveArchive(dir + "/pytorch_model.bin", StateDict(tensors, Layout::kSharedViews));
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
}

// A sentence-transformers model whose weights, its Dense module's included, are all in
// pytorch_model.bin; then the same directory after relserve-model convert.
TEST(PytorchBinEngineTest, SentenceTransformersModelAndItsConversion) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/relserve-bin-st-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  CreateModelOptions o;
  o.family = "deberta-v3";
  o.hidden = 32;
  o.layers = 2;
  o.heads = 4;
  o.intermediate = 64;
  o.vocab = 100;
  o.sentence_transformers = true;
  o.dense_out = 16;
  ASSERT_TRUE(CreateModelDirectory(o, root + "/st").ok());
  fs::copy(root + "/st", root + "/bin", fs::copy_options::recursive);
  ReplaceWithPytorchBin(root + "/bin");
  ReplaceWithPytorchBin(root + "/bin/2_Dense");
  ASSERT_FALSE(fs::exists(root + "/bin/2_Dense/model.safetensors"));

  std::vector<SequenceInput> seqs(3);
  seqs[0].input_ids = {1, 5, 9, 2};
  seqs[1].input_ids = {1, 50, 2};
  seqs[2].input_ids = {1, 7, 7, 7, 7, 7, 2};
  const auto want = RunOrDie(root + "/st", seqs);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(want[0].pooled.size(), 16u) << "the Dense module ran";
  ExpectSameOutputs(RunOrDie(root + "/bin", seqs), want);

  auto report = ConvertModelDirectory(root + "/bin", root + "/converted", /*overwrite=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->written, (std::vector<std::string>{"model.safetensors", "2_Dense/model.safetensors"}));
  ExpectSameOutputs(RunOrDie(root + "/converted", seqs), want);
  RemoveTree(root);
}

}  // namespace
}  // namespace relserve
