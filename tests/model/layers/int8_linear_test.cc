// Dynamic int8 quantization of Linear layers (server/model/layers/int8_linear.h) against float32, and
// --dtype int8 on every family's transformers reference (tests/data/reference): within stated
// bounds of the reference, and really quantized (not the float32 result).
#include "server/model/layers/int8_linear.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/model/layers/attention_options.h"
#include "server/model/layers/layers.h"
#include "server/safetensors/safetensors_file.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using testing::FloatData;

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).norm().item<double>() / want.norm().item<double>();
}

// The four GEMMs: relserve's in AMX tiles, AVX-512 VNNI and AVX2 registers (where the CPU has them)
// and LibTorch's oneDNN one.
class Int8LinearTest : public ::testing::TestWithParam<Int8Gemm> {
 protected:
  void SetUp() override {
    if (GetParam() == Int8Gemm::kAmx) {
      if (!PackedInt8Weights::Supported()) GTEST_SKIP() << "no AMX-INT8 on this CPU (or not permitted)";
    } else if (GetParam() == Int8Gemm::kVnni) {
      if (!PackedInt8Weights::VnniSupported()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
    } else if (GetParam() == Int8Gemm::kAvx2) {
      if (!PackedInt8Weights::Avx2Supported()) GTEST_SKIP() << "no AVX2 on this CPU";
    } else {
      ASSERT_TRUE(EnableInt8Engine().ok());
    }
  }
  std::shared_ptr<const Int8Weights> Quantize(const at::Tensor& w, const at::Tensor& b) {
    return QuantizeInt8(w, b, GetParam());
  }
};

INSTANTIATE_TEST_SUITE_P(EveryGemm, Int8LinearTest,
                         ::testing::Values(Int8Gemm::kAmx, Int8Gemm::kVnni, Int8Gemm::kAvx2, Int8Gemm::kOneDnn),
                         [](const ::testing::TestParamInfo<Int8Gemm>& info) {
                           return std::string(info.param == Int8Gemm::kAmx    ? "Amx"
                                              : info.param == Int8Gemm::kVnni ? "Vnni"
                                              : info.param == Int8Gemm::kAvx2 ? "Avx2"
                                                                              : "OneDnn");
                         });

TEST_P(Int8LinearTest, MatchesFloatWithinQuantizationError) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({37, 96});
  const at::Tensor w = at::randn({64, 96}) * 0.05;
  const at::Tensor b = at::randn({64});
  const at::Tensor want = at::linear(x, w, b);
  const at::Tensor got = Int8Apply(*Quantize(w, b), x);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_EQ(got.scalar_type(), at::kFloat);
  const double err = RelativeError(got, want);
  EXPECT_LT(err, 0.02);  // 8 bits each side: about 1% of the output's norm
  EXPECT_GT(err, 1e-5);  // and it is an int8 product, not the float one
}

TEST_P(Int8LinearTest, NoBiasAndLeadingDimensions) {
  at::manual_seed(2);
  const at::Tensor x = at::randn({2, 5, 48});
  const at::Tensor w = at::randn({16, 48});
  const at::Tensor got = Int8Apply(*Quantize(w, at::Tensor()), x);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 5, 16}));
  EXPECT_LT(RelativeError(got, at::linear(x, w)), 0.02);
}

TEST_P(Int8LinearTest, PerChannelScalesKeepSmallRowsPrecise) {
  // One row 1000x smaller than the others: with one scale for the whole weight it would round
  // to zero; per output channel it keeps its own precision. An all-zero row gives its bias.
  at::manual_seed(3);
  at::Tensor w = at::randn({4, 32});
  w[1] = w[1] * 1e-3;
  w[2].zero_();
  const at::Tensor b = at::tensor({0.5f, -1.0f, 2.0f, 0.25f});
  const at::Tensor x = at::randn({8, 32});
  const at::Tensor want = at::linear(x, w, b);
  const at::Tensor got = Int8Apply(*Quantize(w, b), x);
  const at::Tensor small_want = want.select(1, 1) + 1.0;  // without the bias
  const at::Tensor small_got = got.select(1, 1) + 1.0;
  EXPECT_LT(RelativeError(small_got, small_want), 0.05);
  EXPECT_TRUE(at::allclose(got.select(1, 2), at::full({8}, 2.0f)));
}

