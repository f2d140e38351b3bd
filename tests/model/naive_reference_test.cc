// The naive port (naive_reference.h) against transformers 4.40.2 itself: the reference
// fixtures (tests/data/reference, computed by transformers in float64) within 1e-5 at every
// unpadded position, for every hidden state and the logits. This is what entitles the switch
// tests to use the port as the reference on configurations no fixture covers.
#include "tests/model/naive_reference.h"
#include "tests/model/families/mpnet/naive_mpnet_reference.h"

#include <cmath>
#include <cstring>
#include <map>

#include "gtest/gtest.h"
#include "server/safetensors/safetensors_file.h"
#include "tests/model/reference_fixture.h"

namespace relserve {
namespace {

using testing::MaxAbsDiffMasked;
using testing::ReadReferenceInputs;
using testing::ReferenceDir;
using testing::FloatData;

constexpr double kTolerance = 1e-5;

// Every tensor of expected.safetensors against the port; returns the largest difference.
double CheckFixture(const std::string& name, int expected_tensors) {
  const std::string dir = ReferenceDir(name);
  const PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  auto outputs = naive::Forward(dir, batch);
  EXPECT_TRUE(outputs.ok()) << outputs.status();
  if (!outputs.ok()) return INFINITY;
  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  EXPECT_TRUE(expected.ok()) << expected.status();
  if (!expected.ok()) return INFINITY;
  int compared = 0;
  double worst = 0;
  for (const TensorView& want : (*expected)->tensors()) {
    EXPECT_EQ(want.dtype, StDType::kF32);
    auto it = outputs->find(want.name);
    EXPECT_NE(it, outputs->end()) << "the port gave no " << want.name;
    if (it == outputs->end()) continue;
    const double diff =
        MaxAbsDiffMasked(naive::ToNamedTensor(want.name, it->second), FloatData(want), want.shape, batch);
    EXPECT_LE(diff, kTolerance) << name << " " << want.name;
    worst = std::max(worst, diff);
    ++compared;
  }
  EXPECT_EQ(compared, expected_tensors);
  return worst;
}

TEST(NaiveReferenceTest, ReproducesDebertaV3Backbone) {
  // log buckets (position_buckets 32, rows of length 160), share_att_key, c2p + p2c,
  // layer-normed relative embeddings: last_hidden_state + hidden_state_0..3
  CheckFixture("deberta_v3_like", 5);
}

TEST(NaiveReferenceTest, ReproducesDebertaV3SequenceClassification) {
  // ... plus the "deberta." prefix, ContextPooler and classifier: logits too
  CheckFixture("deberta_v3_cls", 6);
}

TEST(NaiveReferenceTest, ReproducesT5V10Encoder) {
  // relu feed-forward, relative buckets past max_exact, final layer norm in the last state
  CheckFixture("t5_v1_0", 4);
}

TEST(NaiveReferenceTest, ReproducesBertAbsolute) {
  // absolute positions, no token_type_ids (row 0 of the table): last_hidden_state + hidden_state_0..2
  CheckFixture("bert_absolute", 4);
}

TEST(NaiveReferenceTest, ReproducesBertRelativeKey) {
  // relative_key: q . distance_embedding[i - j + 511] before the 1/sqrt(d) scaling; token types fed
  CheckFixture("bert_relative_key", 4);
}

TEST(NaiveReferenceTest, ReproducesMpnet) {
  // positions after padding_idx 1 (rows right-padded with 1), the bucketed relative bias shared
  // by both layers, log buckets (row of 160): last_hidden_state + hidden_state_0..2
  CheckFixture("mpnet_like", 4);
}

TEST(NaiveReferenceTest, ReproducesXlnet) {
  // Transformer-XL attention with r_w/r_r/r_s biases, the shifted position product, the
  // segment term of pairs (token types 0, 1, 2 and 3 on padding), left padding:
  // last_hidden_state + hidden_state_0..2
  CheckFixture("xlnet_like", 4);
}

// The fixture comparison is not vacuous: the same port on a perturbed input is far off.
TEST(NaiveReferenceTest, FixtureComparisonDetectsAChangedInput) {
  const std::string dir = ReferenceDir("deberta_v3_like");
  PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  batch.input_ids[100] = (batch.input_ids[100] + 1) % 1000;  // row 0, inside its 160 tokens
  auto outputs = naive::Forward(dir, batch);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok());
  const TensorView* want = (*expected)->Find("last_hidden_state");
  ASSERT_NE(want, nullptr);
  EXPECT_GT(MaxAbsDiffMasked(naive::ToNamedTensor("last_hidden_state", outputs->at("last_hidden_state")),
                             FloatData(*want), want->shape, batch),
            100 * kTolerance);
}

TEST(NaiveReferenceTest, T5RelativePositionBucketKnownValues) {
  // bidirectional, 32 buckets, max_distance 128: 16 per direction, 8 exact, then log-spaced
  EXPECT_EQ(naive::T5RelativePositionBucket(0, true, 32, 128), 0);
  EXPECT_EQ(naive::T5RelativePositionBucket(-1, true, 32, 128), 1);
  EXPECT_EQ(naive::T5RelativePositionBucket(1, true, 32, 128), 17);
  EXPECT_EQ(naive::T5RelativePositionBucket(-7, true, 32, 128), 7);
  EXPECT_EQ(naive::T5RelativePositionBucket(-8, true, 32, 128), 8);
  EXPECT_EQ(naive::T5RelativePositionBucket(8, true, 32, 128), 24);
  EXPECT_EQ(naive::T5RelativePositionBucket(-16, true, 32, 128), 10);   // 8 + log(2)/log(16)*8
  EXPECT_EQ(naive::T5RelativePositionBucket(-127, true, 32, 128), 15);
  EXPECT_EQ(naive::T5RelativePositionBucket(-128, true, 32, 128), 15);  // min(16, 15)
  EXPECT_EQ(naive::T5RelativePositionBucket(1000, true, 32, 128), 31);
  // 16 buckets, max_distance 20: 8 per direction, 4 exact
  EXPECT_EQ(naive::T5RelativePositionBucket(-4, true, 16, 20), 4);
  EXPECT_EQ(naive::T5RelativePositionBucket(-19, true, 16, 20), 7);
  EXPECT_EQ(naive::T5RelativePositionBucket(25, true, 16, 20), 15);
}

TEST(NaiveReferenceTest, MpnetRelativePositionBucketKnownValues) {
  // The argument is memory - context = j - i. Keys after the query (j > i) take 16 + the bucket
  // of m = |j - i|: m below 8 is exact, else min(15, 8 + trunc(ln(m / 8) / ln(16) * 8)).
  EXPECT_EQ(naive::MpnetRelativePositionBucket(0), 0);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-1), 1);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(1), 17);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-7), 7);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(7), 23);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-8), 8);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-11), 8);   // 8 + trunc(0.92)
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-12), 9);   // 8 + trunc(1.17)
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-16), 10);  // 8 + log(2) / log(16) * 8
  EXPECT_EQ(naive::MpnetRelativePositionBucket(16), 26);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-127), 15);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-128), 15);
  EXPECT_EQ(naive::MpnetRelativePositionBucket(-500), 15);  // beyond max_distance
  EXPECT_EQ(naive::MpnetRelativePositionBucket(500), 31);
  // The same function as T5's bidirectional bucket of j - i with 32 buckets and distance 128.
  for (int64_t r = -600; r <= 600; ++r) {
    ASSERT_EQ(naive::MpnetRelativePositionBucket(r), naive::T5RelativePositionBucket(r, true, 32, 128)) << r;
  }
}

