// bge-m3's sparse and ColBERT heads (server/model/heads/bge_m3_heads.h through Engine::Run) against
// FlagEmbedding's BGE-M3 model written out here in double: token weights relu(sparse_linear(h)),
// the largest per token id, the tokenizer's cls, eos, pad and unk ids and weights of 0 left out
// (_process_token_weights); ColBERT vectors colbert_linear(h) for the tokens after the first,
// each L2-normalised (colbert_embedding, _process_colbert_vecs). The heads are torch.save files
// written by LibTorch (tests/checkpoint/libtorch_archive.h) beside a tiny XLMRobertaModel with
// XLM-R's tokenizer (<s> 0, <pad> 1, </s> 2, <unk> 3); the token states are the engine's own.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/heads/bge_m3_heads.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/checkpoint/libtorch_archive.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing::NamedTensors;
using testing::ScratchDir;
using testing::WriteTorchSaveArchive;
using nlohmann::json;

constexpr double kTolerance = 1e-4;
constexpr int64_t kHidden = 32;
constexpr int64_t kColbertDim = 24;
const std::vector<int32_t> kSpecials = {0, 1, 2, 3};  // XLMRobertaTokenizer's <s>, <pad>, </s>, <unk>

std::vector<double> ToDouble(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

class BgeM3HeadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    at::manual_seed(5);
    sparse_weight_ = at::randn({1, kHidden}) * 0.3;
    sparse_bias_ = at::full({1}, -0.4f);
    colbert_weight_ = at::randn({kColbertDim, kHidden}) * 0.2;
    colbert_bias_ = at::randn({kColbertDim}) * 0.2;
  }

  // A tiny XLMRobertaModel with XLM-R's tokenizer and sentence-transformers' pooling and
  // Normalize (as bge-m3 has), and the heads' files unless told otherwise.
  std::string Create(const std::string& name, bool sparse = true, bool colbert = true) {
    const std::string dir = scratch_.Path(name);
    CreateModelOptions o;
    o.family = "xlm-roberta";
    o.hidden = kHidden;
    o.layers = 2;
    o.heads = 4;
    o.intermediate = 64;
    o.seed = 3;
    o.init_std = 0.2f;
    o.vocab_file = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/tokenizer/spm.model";
    o.sentence_transformers = true;
    auto st = CreateModelDirectory(o, dir);
    if (!st.ok()) throw std::runtime_error("CreateModelDirectory: " + std::string(st.message()));
    if (sparse) Write(dir, BgeM3Heads::kSparseFile, {{"weight", sparse_weight_}, {"bias", sparse_bias_}});
    if (colbert) Write(dir, BgeM3Heads::kColbertFile, {{"weight", colbert_weight_}, {"bias", colbert_bias_}});
    return dir;
  }

  static void Write(const std::string& dir, const char* file, const NamedTensors& tensors) {
    WriteTorchSaveArchive(JoinPath(dir, file), tensors);
  }

  // The engine, loaded beside its tokenizer (whose special ids it keeps) unless `tokenizer` is false.
  static std::unique_ptr<Engine> Load(const std::string& dir, EngineOptions options = testing::TestEngineOptions(),
                                      bool tokenizer = true) {
    auto loaded = LoadModel(dir, options, tokenizer);
    if (!loaded.ok()) throw std::runtime_error("LoadModel: " + std::string(loaded.status().message()));
    return std::move(loaded->engine);
  }

  static std::vector<SequenceOutput> Run(Engine& engine, const std::vector<SequenceInput>& batch, uint32_t outputs) {
    auto out = engine.Run(batch, outputs);
    if (!out.ok()) throw std::runtime_error("Run: " + std::string(out.status().message()));
    return std::move(*out);
  }

  // relu(w . h + b) of each token state, in double.
  std::vector<double> TokenWeights(const SequenceOutput& out) const {
    const std::vector<double> w = ToDouble(sparse_weight_);
    const double b = sparse_bias_.item<double>();
    std::vector<double> weights(out.num_tokens);
    for (int t = 0; t < out.num_tokens; ++t) {
      double s = b;
      for (int64_t k = 0; k < kHidden; ++k) s += w[k] * out.token_states[t * kHidden + k];
      weights[t] = std::max(0.0, s);
    }
    return weights;
  }

  // _process_token_weights in double: id -> largest weight, specials and zeros left out.
  std::map<int32_t, double> Lexical(const SequenceInput& in, const SequenceOutput& out) const {
    const std::vector<double> weights = TokenWeights(out);
    std::map<int32_t, double> result;
    for (size_t t = 0; t < in.input_ids.size(); ++t) {
      const int32_t id = in.input_ids[t];
      if (std::count(kSpecials.begin(), kSpecials.end(), id) > 0 || !(weights[t] > 0)) continue;
      result[id] = std::max(result[id], weights[t]);
    }
    return result;
  }

  // The largest difference between the engine's weights and `want`, over the ids of either
  // (an id only one of them lists counts as 0 in the other).
  static double LexicalDiff(const std::vector<std::pair<int32_t, float>>& got, const std::map<int32_t, double>& want) {
    std::map<int32_t, double> all;
    int32_t last = -1;
    for (const auto& [id, w] : got) {
      EXPECT_GT(id, last) << "ids must ascend";
      EXPECT_GT(w, 0.0f);
      EXPECT_EQ(std::count(kSpecials.begin(), kSpecials.end(), id), 0) << "special id " << id;
      last = id;
      all[id] = w;
    }
    double d = 0;
    for (const auto& [id, w] : want) {
      d = std::max(d, testing::AbsDiff(all[id], w));
      all.erase(id);
    }
    for (const auto& [id, w] : all) d = std::max(d, std::abs(w));
    return d;
  }

  // FlagEmbedding's colbert vectors in double: tokens 1 .. n-1, normalised.
  std::vector<double> Colbert(const SequenceOutput& out) const {
    const std::vector<double> w = ToDouble(colbert_weight_), b = ToDouble(colbert_bias_);
    std::vector<double> vectors;
    for (int t = 1; t < out.num_tokens; ++t) {
      std::vector<double> v(kColbertDim);
      double norm = 0;
      for (int64_t d = 0; d < kColbertDim; ++d) {
        double s = b[d];
        for (int64_t k = 0; k < kHidden; ++k) s += w[d * kHidden + k] * out.token_states[t * kHidden + k];
        v[d] = s;
        norm += s * s;
      }
      for (double x : v) vectors.push_back(x / std::max(std::sqrt(norm), 1e-12));
    }
    return vectors;
  }

  at::Tensor sparse_weight_, sparse_bias_, colbert_weight_, colbert_bias_;
  ScratchDir scratch_;
  // <s> ... </s> as the tokenizer frames a text; id 10 three times, <unk> and <pad> inside, a
  // lone <s>, and lengths that pad.
  const std::vector<SequenceInput> batch_ = {
      {{0, 10, 11, 10, 3, 12, 10, 1, 13, 14, 15, 16, 17, 18, 2}, {}, 0},
      {{0, 500, 501, 502, 2}, {}, 0},
      {{0}, {}, 0},
      {{0, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 2}, {}, 0},
  };
};