TEST_P(Int8LinearTest, QuantizeLinearsReplacesTheFloatWeights) {
  at::manual_seed(4);
  Linear a{at::randn({8, 16}), at::randn({8}), nullptr, nullptr};
  Linear unused;  // undefined: left alone
  const at::Tensor x = at::randn({3, 16});
  const at::Tensor want = a(x);
  ASSERT_TRUE(QuantizeLinearsInt8({&a, &unused, nullptr}, GetParam()).ok());
  EXPECT_NE(a.int8, nullptr);
  EXPECT_FALSE(a.weight.defined());  // released
  EXPECT_TRUE(a.defined());
  EXPECT_FALSE(unused.defined());
  EXPECT_LT(RelativeError(a(x), want), 0.02);
  const auto first = a.int8;
  ASSERT_TRUE(QuantizeLinearsInt8({&a}, GetParam()).ok());  // already quantized: unchanged
  EXPECT_EQ(a.int8, first);
}

// Through relserve's GEMM (AMX, VNNI or AVX2) each token has its own activation scale: a sequence's output is the same,
// bit for bit, alone or batched beside a sequence of a far wider range (where one scale for the
// whole tensor, oneDNN's, would coarsen it).
TEST_P(Int8LinearTest, TokensAreQuantizedOnTheirOwn) {
  if (GetParam() == Int8Gemm::kOneDnn) GTEST_SKIP() << "oneDNN's activation scale is the whole tensor's";
  at::manual_seed(5);
  const at::Tensor w = at::randn({48, 64}) * 0.1, b = at::randn({48});
  const at::Tensor quiet = at::randn({1, 6, 64}), loud = at::randn({1, 6, 64}) * 500;
  auto weights = Quantize(w, b);
  const at::Tensor alone = Int8Apply(*weights, quiet);
  const at::Tensor batched = Int8Apply(*weights, at::cat({quiet, loud}, 0));
  EXPECT_TRUE(at::equal(batched[0], alone[0]));
  EXPECT_LT(RelativeError(alone, at::linear(quiet, w, b)), 0.02);
}

// ChooseInt8Gemm and PackedInt8Weights::AnySupported (which the model host asks whether int8 batches
// run side by side) agree: relserve's GEMM exactly where one of its kernels runs, the first of AMX,
// VNNI and AVX2 the CPU has; oneDNN's when relserve's is switched off.
TEST(Int8GemmChoiceTest, RelservesGemmExactlyWhereAKernelRuns) {
  EXPECT_EQ(ChooseInt8Gemm(false), Int8Gemm::kOneDnn);
  EXPECT_EQ(ChooseInt8Gemm(true) != Int8Gemm::kOneDnn, PackedInt8Weights::AnySupported());
  const Int8Gemm want = PackedInt8Weights::Supports(Int8Kernel::kAmx)    ? Int8Gemm::kAmx
                        : PackedInt8Weights::Supports(Int8Kernel::kVnni) ? Int8Gemm::kVnni
                        : PackedInt8Weights::Supports(Int8Kernel::kAvx2) ? Int8Gemm::kAvx2
                                                                         : Int8Gemm::kOneDnn;
  EXPECT_EQ(ChooseInt8Gemm(true), want);
}

