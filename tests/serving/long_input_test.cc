// Long inputs embedded whole (long_input.h): windows cut from the reference SentencePiece
// tokenizer's encoding, their combination, and Embed with whole_input, sparse and multi-vector
// outputs over a fake backend behind a real batcher.
#include "server/serving/long_input.h"

#include <cmath>
#include <future>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/model_batcher.h"
#include "server/serving/encoder_serving.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/serving/fake_backend.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kMaxLength = 16;
constexpr int kCls = 1, kSep = 2;  // the reference tokenizer's DeBERTa-v3 ids

std::string LongText(int words) {
  std::string t;
  for (int i = 0; i < words; ++i) t += "token" + std::to_string(i % 7) + " and more ";
  return t;
}

class LongInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = Tokenizer::LoadModelFile(RELSERVE_TEST_DATA_DIR "/reference/tokenizer/spm.model",
                                              TokenizerFamily::kDeberta, kMaxLength);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  FakeBackend backend_{{}, ""};
};

TEST_F(LongInputTest, WindowsCoverTheTextOnceEachWithTheTemplateAroundIt) {
  const std::string text = LongText(20);
  auto raw = tokenizer_->EncodeRaw(text);
  ASSERT_TRUE(raw.ok());
  ASSERT_GT(raw->size(), 3u * kMaxLength);
  auto windows = EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 0, 0);
  ASSERT_TRUE(windows.ok()) << windows.status();
  const size_t room = kMaxLength - 2;
  EXPECT_EQ(windows->size(), (raw->size() + room - 1) / room);
  std::vector<int32_t> joined;
  for (const EncodedInput& w : *windows) {
    const auto& ids = w.sequence.input_ids;
    ASSERT_LE(ids.size(), static_cast<size_t>(kMaxLength));
    EXPECT_EQ(ids.front(), kCls);
    EXPECT_EQ(ids.back(), kSep);
    EXPECT_EQ(w.offsets.size(), ids.size());
    joined.insert(joined.end(), ids.begin() + 1, ids.end() - 1);
  }
  EXPECT_EQ(joined, *raw);
  // Every window but the last is full.
  for (size_t i = 0; i + 1 < windows->size(); ++i) EXPECT_EQ((*windows)[i].sequence.input_ids.size(), 16u);
}

TEST_F(LongInputTest, OverlapRepeatsTheEndOfTheWindowBefore) {
  const std::string text = LongText(12);
  auto raw = tokenizer_->EncodeRaw(text);
  auto windows = EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 4, 0);
  ASSERT_TRUE(windows.ok()) << windows.status();
  ASSERT_GE(windows->size(), 3u);
  for (size_t i = 1; i < windows->size(); ++i) {
    const auto& prev = (*windows)[i - 1].sequence.input_ids;
    const auto& cur = (*windows)[i].sequence.input_ids;
    // The last 4 text tokens of the window before start this one.
    EXPECT_TRUE(std::equal(prev.end() - 5, prev.end() - 1, cur.begin() + 1)) << "window " << i;
  }
  // Steps of 14 - 4 = 10 text tokens: the first tokens of each window are the text's tokens 0, 10, 20, ...
  for (size_t i = 0; i < windows->size(); ++i) EXPECT_EQ((*windows)[i].sequence.input_ids[1], (*raw)[i * 10]);
  auto too_much = EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 8, 0);
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_much.status().message()), HasSubstr("window_overlap 8 is outside [0, 7]"));
}

TEST_F(LongInputTest, APromptStartsEveryWindow) {
  const std::string prompt = "query: ";
  const std::string text = prompt + LongText(10);
  auto prompt_ids = tokenizer_->EncodeRaw("query:");
  ASSERT_TRUE(prompt_ids.ok());
  auto windows = EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 0,
                                   static_cast<int>(prompt.size()));
  ASSERT_TRUE(windows.ok()) << windows.status();
  ASSERT_GE(windows->size(), 2u);
  for (const EncodedInput& w : *windows) {
    const auto& ids = w.sequence.input_ids;
    EXPECT_TRUE(std::equal(prompt_ids->begin(), prompt_ids->end(), ids.begin() + 1));
  }
}