TEST(NaiveReferenceTest, MpnetPositionIdsSkipPaddingIdx) {
  // Positions start after padding_idx 1 and count only ids other than 1; id 1 reads position 1.
  EXPECT_EQ(naive::MpnetPositionIds({0, 5, 6, 2, 1, 1}), (std::vector<int64_t>{2, 3, 4, 5, 1, 1}));
  EXPECT_EQ(naive::MpnetPositionIds({0, 1, 6, 2}), (std::vector<int64_t>{2, 1, 3, 4}));
  EXPECT_EQ(naive::MpnetPositionIds({0, 0, 0}), (std::vector<int64_t>{2, 3, 4}));
}

TEST(NaiveReferenceTest, DebertaRelativePositions) {
  // No buckets: plain q - k.
  auto plain = naive::BuildRelativePosition(40, 40, -1, 512);
  EXPECT_EQ(plain[0][39], -39);
  EXPECT_EQ(plain[39][0], 39);
  EXPECT_EQ(plain[5][5], 0);
  // Buckets 32 (mid 16), max_position 512: |q - k| <= 16 is exact, beyond it log-spaced,
  // odd-symmetric and monotone, and the farthest distance 511 lands on mid + mid - 1.
  auto buckets = naive::BuildRelativePosition(600, 600, 32, 512);
  for (int d = 0; d <= 16; ++d) {
    EXPECT_EQ(buckets[d][0], d);
    EXPECT_EQ(buckets[0][d], -d);
  }
  for (int d = 17; d < 600; ++d) {
    EXPECT_EQ(buckets[0][d], -buckets[d][0]);
    EXPECT_GE(buckets[d][0], buckets[d - 1][0]);
    EXPECT_GT(buckets[d][0], 16);
  }
  EXPECT_EQ(buckets[511][0], 31);
  EXPECT_EQ(buckets[17][0], 17);  // ceil of a small positive value: mid + 1
}