// --int8-weight-bits: 7 bits is 63 for every GEMM; 8 is 127, refused only where oneDNN's sums would
// saturate; auto is 7 where multiplying 8 bits is slower or wrong (relserve's AVX2 kernel, oneDNN's
// without VNNI), 8 elsewhere.
TEST(Int8WeightLevelTest, EachGemmAndSetting) {
  for (Int8Gemm gemm : {Int8Gemm::kAmx, Int8Gemm::kVnni, Int8Gemm::kAvx2, Int8Gemm::kOneDnn}) {
    SCOPED_TRACE(Int8GemmName(gemm));
    const bool onednn_seven = gemm == Int8Gemm::kOneDnn && OneDnnInt8SevenBitWeights();
    EXPECT_EQ(*Int8WeightLevel(gemm, Int8WeightBits::kSeven), 63);
    EXPECT_EQ(*Int8WeightLevel(gemm, Int8WeightBits::kAuto), gemm == Int8Gemm::kAvx2 || onednn_seven ? 63 : 127);
    const absl::StatusOr<int> eight = Int8WeightLevel(gemm, Int8WeightBits::kEight);
    if (onednn_seven) {
      ASSERT_FALSE(eight.ok());
      EXPECT_EQ(eight.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(eight.status().message()), HasSubstr("--int8-weight-bits 8"));
    } else {
      EXPECT_EQ(*eight, 127);
    }
  }
}

// ---- The engine with --dtype int8, on the transformers references.

struct Int8Distance {
  double min_token_cosine = 1;   // of last_hidden_state rows, at unpadded positions
  double max_logit_diff = 0;     // classifiers
  double max_diff_from_f32 = 0;  // last_hidden_state: int8 engine against the float32 engine
};

Int8Distance MeasureInt8(const std::string& name, Int8Attention attention, Int8Gemm gemm,
                         Int8WeightBits bits = Int8WeightBits::kAuto) {
  Int8Distance d;
  const std::string dir = testing::ReferenceDir(name);
  EngineOptions options;
  options.dtype = DType::kInt8;
  options.int8_attention = attention;
  options.int8_weight_bits = bits;
  options.kernels.packed_int8_gemm = gemm != Int8Gemm::kOneDnn;
  auto int8 = Engine::Load(dir, options);
  EXPECT_TRUE(int8.ok()) << int8.status();
  auto f32 = Engine::Load(dir, EngineOptions{});
  EXPECT_TRUE(f32.ok()) << f32.status();
  if (!int8.ok() || !f32.ok()) return d;
  EXPECT_EQ((*int8)->info().dtype, DType::kInt8);
  EXPECT_EQ((*int8)->info().projections, Int8GemmName(gemm));
  const PaddedBatch batch = testing::ReadReferenceInputs(dir + "/inputs.json");
  auto got = (*int8)->ForwardPadded(batch, false);
  auto base = (*f32)->ForwardPadded(batch, false);
  EXPECT_TRUE(got.ok() && base.ok());
  if (!got.ok() || !base.ok()) return d;
  std::map<std::string, const NamedTensor*> by_name, base_by_name;
  for (const NamedTensor& t : *got) by_name[t.name] = &t;
  for (const NamedTensor& t : *base) base_by_name[t.name] = &t;
  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  EXPECT_TRUE(expected.ok());
  if (!expected.ok()) return d;
  for (const TensorView& want : (*expected)->tensors()) {
    if (want.name == "logits") {
      const std::vector<float> w = FloatData(want);
      const NamedTensor& g = *by_name.at("logits");
      for (size_t i = 0; i < w.size(); ++i) d.max_logit_diff = std::max(d.max_logit_diff, testing::AbsDiff(g.data[i], w[i]));
      continue;
    }
    if (want.name != "last_hidden_state") continue;
    const std::vector<float> w = FloatData(want);
    const NamedTensor& g = *by_name.at("last_hidden_state");
    const NamedTensor& f = *base_by_name.at("last_hidden_state");
    const int64_t hidden = want.shape[2];
    for (int64_t b = 0; b < batch.batch; ++b) {
      for (int64_t t = 0; t < batch.length; ++t) {
        if (batch.attention_mask[b * batch.length + t] == 0) continue;
        const size_t row = static_cast<size_t>((b * batch.length + t) * hidden);
        double ab = 0, aa = 0, bb = 0;
        for (int64_t k = 0; k < hidden; ++k) {
          ab += double(g.data[row + k]) * w[row + k];
          aa += double(g.data[row + k]) * g.data[row + k];
          bb += double(w[row + k]) * w[row + k];
          d.max_diff_from_f32 = std::max(d.max_diff_from_f32, testing::AbsDiff(g.data[row + k], f.data[row + k]));
        }
        d.min_token_cosine = std::min(d.min_token_cosine, ab / std::sqrt(aa * bb));
      }
    }
  }
  return d;
}

