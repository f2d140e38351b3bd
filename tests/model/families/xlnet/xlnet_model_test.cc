// XlnetModel (server/model/families/xlnet) on its own: transformers 4.40.2's outputs for the
// xlnet_like fixture (left-padded pairs) within 1e-4 at every real token, the same rows padded
// on the right, the attention path of GPUs, and the sinusoid table against its formula.
#include "server/model/families/xlnet/xlnet_model.h"

#include <cmath>
#include <cstring>
#include <map>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/families/family_registry.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/safetensors/safetensors_file.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::ReadReferenceInputs;
using testing::ReferenceDir;

constexpr double kTolerance = 1e-4;

std::unique_ptr<XlnetModel> LoadModel(const std::string& dir, at::ScalarType dtype = at::kFloat) {
  auto config = LoadModelConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir);
  EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
  WeightLoader weights(**checkpoint, dtype);
  auto model = XlnetModel::Load(*config, weights);
  EXPECT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(weights.CheckNoneUnused({}).ok());
  return model.ok() ? std::move(*model) : nullptr;
}

at::Tensor Matrix(const std::vector<int64_t>& v, int64_t B, int64_t L) {
  return at::from_blob(const_cast<int64_t*>(v.data()), {B, L}, at::kLong).clone();
}

// The rows of a left-padded batch moved to the right, token types and all.
PaddedBatch ToRightPadding(const PaddedBatch& left) {
  PaddedBatch right = left;
  for (int64_t b = 0; b < left.batch; ++b) {
    int64_t n = 0;
    for (int64_t t = 0; t < left.length; ++t) n += left.attention_mask[b * left.length + t];
    const int64_t pad = left.length - n;
    for (int64_t t = 0; t < left.length; ++t) {
      const int64_t from = b * left.length + (t < n ? t + pad : t - n);
      right.input_ids[b * left.length + t] = left.input_ids[from];
      right.attention_mask[b * left.length + t] = left.attention_mask[from];
      right.token_type_ids[b * left.length + t] = left.token_type_ids[from];
    }
  }
  return right;
}

// Largest difference at the real tokens, `got` laid out as `batch`, `want` as the fixture's
// left-padded rows.
double MaxDiffRealTokens(const at::Tensor& got, const PaddedBatch& batch, const std::vector<float>& want,
                         const PaddedBatch& reference) {
  const int64_t B = batch.batch, L = batch.length, H = got.size(2);
  at::Tensor g = got.contiguous();
  const float* p = g.data_ptr<float>();
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> mine, theirs;
    for (int64_t t = 0; t < L; ++t) {
      if (batch.attention_mask[b * L + t]) mine.push_back(t);
      if (reference.attention_mask[b * L + t]) theirs.push_back(t);
    }
    EXPECT_EQ(mine.size(), theirs.size());
    for (size_t k = 0; k < mine.size() && k < theirs.size(); ++k) {
      for (int64_t h = 0; h < H; ++h) {
        worst = std::max(worst, testing::AbsDiff(p[(b * L + mine[k]) * H + h], want[(b * L + theirs[k]) * H + h]));
      }
    }
  }
  return worst;
}

class XlnetModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ReferenceDir("xlnet_like");
    reference_ = ReadReferenceInputs(dir_ + "/inputs.json");
    auto expected = SafetensorsFile::Open(dir_ + "/expected.safetensors");
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (const TensorView& t : (*expected)->tensors()) {
      std::vector<float> data(t.numel());
      std::memcpy(data.data(), t.data, t.nbytes);
      expected_[t.name] = std::move(data);
    }
  }

  // Every hidden state of `batch` against the fixture; returns the largest difference.
  // `biased`: the attention path of GPUs, on the CPU (AttentionKernels::device_path_on_cpu).
  double Compare(const XlnetModel& model, const PaddedBatch& batch, bool with_types = true, bool biased = false) {
    const int64_t B = batch.batch, L = batch.length;
    EncoderInputs in{Matrix(batch.input_ids, B, L), Matrix(batch.attention_mask, B, L),
                     with_types ? Matrix(batch.token_type_ids, B, L) : at::Tensor(), true, at::Tensor()};
    in.attention.device_path_on_cpu = biased;
    EncoderOutputs out = model.Forward(in, /*all_hidden_states=*/true);
    EXPECT_EQ(out.hidden_states.size(), 3u);
    for (at::Tensor& t : out.hidden_states) t = t.to(at::kFloat);
    out.last_hidden_state = out.last_hidden_state.to(at::kFloat);
    double worst = MaxDiffRealTokens(out.last_hidden_state, batch, expected_.at("last_hidden_state"), reference_);
    for (size_t i = 0; i < out.hidden_states.size(); ++i) {
      worst = std::max(worst, MaxDiffRealTokens(out.hidden_states[i], batch,
                                                expected_.at("hidden_state_" + std::to_string(i)), reference_));
    }
    return worst;
  }

  c10::InferenceMode guard_;
  std::string dir_;
  PaddedBatch reference_;
  std::map<std::string, std::vector<float>> expected_;
};