TEST_F(LongInputTest, AShortTextIsOneWindowAsEncodeGivesIt) {
  auto windows = EncodeTextWindows("a short text", "inputs[0]", *tokenizer_, backend_, kMaxLength, 0, 0);
  ASSERT_TRUE(windows.ok());
  ASSERT_EQ(windows->size(), 1u);
  auto enc = tokenizer_->Encode("a short text");
  EXPECT_EQ((*windows)[0].sequence.input_ids, enc->input_ids);
  // A window too small for any text token beside the template is refused.
  auto none = EncodeTextWindows(LongText(4), "inputs[2]", *tokenizer_, backend_, 2, 0, 0);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("inputs[2].text: the model's maximum of 2 tokens"));
}

TEST(CombineWindowsTest, WeightedMean) {
  const std::vector<float> a = {1, 2}, b = {3, 6};
  EXPECT_THAT(CombineWindows({&a, &b}, {1, 3}), ElementsAre(2.5f, 5.0f));
}

TEST(MergeSparseMaxTest, LargestWeightPerIdIdsAscending) {
  const std::vector<std::pair<int32_t, float>> a = {{3, 0.5f}, {7, 0.1f}}, b = {{2, 0.2f}, {7, 0.4f}};
  EXPECT_THAT(MergeSparseMax({&a, &b}),
              ElementsAre(std::pair<int32_t, float>{2, 0.2f}, std::pair<int32_t, float>{3, 0.5f},
                          std::pair<int32_t, float>{7, 0.4f}));
}

class WholeInputServingTest : public LongInputTest {
 protected:
  void SetUp() override {
    LongInputTest::SetUp();
    auto normalizing = std::make_unique<FakeBackend>(std::vector<std::string>{}, "");
    normalizing->set_normalizes(true);
    normalizing->set_heads(/*sparse=*/true, /*multi_vector=*/true);
    harness_.Add("plain", std::make_unique<FakeBackend>(std::vector<std::string>{}, ""), tokenizer_.get(), kMaxLength);
    harness_.Add("hybrid", std::move(normalizing), tokenizer_.get(), kMaxLength);
    ServingLimits limits;
    limits.max_windows_per_request = 12;
    limits.max_response_bytes = 2000;
    limits.auto_truncate = false;  // --auto-truncate false: an over-long text is refused unless whole
    harness_.Serve(limits);
  }
  absl::StatusOr<EmbedResult> Embed(const EmbedRequest& request) { return harness_.Call(&EncoderServing::Embed, request); }

  ServingHarness harness_;
};

