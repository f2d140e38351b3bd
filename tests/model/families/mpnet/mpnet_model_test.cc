// MpnetModel (server/model/families/mpnet) on its own, without the engine: its position ids and
// relative buckets against the float64 port of modeling_mpnet.py (naive_mpnet_reference.h), the
// whole forward pass against transformers 4.40.2 (tests/data/reference/mpnet_like), padding
// invariance, and load errors that name the config key or tensor.
#include "server/model/families/mpnet/mpnet_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <cstring>
#include <map>
#include <memory>

#include "gtest/gtest.h"
#include "server/model/layers/biased_attention.h"
#include "server/model/families/family_registry.h"
#include "server/model/families/mpnet/mpnet_family.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/safetensors/safetensors_file.h"
#include "tests/model/model_dir_builder.h"
#include "tests/model/families/mpnet/naive_mpnet_reference.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using testing::ReadReferenceInputs;
using testing::ReferenceDir;

constexpr double kTolerance = 1e-4;

struct Loaded {
  std::unique_ptr<MpnetModel> model;
  std::vector<std::string> unused;
};

absl::StatusOr<Loaded> LoadModel(const std::string& dir) {
  auto config = LoadModelConfig(dir);
  if (!config.ok()) return config.status();
  if (config->family != &MpnetFamily()) return absl::InvalidArgumentError("not an MPNet config");
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir);
  if (!checkpoint.ok()) return checkpoint.status();
  c10::InferenceMode guard;
  WeightLoader weights(**checkpoint, at::kFloat);
  auto model = MpnetModel::Load(*config, weights);
  if (!model.ok()) return model.status();
  return Loaded{std::move(*model), weights.Unused(MpnetFamily().IgnoredPrefixes(*config))};
}

EncoderInputs ToInputs(const PaddedBatch& b) {
  EncoderInputs in;
  in.input_ids = at::tensor(b.input_ids, at::kLong).view({b.batch, b.length});
  in.attention_mask = at::tensor(b.attention_mask, at::kLong).view({b.batch, b.length});
  in.has_padding = in.attention_mask.eq(0).any().item<bool>();
  return in;
}

// The rows [b, 0:n) of a [batch, L, H] tensor.
at::Tensor Row(const at::Tensor& t, int64_t b, int64_t n) { return t.select(0, b).narrow(0, 0, n); }

TEST(MpnetModelTest, PositionIdsFollowCreatePositionIdsFromInputIds) {
  // Id 1 (padding_idx) anywhere reads position 1 and is not counted; the others count from 2.
  const std::vector<int64_t> ids = {0, 7, 1, 9, 2, 1, 1, 0, 0, 0, 5, 2, 3, 1, 4, 1, 1, 1};
  c10::InferenceMode guard;
  at::Tensor got = MpnetPositionIds(at::tensor(ids, at::kLong).view({3, 6}));
  for (int64_t b = 0; b < 3; ++b) {
    const std::vector<int64_t> row(ids.begin() + b * 6, ids.begin() + (b + 1) * 6);
    const std::vector<int64_t> want = naive::MpnetPositionIds(row);
    for (int64_t t = 0; t < 6; ++t) EXPECT_EQ(got[b][t].item<int64_t>(), want[t]) << b << ", " << t;
  }
  EXPECT_EQ(got[0][3].item<int64_t>(), 4);  // 0, 7, (1), 9: the third counted token
}

TEST(MpnetModelTest, RelativeBucketsFollowRelativePositionBucket) {
  // Past the exact window (8), the log buckets and max_distance (128): every offset of 600.
  constexpr int64_t kLength = 600;
  c10::InferenceMode guard;
  at::Tensor buckets = MpnetRelativePositionBucket(kLength).contiguous();
  ASSERT_EQ(buckets.sizes(), (std::vector<int64_t>{kLength, kLength}));
  const int64_t* p = buckets.data_ptr<int64_t>();
  for (int64_t i = 0; i < kLength; ++i) {
    for (int64_t j = 0; j < kLength; ++j) {
      ASSERT_EQ(p[i * kLength + j], naive::MpnetRelativePositionBucket(j - i)) << i << ", " << j;
    }
  }
}

