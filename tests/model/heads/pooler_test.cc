// The pooled embedding without the Normalize module (Pooler's normalize switch, and
// kOutputPooledUnnormalized through Engine::Run): Pooling and Dense still apply, only the final
// L2 normalisation of sentence-transformers' Normalize is left out, so that the pooled
// embedding is exactly normalise(unnormalised).
#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "gtest/gtest.h"
#include "server/model/heads/pooler.h"
#include "server/model/kernels/packed_gemm.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using testing::ScratchDir;

double Norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

std::vector<double> Normalised(const std::vector<float>& v) {
  const double n = std::max(Norm(v), 1e-12);
  std::vector<double> out;
  for (float x : v) out.push_back(x / n);
  return out;
}

TEST(PoolerTest, NormalizeSwitchLeavesOutOnlyTheNormalisation) {
  auto pooling = PoolingFromMode("mean", 8);
  ASSERT_TRUE(pooling.ok()) << pooling.status();
  auto pooler = Pooler::Create(*pooling, {}, /*normalize=*/true, 8);
  ASSERT_TRUE(pooler.ok()) << pooler.status();
  at::manual_seed(3);
  const at::Tensor hidden = at::randn({2, 5, 8}) * 3 + 1;
  const at::Tensor mask = at::tensor({1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, at::kLong).view({2, 5});
  const at::Tensor raw = (*pooler)(hidden, mask, /*normalize=*/false);
  const at::Tensor pooled = (*pooler)(hidden, mask);
  // Mean over the masked tokens, written out.
  const at::Tensor mean0 = hidden[0].narrow(0, 0, 3).mean(0), mean1 = hidden[1].mean(0);
  EXPECT_TRUE(at::allclose(raw[0], mean0, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(raw[1], mean1, 1e-6, 1e-6));
  EXPECT_GT(std::abs(raw[0].norm().item<double>() - 1), 0.1);
  EXPECT_TRUE(at::allclose(pooled, raw / raw.norm(2, {1}, true), 1e-6, 1e-6));
  // Without a Normalize module the switch changes nothing.
  auto plain = Pooler::Create(*pooling, {}, /*normalize=*/false, 8);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(at::equal((*plain)(hidden, mask), (*plain)(hidden, mask, false)));
  EXPECT_TRUE(at::equal((*plain)(hidden, mask), raw));
}

class PooledUnnormalizedTest : public ::testing::Test {
 protected:
  std::string Create(const std::string& name, int dense_out, bool sentence_transformers = true) {
    CreateModelOptions o;
    o.family = "bert";
    o.hidden = 32;
    o.layers = 2;
    o.heads = 4;
    o.intermediate = 64;
    o.vocab = 128;
    o.init_std = 0.2f;
    o.sentence_transformers = sentence_transformers;
    o.dense_out = dense_out;
    const std::string dir = scratch_.Path(name);
    auto st = CreateModelDirectory(o, dir);
    if (!st.ok()) throw std::runtime_error(std::string(st.message()));
    return dir;
  }

  static std::vector<SequenceOutput> Run(const std::string& dir, const std::vector<SequenceInput>& batch,
                                         uint32_t outputs) {
    auto engine = Engine::Load(dir, testing::TestEngineOptions());
    if (!engine.ok()) throw std::runtime_error(std::string(engine.status().message()));
    auto out = (*engine)->Run(batch, outputs);
    if (!out.ok()) throw std::runtime_error(std::string(out.status().message()));
    return std::move(*out);
  }

  ScratchDir scratch_;
  const std::vector<SequenceInput> batch_ = {{{2, 7, 9, 11, 3}, {}, 0}, {{2, 40, 3}, {}, 0}, {{2, 5, 6, 7, 8, 9, 10, 3}, {}, 0}};
};

// Mean pooling and Normalize: the unnormalised vector is the mean of the token states, and the
// pooled one is that divided by its norm.
TEST_F(PooledUnnormalizedTest, MeanPoolingWithNormalize) {
  const std::string dir = Create("normalize", 0);
  const auto pooled = Run(dir, batch_, kOutputPooled);
  const auto raw = Run(dir, batch_, kOutputPooled | kOutputPooledUnnormalized | kOutputTokenStates);
  for (size_t b = 0; b < batch_.size(); ++b) {
    std::vector<double> mean(32, 0.0);
    for (int t = 0; t < raw[b].num_tokens; ++t) {
      for (int k = 0; k < 32; ++k) mean[k] += raw[b].token_states[t * 32 + k] / raw[b].num_tokens;
    }
    EXPECT_LE(MaxAbsDiff(raw[b].pooled_unnormalized, mean), 1e-5) << "sequence " << b;
    EXPECT_GT(std::abs(Norm(raw[b].pooled_unnormalized) - 1), 0.01) << "sequence " << b;
    EXPECT_NEAR(Norm(pooled[b].pooled), 1.0, 1e-5);
    EXPECT_LE(MaxAbsDiff(pooled[b].pooled, Normalised(raw[b].pooled_unnormalized)), 1e-6) << "sequence " << b;
    // A batch asking both (the batcher ORs its sequences' flags) gets both: `pooled` stays normalised.
    EXPECT_EQ(raw[b].pooled, pooled[b].pooled) << "sequence " << b;
    EXPECT_TRUE(pooled[b].pooled_unnormalized.empty());
  }
  // The flag alone fills its own field only.
  const auto alone = Run(dir, batch_, kOutputPooledUnnormalized);
  EXPECT_TRUE(alone[0].pooled.empty());
  EXPECT_EQ(alone[0].pooled_unnormalized, raw[0].pooled_unnormalized);
}

// A Dense module still applies: the unnormalised vector is tanh(W mean + b), 8 wide.
TEST_F(PooledUnnormalizedTest, DenseStillApplies) {
  const std::string dir = Create("dense", 8);
  const auto pooled = Run(dir, batch_, kOutputPooled);
  const auto raw = Run(dir, batch_, kOutputPooled | kOutputPooledUnnormalized | kOutputTokenStates);
  const testing::F32Map dense = testing::ReadWeights(JoinPath(dir, "2_Dense"));
  const std::vector<float>& w = dense.at("linear.weight").data;
  const std::vector<float>& bias = dense.at("linear.bias").data;
  for (size_t b = 0; b < batch_.size(); ++b) {
    ASSERT_EQ(raw[b].pooled_unnormalized.size(), 8u);
    std::vector<double> mean(32, 0.0);
    for (int t = 0; t < raw[b].num_tokens; ++t) {
      for (int k = 0; k < 32; ++k) mean[k] += raw[b].token_states[t * 32 + k] / raw[b].num_tokens;
    }
    std::vector<double> want(8);
    for (int i = 0; i < 8; ++i) {
      double s = bias[i];
      for (int k = 0; k < 32; ++k) s += w[i * 32 + k] * mean[k];
      want[i] = std::tanh(s);
    }
    EXPECT_LE(MaxAbsDiff(raw[b].pooled_unnormalized, want), 1e-5) << "sequence " << b;
    EXPECT_LE(MaxAbsDiff(pooled[b].pooled, Normalised(raw[b].pooled_unnormalized)), 1e-6) << "sequence " << b;
  }
}

// In float32 on a CPU the packed GEMM runs on, the Dense module runs on it too (counted in
// ModelInfo, its width still reported), and answers as LibTorch's linear does.
TEST_F(PooledUnnormalizedTest, DenseRunsOnThePackedGemm) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  const std::string dir = Create("dense_packed", 8);
  const testing::PackedAndBlasEngines engines = testing::LoadPackedAndBlas(dir);
  EXPECT_EQ(engines.packed->info().packed_float32_heads, 1);
  EXPECT_EQ(engines.packed->info().pooling.dense_out_features, std::vector<int>{8});
  EXPECT_EQ(engines.packed->info().embedding_dim, 8);
  EXPECT_EQ(engines.blas->info().packed_float32_heads, 0);
  auto got = engines.packed->Run(batch_, kOutputPooledUnnormalized);
  auto want = engines.blas->Run(batch_, kOutputPooledUnnormalized);
  ASSERT_TRUE(got.ok() && want.ok());
  for (size_t b = 0; b < batch_.size(); ++b) {
    EXPECT_LE(MaxAbsDiff((*got)[b].pooled_unnormalized, (*want)[b].pooled_unnormalized), 1e-5) << b;
  }
}

// Without a Normalize module both are the same vector.
TEST_F(PooledUnnormalizedTest, NoNormalizeModule) {
  const std::string dir = Create("plain", 0, /*sentence_transformers=*/false);
  const auto pooled = Run(dir, batch_, kOutputPooled);
  const auto raw = Run(dir, batch_, kOutputPooled | kOutputPooledUnnormalized);
  for (size_t b = 0; b < batch_.size(); ++b) {
    EXPECT_EQ(pooled[b].pooled, raw[b].pooled);
    EXPECT_EQ(pooled[b].pooled, raw[b].pooled_unnormalized);
  }
}

}  // namespace
}  // namespace relserve