TEST_F(XlnetModelTest, MatchesTransformersOnLeftPaddedPairs) {
  auto model = LoadModel(dir_);
  ASSERT_NE(model, nullptr);
  EXPECT_LE(Compare(*model, reference_), kTolerance);
}

TEST_F(XlnetModelTest, RightPaddingGivesTheSameRealTokens) {
  auto model = LoadModel(dir_);
  ASSERT_NE(model, nullptr);
  EXPECT_LE(Compare(*model, ToRightPadding(reference_)), kTolerance);
}

TEST_F(XlnetModelTest, BiasedAttentionPathMatchesTransformers) {
  auto model = LoadModel(dir_);
  ASSERT_NE(model, nullptr);
  const double left = Compare(*model, reference_, /*with_types=*/true, /*biased=*/true);
  const double right = Compare(*model, ToRightPadding(reference_), /*with_types=*/true, /*biased=*/true);
  EXPECT_LE(left, kTolerance);
  EXPECT_LE(right, kTolerance);
}

TEST_F(XlnetModelTest, BFloat16StaysClose) {
  // bfloat16 weights and activations (the softmax in float32; LibTorch's CPU has no float16
  // matrix products): within the rounding of 8 significant bits over two layers.
  auto model = LoadModel(dir_, at::kBFloat16);
  ASSERT_NE(model, nullptr);
  const double diff = Compare(*model, reference_);
  EXPECT_LE(diff, 0.25);
  EXPECT_GT(diff, kTolerance);  // it did run in bfloat16
}

TEST_F(XlnetModelTest, SegmentTermMatters) {
  // Without token_type_ids transformers leaves the segment term out: far from the fixture.
  auto model = LoadModel(dir_);
  ASSERT_NE(model, nullptr);
  EXPECT_GT(Compare(*model, reference_, /*with_types=*/false), 100 * kTolerance);
}

TEST(XlnetSinusoidTableTest, FollowsTheFormula) {
  c10::InferenceMode guard;
  const int64_t reach = 300, d_model = 48;
  at::Tensor table = XlnetSinusoidTable(reach, d_model);
  ASSERT_EQ(table.sizes(), (std::vector<int64_t>{2 * reach + 1, d_model}));
  ASSERT_EQ(table.scalar_type(), at::kFloat);
  const float* p = table.data_ptr<float>();
  double worst = 0;
  for (int64_t row = 0; row < 2 * reach + 1; ++row) {
    const double r = static_cast<double>(row - reach);
    for (int64_t k = 0; k < d_model / 2; ++k) {
      const double f = 1.0 / std::pow(10000.0, 2.0 * k / d_model);
      worst = std::max(worst, testing::AbsDiff(p[row * d_model + k], std::sin(r * f)));
      worst = std::max(worst, testing::AbsDiff(p[row * d_model + d_model / 2 + k], std::cos(r * f)));
    }
  }
  // float32 arguments up to 300 radians: a few ulps of the argument.
  EXPECT_LT(worst, 1e-4);
  EXPECT_EQ(p[reach * d_model], 0.0f);            // sin(0)
  EXPECT_EQ(p[reach * d_model + d_model / 2], 1.0f);  // cos(0)
}

}  // namespace
}  // namespace relserve