TEST_F(WholeInputServingTest, WindowsPooledVectorsAreAveragedByTokenCountThenNormalised) {
  const std::string text = LongText(8);
  auto windows = EncodeTextWindows(text, "inputs[0]", *tokenizer_, harness_.backend(0), kMaxLength, 0, 0);
  ASSERT_TRUE(windows.ok());
  ASSERT_GE(windows->size(), 2u);
  // The fake pools [sum of ids, count, 1, 2]: the token-weighted mean over the windows.
  double total = 0;
  std::vector<double> want(4, 0.0);
  int64_t tokens = 0;
  for (const EncodedInput& w : *windows) {
    double sum = 0;
    for (int32_t id : w.sequence.input_ids) sum += id;
    const double n = static_cast<double>(w.sequence.input_ids.size());
    const double v[4] = {sum, n, 1, 2};
    for (int j = 0; j < 4; ++j) want[j] += n * v[j];
    total += n;
    tokens += static_cast<int64_t>(n);
  }
  for (double& x : want) x /= total;

  EmbedRequest req;
  req.model = "plain";
  req.inputs = {Input::Text(text), Input::Text("short")};
  auto refused = Embed(req);  // whole_input unset, the server's default off, --auto-truncate false
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  req.whole_input = true;
  auto r = Embed(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const Embedding& e = r->embeddings[0];
  EXPECT_EQ(e.windows, static_cast<int32_t>(windows->size()));
  EXPECT_EQ(e.num_tokens, tokens);
  EXPECT_FALSE(e.truncated);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(e.values[j], want[j], 1e-4 * std::abs(want[j])) << j;
  EXPECT_EQ(r->embeddings[1].windows, 1);
  EXPECT_EQ(r->usage.sequences, static_cast<int32_t>(windows->size()) + 1);
  EXPECT_EQ(r->usage.tokens, tokens + r->embeddings[1].num_tokens);

  // A model with a Normalize module: the mean of the unnormalised vectors, then normalised.
  req.model = "hybrid";
  auto n = Embed(req);
  ASSERT_TRUE(n.ok()) << n.status();
  double norm = 0;
  for (double x : want) norm += x * x;
  norm = std::sqrt(norm);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(n->embeddings[0].values[j], want[j] / norm, 1e-5) << j;
  // The metrics count the windows.
  EXPECT_THAT(harness_.metrics().Render(), HasSubstr("relserve_input_windows_total{model=\"hybrid\"} " +
                                           std::to_string(windows->size())));
}

TEST_F(WholeInputServingTest, SparseAndMultiVectorOutputsComeWithTheDenseOne) {
  EmbedRequest req;
  req.model = "hybrid";
  req.inputs = {Input::Tokens({1, 5, 9, 5, 2})};
  req.return_sparse = true;
  req.return_multi_vector = true;
  auto r = Embed(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const Embedding& e = r->embeddings[0];
  EXPECT_EQ(e.values.size(), 4u);
  EXPECT_THAT(e.sparse, ElementsAre(std::pair<int32_t, float>{2, 0.02f}, std::pair<int32_t, float>{5, 0.05f},
                                    std::pair<int32_t, float>{9, 0.09f}));
  EXPECT_EQ(e.multi_vector_dim, 2);
  EXPECT_EQ(e.multi_vector_count, 4);
  EXPECT_THAT(e.multi_vector, ElementsAre(5, 1, 9, 1, 5, 1, 2, 1));

  // Windows of a long text: the sparse vector is the largest weight per id over all windows,
  // the token vectors every window's in order.
  req.inputs = {Input::Text(LongText(6))};
  req.whole_input = true;
  auto w = Embed(req);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_GT(w->embeddings[0].windows, 1);
  auto raw = tokenizer_->EncodeRaw(LongText(6));
  std::set<int32_t> ids(raw->begin(), raw->end());
  ids.insert(kSep);
  std::vector<std::pair<int32_t, float>> want;
  for (int32_t id : ids) {
    if (id > 1) want.emplace_back(id, static_cast<float>(id) / 100);
  }
  EXPECT_EQ(w->embeddings[0].sparse, want);
  EXPECT_EQ(w->embeddings[0].multi_vector_count, static_cast<int32_t>(raw->size()) + w->embeddings[0].windows);
}

TEST_F(WholeInputServingTest, OutputsAModelHasNoHeadForAreRefusedBeforeQueueing) {
  EmbedRequest req;
  req.model = "plain";
  req.inputs = {Input::Tokens({1, 5, 2})};
  req.return_sparse = true;
  auto sparse = Embed(req);
  EXPECT_EQ(sparse.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sparse.status().message()), HasSubstr("model plain (FakeModel) has no sparse head"));
  req.return_sparse = false;
  req.return_multi_vector = true;
  EXPECT_EQ(Embed(req).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(harness_.backend(0).runs(), 0);
  // Multi-vector answers that could not fit in one response are refused before computing.
  req.model = "hybrid";
  req.return_multi_vector = true;
  req.inputs = {Input::Text(LongText(14))};  // about 5 windows, 80 tokens of 2 floats: over 2000 bytes
  req.whole_input = true;
  auto large = Embed(req);
  EXPECT_EQ(large.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(large.status().message()), HasSubstr("multi-vector token vectors of these inputs"));
  EXPECT_EQ(harness_.backend(1).runs(), 0);
  req.model = "plain";
  // Too many windows for one request.
  req.return_multi_vector = false;
  req.inputs = {Input::Text(LongText(40))};
  req.whole_input = true;
  auto many = Embed(req);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(many.status().message()), HasSubstr("more than 12 windows"));
  EXPECT_EQ(harness_.backend(0).runs(), 0);
}

}  // namespace
}  // namespace relserve