TEST(NaiveReferenceTest, ActivationsFollowAct2Fn) {
  EXPECT_NEAR(naive::Activation("gelu", 1.0), 0.8413447460685429, 1e-15);
  EXPECT_EQ(naive::Activation("gelu", 1.3), naive::Activation("gelu_python", 1.3));
  EXPECT_NEAR(naive::Activation("gelu_new", 1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(naive::Activation("gelu_pytorch_tanh", 1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(naive::Activation("gelu_accurate", 1.0), 0.8411919906082768, 1e-15);
  EXPECT_NEAR(naive::Activation("gelu_fast", 1.0), 0.8411919906, 1e-10);
  EXPECT_NEAR(naive::Activation("quick_gelu", 1.0), 1.0 / (1.0 + std::exp(-1.702)), 1e-15);
  EXPECT_EQ(naive::Activation("gelu_10", 20.0), 10.0);
  EXPECT_EQ(naive::Activation("relu", -2.0), 0.0);
  EXPECT_EQ(naive::Activation("relu2", 3.0), 9.0);
  EXPECT_EQ(naive::Activation("relu6", 7.0), 6.0);
  EXPECT_EQ(naive::Activation("leaky_relu", -2.0), -0.02);
  EXPECT_NEAR(naive::Activation("silu", 1.0), 0.7310585786300049, 1e-15);
  EXPECT_EQ(naive::Activation("swish", 0.7), naive::Activation("silu", 0.7));
  EXPECT_NEAR(naive::Activation("mish", 1.0), 0.8650983882673103, 1e-15);
  EXPECT_NEAR(naive::Activation("tanh", 0.5), std::tanh(0.5), 1e-15);
  EXPECT_NEAR(naive::Activation("sigmoid", 0.0), 0.5, 1e-15);
  EXPECT_EQ(naive::Activation("linear", -3.5), -3.5);
  EXPECT_THROW(naive::Activation("no_such_act", 1.0), std::invalid_argument);
  // The tanh approximations are distinct functions from the exact gelu.
  EXPECT_GT(std::fabs(naive::Activation("gelu_new", -2.7) - naive::Activation("gelu", -2.7)), 4e-4);
  EXPECT_GT(std::fabs(naive::Activation("gelu_fast", -3.0) - naive::Activation("gelu", -3.0)), 4e-4);
}

}  // namespace
}  // namespace relserve