// Bounds from measurement on these models (weights drawn large, std 0.2): every token's
// final hidden state within cosine 0.995 of transformers' float64 result; the worst measured
// is printed beside each.
// Both precisions of attention's products under int8 (--int8-attention float32 and, where the CPU
// has bfloat16 instructions, bfloat16) are held to the same bounds.
// Both GEMMs (oneDNN's and relserve's, where the CPU has AMX-INT8, AVX-512 VNNI or AVX2) are held to the same bounds too,
// except where the weights are quantized to 7 bits (--int8-weight-bits auto on a CPU without
// VNNI): oneDNN's (OneDnnInt8SevenBitWeights), whose worst token measured 0.99099 (MPNet; with 8
// bits its products saturated and the worst measured 0.945), and relserve's AVX2 kernel, whose
// worst measured 0.99279 (MPNet; each token's own activation scale brings every family a little
// nearer than oneDNN's on the same CPU); 0.99 for both.
TEST(Int8EngineTest, EveryFamilyStaysCloseToTheReference) {
  std::vector<Int8Attention> attentions = {Int8Attention::kFloat32};
  if (CpuHasBfloat16Products()) attentions.push_back(Int8Attention::kBfloat16);
  std::vector<Int8Gemm> gemms = {Int8Gemm::kOneDnn};
  if (ChooseInt8Gemm(true) != Int8Gemm::kOneDnn) gemms.push_back(ChooseInt8Gemm(true));
  for (Int8Gemm gemm : gemms) {
  for (Int8Attention attention : attentions) {
  for (const char* name : {"deberta_v3_like", "deberta_v3_cls", "t5_v1_0", "bert_absolute", "bert_relative_key",
                           "mpnet_like", "xlnet_like"}) {
    const Int8Distance d = MeasureInt8(name, attention, gemm);
    std::cout << name << " (gemm " << Int8GemmName(gemm) << ", attention "
              << Int8AttentionName(attention) << "): min token cosine "
              << d.min_token_cosine << ", max |logit diff| " << d.max_logit_diff
              << ", max |int8 - float32| " << d.max_diff_from_f32 << "\n";
    const bool seven_bit = *Int8WeightLevel(gemm, Int8WeightBits::kAuto) == PackedInt8Weights::kSevenBitLevel;
    EXPECT_GT(d.min_token_cosine, seven_bit ? 0.99 : 0.995) << name;
    EXPECT_GT(d.max_diff_from_f32, 1e-4) << name << ": the int8 path did not run";
    if (std::string(name) == "deberta_v3_cls") {
      EXPECT_GT(d.max_logit_diff, 0.0);
      EXPECT_LT(d.max_logit_diff, 0.1) << name;
    }
  }
  }
  }
}

// --int8-attention: auto is bfloat16 where the CPU has bfloat16 instructions and float32 elsewhere
// (the same answers, bit for bit, as the precision it stands for), except that with relserve's
// int8 GEMM the batches the float32 tiles take (at most 192 tokens on AVX-512 CPUs) keep float32
// there (the next test); the two precisions give different answers (the switch reaches the
// products); bfloat16 on a CPU without the instructions is refused at load.
absl::StatusOr<std::vector<float>> RunInt8(const std::string& dir, const PaddedBatch& batch, Int8Attention attention) {
  EngineOptions options;
  options.dtype = DType::kInt8;
  options.int8_attention = attention;
  auto engine = Engine::Load(dir, options);
  if (!engine.ok()) return engine.status();
  auto out = (*engine)->ForwardPadded(batch, false);
  if (!out.ok()) return out.status();
  for (const NamedTensor& t : *out) {
    if (t.name == "last_hidden_state") return t.data;
  }
  return absl::NotFoundError("no last_hidden_state");
}