// `biased`: the attention path of GPUs, on the CPU (AttentionKernels::device_path_on_cpu).
void CheckFixture(const std::string& label, bool biased = false) {
  const std::string dir = ReferenceDir("mpnet_like");
  auto loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->unused.empty()) << loaded->unused.front();
  const PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  c10::InferenceMode guard;
  EncoderInputs in = ToInputs(batch);
  in.attention.device_path_on_cpu = biased;
  EncoderOutputs out = loaded->model->Forward(in, /*all_hidden_states=*/true);
  ASSERT_EQ(out.hidden_states.size(), 3u);
  std::map<std::string, at::Tensor> got = {{"last_hidden_state", out.last_hidden_state}};
  for (size_t i = 0; i < out.hidden_states.size(); ++i) got["hidden_state_" + std::to_string(i)] = out.hidden_states[i];
  EXPECT_FALSE(out.logits.defined());

  auto expected = SafetensorsFile::Open(dir + "/expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status();
  int compared = 0;
  for (const TensorView& want : (*expected)->tensors()) {
    ASSERT_EQ(got.count(want.name), 1u) << want.name;
    std::vector<float> data(want.numel());
    std::memcpy(data.data(), want.data, want.nbytes);
    const at::Tensor& t = got[want.name];
    NamedTensor actual{want.name, t.sizes().vec(), std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel())};
    EXPECT_LE(testing::MaxAbsDiffMasked(actual, data, want.shape, batch), kTolerance) << label << ": " << want.name;
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

TEST(MpnetModelTest, MatchesTransformersOnTheReferenceFixture) { CheckFixture("CPU kernel"); }

TEST(MpnetModelTest, MatchesTransformersThroughTheBiasedAttentionPath) {
  // The attention of GPUs (the bias expanded to [heads, L, L], biased_attention.h), on the CPU.
  CheckFixture("biased attention", /*biased=*/true);
}

TEST(MpnetModelTest, RowsAloneEqualRowsInAPaddedBatch) {
  const std::string dir = ReferenceDir("mpnet_like");
  auto loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  c10::InferenceMode guard;
  const EncoderInputs in = ToInputs(batch);
  const at::Tensor together = loaded->model->Forward(in, false).last_hidden_state;
  // Padded with another id than padding_idx: the padded tokens then take positions too.
  EncoderInputs zero_padded = in;
  zero_padded.input_ids = in.input_ids.masked_fill(in.attention_mask.eq(0), 0);
  const at::Tensor zero = loaded->model->Forward(zero_padded, false).last_hidden_state;
  for (int64_t b = 0; b < batch.batch; ++b) {
    const int64_t n = in.attention_mask[b].sum().item<int64_t>();
    EncoderInputs alone;
    alone.input_ids = in.input_ids.narrow(0, b, 1).narrow(1, 0, n).contiguous();
    alone.attention_mask = in.attention_mask.narrow(0, b, 1).narrow(1, 0, n).contiguous();
    alone.has_padding = false;
    const at::Tensor single = loaded->model->Forward(alone, false).last_hidden_state;
    EXPECT_LE(MaxAbsDiff(Row(single, 0, n), Row(together, b, n)), 1e-5) << "row " << b;
    EXPECT_LE(MaxAbsDiff(Row(zero, b, n), Row(together, b, n)), 1e-5) << "row " << b << ", padded with 0";
  }
}

TEST(MpnetModelTest, TokenTypeIdsAreIgnored) {
  const std::string dir = ReferenceDir("mpnet_like");
  auto loaded = LoadModel(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  c10::InferenceMode guard;
  EncoderInputs in = ToInputs(ReadReferenceInputs(dir + "/inputs.json"));
  const at::Tensor plain = loaded->model->Forward(in, false).last_hidden_state;
  in.token_type_ids = at::ones_like(in.input_ids);
  EXPECT_EQ(MaxAbsDiff(loaded->model->Forward(in, false).last_hidden_state, plain), 0.0);
}

TEST(MpnetModelTest, ConfigSizesThatDisagreeWithTheCheckpointNameTheKey) {
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* tensor;
  };
  const std::vector<Case> cases = {
      {"hidden_size", 32, "embeddings.LayerNorm.weight"},
      {"vocab_size", 999, "embeddings.word_embeddings.weight"},
      {"max_position_embeddings", 512, "embeddings.position_embeddings.weight"},
      {"num_hidden_layers", 3, "encoder.layer."},
      {"relative_attention_num_buckets", 40, "encoder.relative_attention_bias.weight"},
      {"num_attention_heads", 6, "encoder.relative_attention_bias.weight"},
      {"intermediate_size", 64, "encoder.layer.0.intermediate.dense.weight"},
  };
  for (const Case& c : cases) {
    testing::ModelDirBuilder dir(ReferenceDir("mpnet_like"));
    dir.config()[c.key] = c.value;
    dir.Write();
    auto loaded = LoadModel(dir.dir());
    ASSERT_FALSE(loaded.ok()) << c.key;
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_NE(loaded.status().message().find(std::string("\"") + c.key + "\""), std::string::npos) << loaded.status();
    if (std::string(c.key) != "num_hidden_layers") {
      EXPECT_NE(loaded.status().message().find(c.tensor), std::string::npos) << loaded.status();
    }
  }
}

TEST(MpnetModelTest, MissingTensorIsNotFoundWithItsShape) {
  testing::ModelDirBuilder dir(ReferenceDir("mpnet_like"));
  dir.tensors().erase("encoder.layer.1.attention.attn.o.bias");
  dir.Write();
  auto loaded = LoadModel(dir.dir());
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(loaded.status().message().find("encoder.layer.1.attention.attn.o.bias"), std::string::npos)
      << loaded.status();
  EXPECT_NE(loaded.status().message().find("[48]"), std::string::npos) << loaded.status();
}

}  // namespace
}  // namespace relserve