TEST_F(BgeM3HeadsTest, SparseAndColbertMatchFlagEmbeddingInDouble) {
  const std::string dir = Create("bge_m3");
  auto loaded = LoadModel(dir, testing::TestEngineOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::unique_ptr<Engine>& engine = loaded->engine;
  const ModelInfo& info = engine->info();
  EXPECT_EQ(info.architecture, "XLMRobertaModel");
  EXPECT_EQ(info.sparse_kind, "bge-m3");
  EXPECT_EQ(info.multi_vector_kind, "colbert");
  EXPECT_EQ(info.multi_vector_dim, kColbertDim);
  // Both heads on the packed float32 GEMM wherever the encoder's projections are (the answers
  // below are then its).
  EXPECT_EQ(info.packed_float32_heads, info.packed_float32_max_tokens != 0 ? 2 : 0);
  EXPECT_THAT(engine->heads_description(), HasSubstr("sparse_linear.pt"));
  EXPECT_THAT(engine->heads_description(), HasSubstr("colbert_linear.pt"));
  ASSERT_NE(loaded->tokenizer, nullptr);
  EXPECT_EQ(loaded->tokenizer->cls_id(), 0);
  EXPECT_EQ(loaded->tokenizer->pad_id(), 1);
  EXPECT_EQ(loaded->tokenizer->eos_id(), 2);
  EXPECT_EQ(loaded->tokenizer->unk_id(), 3);
  EXPECT_TRUE(info.has_tokenizer);

  const auto out = Run(*engine, batch_, kOutputTokenStates | kOutputSparse | kOutputMultiVector | kOutputPooled);
  double sparse_worst = 0, colbert_worst = 0;
  size_t listed = 0, dropped_zeros = 0;
  for (size_t b = 0; b < batch_.size(); ++b) {
    const std::map<int32_t, double> want = Lexical(batch_[b], out[b]);
    const double d = LexicalDiff(out[b].sparse, want);
    EXPECT_LE(d, kTolerance) << "sequence " << b;
    sparse_worst = std::max(sparse_worst, d);
    listed += want.size();
    for (double w : TokenWeights(out[b])) dropped_zeros += w == 0 ? 1 : 0;

    EXPECT_EQ(out[b].num_vectors, out[b].num_tokens - 1) << "sequence " << b;
    const double c = MaxAbsDiff(out[b].multi_vector, Colbert(out[b]));
    EXPECT_LE(c, kTolerance) << "sequence " << b;
    colbert_worst = std::max(colbert_worst, c);
  }
  std::cout << "bge-m3 sparse vs double reference, max |diff| " << sparse_worst << "; colbert " << colbert_worst
            << "\n";
  // The test sees both kinds of token: weights above 0, listed, and relu's zeros, left out; and
  // special tokens whose weights are above 0, left out all the same.
  EXPECT_GT(listed, 5u);
  EXPECT_GT(dropped_zeros, 5u);
  for (int32_t special : kSpecials) {
    bool positive = false;
    for (size_t b = 0; b < batch_.size(); ++b) {
      const std::vector<double> weights = TokenWeights(out[b]);
      for (size_t t = 0; t < weights.size(); ++t) positive = positive || (batch_[b].input_ids[t] == special && weights[t] > 0);
    }
    EXPECT_TRUE(positive) << "special id " << special << " has no token with a weight above 0";
  }
  // Id 10 occurs three times with different weights, and its entry is the largest of them.
  const std::vector<double> weights = TokenWeights(out[0]);
  const double largest = std::max({weights[1], weights[3], weights[6]});
  ASSERT_GT(largest, 0);
  EXPECT_GT(largest - std::min({weights[1], weights[3], weights[6]}), 1e-3);
  auto ten = std::find_if(out[0].sparse.begin(), out[0].sparse.end(), [](const auto& p) { return p.first == 10; });
  ASSERT_NE(ten, out[0].sparse.end());
  EXPECT_NEAR(ten->second, largest, kTolerance);
  // A lone <s> has no ColBERT vector and, being special, no lexical weight.
  EXPECT_EQ(out[2].num_vectors, 0);
  EXPECT_TRUE(out[2].multi_vector.empty());
  EXPECT_TRUE(out[2].sparse.empty());

  // Each sequence alone gives what it gets in the padded batch.
  for (size_t b = 0; b < batch_.size(); ++b) {
    const auto alone = Run(*engine, {batch_[b]}, kOutputSparse | kOutputMultiVector);
    ASSERT_EQ(alone[0].sparse.size(), out[b].sparse.size()) << "sequence " << b;
    for (size_t i = 0; i < alone[0].sparse.size(); ++i) {
      EXPECT_EQ(alone[0].sparse[i].first, out[b].sparse[i].first);
      EXPECT_NEAR(alone[0].sparse[i].second, out[b].sparse[i].second, 1e-5);
    }
    ASSERT_EQ(alone[0].multi_vector.size(), out[b].multi_vector.size());
    for (size_t i = 0; i < alone[0].multi_vector.size(); ++i) {
      EXPECT_NEAR(alone[0].multi_vector[i], out[b].multi_vector[i], 1e-5);
    }
  }

  // The dense embedding stays the model's pooling: the same without the heads' files.
  auto plain = Load(Create("plain", false, false));
  EXPECT_EQ(plain->info().sparse_kind, "");
  EXPECT_EQ(plain->info().multi_vector_kind, "");
  EXPECT_EQ(plain->info().multi_vector_dim, 0);
  const auto plain_out = Run(*plain, batch_, kOutputPooled);
  for (size_t b = 0; b < batch_.size(); ++b) EXPECT_EQ(plain_out[b].pooled, out[b].pooled) << "sequence " << b;
}

TEST_F(BgeM3HeadsTest, MissingHeadsAreRefusedNamingWhatIsMissing) {
  auto plain = Load(Create("plain", false, false));
  auto refused = plain->Run(batch_, kOutputSparse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("XLMRobertaModel"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sparse_linear.pt"));
  refused = plain->Run(batch_, kOutputMultiVector);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("XLMRobertaModel"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("colbert_linear.pt"));
  EXPECT_TRUE(plain->Run(batch_, kOutputPooled).ok());

  // Either file alone serves its own output only.
  auto colbert_only = Load(Create("colbert_only", false, true));
  EXPECT_EQ(colbert_only->info().sparse_kind, "");
  EXPECT_EQ(colbert_only->info().multi_vector_kind, "colbert");
  EXPECT_EQ(colbert_only->Run(batch_, kOutputSparse).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(colbert_only->Run(batch_, kOutputMultiVector).ok());
  auto sparse_only = Load(Create("sparse_only", true, false));
  EXPECT_EQ(sparse_only->info().sparse_kind, "bge-m3");
  EXPECT_EQ(sparse_only->Run(batch_, kOutputMultiVector).status().code(), absl::StatusCode::kFailedPrecondition);

  // Without a tokenizer the special ids are unknown: no sparse output, and the refusal says why.
  auto ids_only = Load(Create("ids_only"), testing::TestEngineOptions(), /*tokenizer=*/false);
  EXPECT_EQ(ids_only->info().sparse_kind, "");
  refused = ids_only->Run(batch_, kOutputSparse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("tokenizer"));
  EXPECT_TRUE(ids_only->Run(batch_, kOutputMultiVector).ok());
}

TEST_F(BgeM3HeadsTest, MalformedHeadFilesFailTheLoadNamingFileAndTensor) {
  struct Broken {
    const char* name;
    const char* file;
    NamedTensors tensors;
    const char* tensor;  // named in the error
  };
  const std::vector<Broken> broken = {
      {"sparse_rows", BgeM3Heads::kSparseFile, {{"weight", at::zeros({2, kHidden})}, {"bias", at::zeros({2})}}, "weight"},
      {"sparse_width", BgeM3Heads::kSparseFile, {{"weight", at::zeros({1, kHidden + 1})}, {"bias", at::zeros({1})}}, "weight"},
      {"sparse_no_bias", BgeM3Heads::kSparseFile, {{"weight", at::zeros({1, kHidden})}}, "bias"},
      {"sparse_extra", BgeM3Heads::kSparseFile,
       {{"weight", at::zeros({1, kHidden})}, {"bias", at::zeros({1})}, {"scale", at::zeros({1})}}, "scale"},
      {"colbert_width", BgeM3Heads::kColbertFile, {{"weight", at::zeros({8, kHidden - 1})}, {"bias", at::zeros({8})}}, "weight"},
      {"colbert_bias", BgeM3Heads::kColbertFile, {{"weight", at::zeros({8, kHidden})}, {"bias", at::zeros({9})}}, "bias"},
      {"colbert_no_weight", BgeM3Heads::kColbertFile, {{"bias", at::zeros({8})}}, "weight"},
      {"colbert_vector", BgeM3Heads::kColbertFile, {{"weight", at::zeros({kHidden})}, {"bias", at::zeros({1})}}, "weight"},
  };
  for (const Broken& b : broken) {
    const std::string dir = Create(b.name, false, false);
    Write(dir, b.file, b.tensors);
    const absl::Status status = Engine::Load(dir, testing::TestEngineOptions()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << b.name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(JoinPath(dir, b.file))) << b.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(std::string("\"") + b.tensor + "\"")) << b.name;
  }
  // A file that is not a torch.save archive at all is refused naming it.
  const std::string dir = Create("garbage", false, false);
  ASSERT_TRUE(WriteStringToFile(JoinPath(dir, BgeM3Heads::kSparseFile), "not a zip archive").ok());
  const absl::Status status = Engine::Load(dir, testing::TestEngineOptions()).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr(JoinPath(dir, BgeM3Heads::kSparseFile)));
  // D = H, as bge-m3 has it, loads.
  const std::string square = Create("square", false, false);
  Write(square, BgeM3Heads::kColbertFile, {{"weight", at::randn({kHidden, kHidden})}, {"bias", at::zeros({kHidden})}});
  EXPECT_EQ(Load(square)->info().multi_vector_dim, kHidden);
}

TEST(LexicalWeightsTest, LargestPerIdWithoutDroppedIdsOrZeros) {
  const std::vector<int32_t> ids = {0, 7, 5, 7, 9, 5, 3, 11, 2};
  const std::vector<float> weights = {0.9f, 0.2f, 0.1f, 0.5f, 0.0f, 0.05f, 0.8f, 0.3f, 0.7f};
  EXPECT_THAT(LexicalWeights(ids, weights.data(), {0, 2, 3}),
              ElementsAre(Pair(5, 0.1f), Pair(7, 0.5f), Pair(11, 0.3f)));
  EXPECT_THAT(LexicalWeights(ids, weights.data(), {}),
              ElementsAre(Pair(0, 0.9f), Pair(2, 0.7f), Pair(3, 0.8f), Pair(5, 0.1f), Pair(7, 0.5f), Pair(11, 0.3f)));
  EXPECT_TRUE(LexicalWeights({}, nullptr, {}).empty());
}

}  // namespace
}  // namespace relserve