TEST(Int8EngineTest, AttentionPrecisionFollowsTheOptionAndTheCpu) {
  const std::string dir = testing::ReferenceDir("deberta_v3_like");
  const PaddedBatch batch = testing::ReadReferenceInputs(dir + "/inputs.json");
  ASSERT_GT(batch.batch * batch.length, 192) << "a batch past the tiles' bound";
  auto run = [&](Int8Attention attention) { return RunInt8(dir, batch, attention); };
  auto f32 = run(Int8Attention::kFloat32);
  auto automatic = run(Int8Attention::kAuto);
  auto bf16 = run(Int8Attention::kBfloat16);
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  if (CpuHasBfloat16Products()) {
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    EXPECT_EQ(*automatic, *bf16);
    EXPECT_GT(testing::MaxAbsDiff(*bf16, *f32), 1e-5) << "bfloat16 products gave float32's answers";
    EXPECT_LT(testing::MaxAbsDiff(*bf16, *f32), 0.5);
  } else {
    EXPECT_EQ(*automatic, *f32);
    ASSERT_FALSE(bf16.ok());
    EXPECT_EQ(bf16.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(bf16.status().message()), HasSubstr("AVX512-BF16"));
  }
}

// Under auto, with relserve's int8 GEMM on a CPU with bfloat16 instructions, a batch the float32
// tiles take (one sequence of the reference, at most 192 tokens) keeps attention's products in
// float32: float32's answers bit for bit, not bfloat16's (in a short batch bfloat16's products
// through oneDNN cost more than they save, docs/PERFORMANCE.md). Elsewhere auto is float32 anyway.
TEST(Int8EngineTest, ShortBatchesKeepFloat32AttentionUnderAuto) {
  if (ChooseInt8Gemm(true) == Int8Gemm::kOneDnn || !PackedWeights::Supported()) {
    GTEST_SKIP() << "neither relserve's int8 GEMM nor its float32 tiles run on this CPU";
  }
  const std::string dir = testing::ReferenceDir("deberta_v3_like");
  const PaddedBatch all = testing::ReadReferenceInputs(dir + "/inputs.json");
  PaddedBatch one;
  one.batch = 1;
  for (int64_t j = 0; j < all.length && all.attention_mask[j] != 0; ++j) {
    one.input_ids.push_back(all.input_ids[j]);
    one.attention_mask.push_back(1);
  }
  one.length = static_cast<int64_t>(one.input_ids.size());
  ASSERT_GT(one.length, 2);
  ASSERT_LE(one.length, 192);
  auto f32 = RunInt8(dir, one, Int8Attention::kFloat32);
  auto automatic = RunInt8(dir, one, Int8Attention::kAuto);
  ASSERT_TRUE(f32.ok()) << f32.status();
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(*automatic, *f32);
  if (CpuHasBfloat16Products()) {
    auto bf16 = RunInt8(dir, one, Int8Attention::kBfloat16);
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    EXPECT_GT(testing::MaxAbsDiff(*bf16, *f32), 1e-5) << "bfloat16 products gave float32's answers";
  }
}

// --int8-weight-bits reaches relserve's GEMM: on the references, 8-bit weights come closer to
// transformers' answers than 7-bit ones for each family (about 4 times closer to float32 on
// base-sized models, docs/PERFORMANCE.md), both within the bounds above, and auto gives exactly
// the answers of the bits it stands for on this CPU (7 on AVX2 alone, 8 with VNNI or AMX).
TEST(Int8EngineTest, EightBitWeightsComeCloserThanSeven) {
  const Int8Gemm gemm = ChooseInt8Gemm(true);
  if (gemm == Int8Gemm::kOneDnn) GTEST_SKIP() << "relserve's int8 GEMM does not run on this CPU";
  const bool auto_is_seven = *Int8WeightLevel(gemm, Int8WeightBits::kAuto) == PackedInt8Weights::kSevenBitLevel;
  for (const char* name : {"deberta_v3_cls", "t5_v1_0", "mpnet_like"}) {
    SCOPED_TRACE(name);
    const Int8Distance seven = MeasureInt8(name, Int8Attention::kFloat32, gemm, Int8WeightBits::kSeven);
    const Int8Distance eight = MeasureInt8(name, Int8Attention::kFloat32, gemm, Int8WeightBits::kEight);
    const Int8Distance automatic = MeasureInt8(name, Int8Attention::kFloat32, gemm, Int8WeightBits::kAuto);
    std::cout << name << ": min token cosine 7 bits " << seven.min_token_cosine << ", 8 bits "
              << eight.min_token_cosine << "\n";
    EXPECT_GT(eight.min_token_cosine, 0.995);
    EXPECT_GT(seven.min_token_cosine, 0.99);
    EXPECT_LT(eight.max_diff_from_f32, seven.max_diff_from_f32);
    EXPECT_GT(eight.min_token_cosine, seven.min_token_cosine);
    const Int8Distance& same = auto_is_seven ? seven : eight;
    EXPECT_EQ(automatic.min_token_cosine, same.min_token_cosine);
    EXPECT_EQ(automatic.max_diff_from_f32, same.max_diff_from_f32);
    EXPECT_EQ(automatic.max_logit_diff, same.max_logit_diff);
  }
}

// 8-bit weights where only oneDNN's int8 linear would run them without VNNI are refused at load,
// naming the flag, before any weight is read.
TEST(Int8EngineTest, EightBitWeightsOnOneDnnWithoutVnniAreRefused) {
  if (!OneDnnInt8SevenBitWeights()) GTEST_SKIP() << "oneDNN multiplies 8-bit weights exactly on this CPU";
  EngineOptions options;
  options.dtype = DType::kInt8;
  options.kernels.packed_int8_gemm = false;
  options.int8_weight_bits = Int8WeightBits::kEight;
  auto e = Engine::Load(testing::ReferenceDir("deberta_v3_like"), options);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("--int8-weight-bits 8"));
  options.int8_weight_bits = Int8WeightBits::kSeven;
  auto seven = Engine::Load(testing::ReferenceDir("deberta_v3_like"), options);
  ASSERT_TRUE(seven.ok()) << seven.status();
  EXPECT_EQ((*seven)->info().int8_weight_bits, 7);
}

// The engine says which bits its int8 weights took (ModelInfo::int8_weight_bits, in the load log
// and relserve-model's output): what the setting resolves to for its GEMM, and 0 outside int8.
TEST(Int8EngineTest, InfoNamesTheWeightBits) {
  const std::string dir = testing::ReferenceDir("deberta_v3_like");
  auto f32 = Engine::Load(dir, EngineOptions{});
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ((*f32)->info().int8_weight_bits, 0);
  const Int8Gemm gemm = ChooseInt8Gemm(true);
  for (Int8WeightBits bits : {Int8WeightBits::kAuto, Int8WeightBits::kSeven, Int8WeightBits::kEight}) {
    if (!Int8WeightLevel(gemm, bits).ok()) continue;
    EngineOptions options;
    options.dtype = DType::kInt8;
    options.int8_weight_bits = bits;
    auto e = Engine::Load(dir, options);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->info().int8_weight_bits, *Int8WeightLevel(gemm, bits) == 63 ? 7 : 8) << Int8WeightBitsName(bits);
    if (bits != Int8WeightBits::kAuto) {
      EXPECT_EQ((*e)->info().int8_weight_bits, bits == Int8WeightBits::kSeven ? 7 : 8);
    }
  }
}

// float16 on the CPU is refused at load, naming what runs there (LibTorch has no float16 matrix
// product on the CPU: the forward would fail later with an internal error).
TEST(Int8EngineTest, Float16OnTheCpuIsRefusedAtLoad) {
  for (const char* name : {"deberta_v3_like", "t5_v1_0"}) {
    EngineOptions options;
    options.dtype = DType::kFloat16;
    auto e = Engine::Load(testing::ReferenceDir(name), options);
    ASSERT_FALSE(e.ok()) << name;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr("float16 runs on a GPU only")) << name;
  }
}

// A dtype's name is read once, where the flags are (ParseDType); the engine takes a DType.
TEST(Int8EngineTest, UnknownDtypeListsInt8) {
  auto e = ParseDType("int4");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("float32, bfloat16, float16, int8"));
}

}  // namespace
}  // namespace relserve
