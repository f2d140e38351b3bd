// Long inputs embedded whole (long_input.h): windows cut from the reference SentencePiece
// tokenizer's encoding, their combination, and Embed with whole_input, sparse and multi-vector
// outputs over a fake backend behind a real batcher.
#include "server/serving/long_input.h"

#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <algorithm>

#include "absl/strings/str_cat.h"
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

// An overlap the model's windows cannot take is refused even when the text fits one window
// (it would be refused as soon as a longer text came).
TEST_F(LongInputTest, ABadOverlapIsRefusedForShortTextsToo) {
  auto short_text = EncodeTextWindows("a short text", "inputs[0]", *tokenizer_, backend_, kMaxLength, 8, 0);
  EXPECT_EQ(short_text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_text.status().message()), HasSubstr("window_overlap 8 is outside [0, 7]"));
  auto negative = EncodeTextWindows("a short text", "inputs[0]", *tokenizer_, backend_, kMaxLength, -1, 0);
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("window_overlap -1 is negative"));
  EXPECT_TRUE(EncodeTextWindows("a short text", "inputs[0]", *tokenizer_, backend_, kMaxLength, 7, 0).ok());
}

// More windows than the request may compute: refused naming the flag and the count the text
// needs, counted exactly where the text was read whole and as a bound where reading stopped.
TEST_F(LongInputTest, TooManyWindowsNameTheLimitAndTheCount) {
  const std::string text = LongText(20);
  auto all = EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 0, 0);
  ASSERT_TRUE(all.ok());
  const int needed = static_cast<int>(all->size());
  EXPECT_TRUE(EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 0, 0, needed).ok());
  auto refused = EncodeTextWindows(text, "inputs[0]", *tokenizer_, backend_, kMaxLength, 0, 0, needed - 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  EXPECT_THAT(message, HasSubstr("--max-windows-per-request"));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("needs more than ", needed - 1, " windows")));
  // A text far longer than its windows can hold is refused after reading what they hold.
  std::string huge;
  while (huge.size() < (4u << 20)) huge += "token1 and more ";
  auto huge_refused = EncodeTextWindows(huge, "inputs[0]", *tokenizer_, backend_, kMaxLength, 0, 0, 3);
  EXPECT_THAT(std::string(huge_refused.status().message()), HasSubstr("needs more than 3 windows"));
  EXPECT_EQ(WindowCount(100, 0, 14, 0), 8);
  EXPECT_EQ(WindowCount(14, 0, 14, 4), 1);
  EXPECT_EQ(WindowCount(25, 1, 14, 4), 2);
  EXPECT_EQ(WindowCount(26, 1, 14, 4), 3);
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

// Chunked rerank's windows: [CLS] query [SEP] run [SEP], the runs covering the document once
// each (overlap aside), as many as max_windows allows.
TEST_F(LongInputTest, PairWindowsRepeatTheQueryAndCoverTheDocument) {
  const std::string query = "what is it";
  const std::string document = LongText(20);
  auto q = tokenizer_->EncodeRaw(query);
  auto d = tokenizer_->EncodeRaw(document);
  ASSERT_TRUE(q.ok() && d.ok());
  const size_t room = kMaxLength - 3 - q->size();
  auto windows = EncodePairWindows(query, document, "documents[0]", *tokenizer_, backend_, kMaxLength, 0, 1000);
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_EQ(windows->size(), (d->size() + room - 1) / room);
  std::vector<int32_t> joined;
  for (const EncodedInput& w : *windows) {
    const auto& ids = w.sequence.input_ids;
    ASSERT_LE(ids.size(), static_cast<size_t>(kMaxLength));
    EXPECT_EQ(ids.front(), kCls);
    EXPECT_TRUE(std::equal(q->begin(), q->end(), ids.begin() + 1));
    EXPECT_EQ(ids[1 + q->size()], kSep);
    EXPECT_EQ(ids.back(), kSep);
    EXPECT_EQ(w.sequence.token_type_ids.size(), ids.size());
    joined.insert(joined.end(), ids.begin() + 2 + q->size(), ids.end() - 1);
  }
  EXPECT_EQ(joined, *d);
  // Overlap: each window starts with the last 2 document tokens of the one before.
  auto overlapping = EncodePairWindows(query, document, "documents[0]", *tokenizer_, backend_, kMaxLength, 2, 1000);
  ASSERT_TRUE(overlapping.ok()) << overlapping.status();
  for (size_t i = 0; i < overlapping->size(); ++i) {
    EXPECT_EQ((*overlapping)[i].sequence.input_ids[2 + q->size()], (*d)[i * (room - 2)]) << i;
  }
  // At most max_windows: the first ones.
  auto bounded = EncodePairWindows(query, document, "documents[0]", *tokenizer_, backend_, kMaxLength, 0, 2);
  ASSERT_TRUE(bounded.ok());
  ASSERT_EQ(bounded->size(), 2u);
  EXPECT_EQ((*bounded)[1].sequence.input_ids, (*windows)[1].sequence.input_ids);
  // A pair that fits is one window, as EncodePair gives it.
  auto one = EncodePairWindows(query, "short", "documents[0]", *tokenizer_, backend_, kMaxLength, 0, 10);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].sequence.input_ids, tokenizer_->EncodePair(query, "short")->input_ids);
  // Refusals: a query that leaves no room, too much overlap, no windows.
  auto long_query = EncodePairWindows(LongText(5), document, "documents[3]", *tokenizer_, backend_, kMaxLength, 0, 10);
  EXPECT_EQ(long_query.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_query.status().message()), HasSubstr("leave no room for documents[3]"));
  auto too_much = EncodePairWindows(query, document, "documents[0]", *tokenizer_, backend_, kMaxLength,
                                    static_cast<int>(room / 2 + 1), 10);
  EXPECT_THAT(std::string(too_much.status().message()), HasSubstr("chunk_overlap"));
  auto none = EncodePairWindows(query, document, "documents[0]", *tokenizer_, backend_, kMaxLength, 0, 0);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("max_chunks_per_doc 0"));
}

// Cohere v2's max_tokens_per_doc: the text up to its first n tokens.
TEST_F(LongInputTest, FirstTokensOfADocument) {
  const std::string document = LongText(6);
  auto d = tokenizer_->EncodeRaw(document);
  ASSERT_TRUE(d.ok());
  auto cut = FirstTokensOf(document, "documents[0]", *tokenizer_, 5);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_LT(cut->size(), document.size());
  EXPECT_EQ(*tokenizer_->EncodeRaw(*cut), std::vector<int32_t>(d->begin(), d->begin() + 5));
  EXPECT_EQ(*FirstTokensOf(document, "documents[0]", *tokenizer_, static_cast<int>(d->size())), document);
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

// Embed's merge stage: input 0 took one window, input 1 three. One window passes its outputs
// through; several combine their pooled vectors before Normalize weighted by the tokens each
// pooled (a window's prompt tokens not counted), normalise again where the model does, take each
// sparse id's largest weight and put the multi-vectors one after another.
TEST(MergeWindowsTest, OneWindowPassesThroughSeveralCombine) {
  InputWindows windows;
  const std::vector<int> lengths = {5, 4, 6, 2};
  for (size_t w = 0; w < lengths.size(); ++w) {
    EncodedInput e;
    e.sequence.input_ids.assign(lengths[w], 7);
    e.sequence.pooling_skip = w == 2 ? 2 : 0;  // 6 tokens, 4 of them pooled
    e.truncated = w == 3;
    windows.sequences.push_back(e);
  }
  windows.first = {0, 1, 4};
  EXPECT_EQ(windows.inputs(), 2u);
  EXPECT_TRUE(windows.windowed());
  std::vector<SequenceOutput> outputs(4);
  outputs[0].pooled = {0.6f, 0.8f};
  outputs[0].sparse = {{4, 1.5f}};
  outputs[1].pooled_unnormalized = {4, 0};
  outputs[2].pooled_unnormalized = {0, 4};
  outputs[3].pooled_unnormalized = {4, 4};
  outputs[1].sparse = {{3, 0.5f}, {9, 0.1f}};
  outputs[3].sparse = {{9, 0.7f}};
  for (size_t w = 1; w < 4; ++w) {
    outputs[w].multi_vector = {static_cast<float>(w), static_cast<float>(w)};
    outputs[w].num_vectors = 1;
  }
  const uint32_t flags = kOutputPooled | kOutputSparse | kOutputMultiVector;

  const Embedding one = MergeWindows(windows, 0, flags, /*model_normalizes=*/true, 2, &outputs);
  EXPECT_EQ(one.windows, 1);
  EXPECT_THAT(one.values, ElementsAre(0.6f, 0.8f));
  EXPECT_THAT(one.sparse, ElementsAre(std::pair<int32_t, float>{4, 1.5f}));
  EXPECT_EQ(one.num_tokens, 5);
  EXPECT_FALSE(one.truncated);

  // Weights 4, 4 and 2: (16 + 0 + 8, 0 + 16 + 8) / 10 = (2.4, 2.4), without the model's Normalize.
  const Embedding raw = MergeWindows(windows, 1, flags, /*model_normalizes=*/false, 2, &outputs);
  EXPECT_EQ(raw.windows, 3);
  ASSERT_EQ(raw.values.size(), 2u);
  EXPECT_NEAR(raw.values[0], 2.4f, 1e-6);
  EXPECT_NEAR(raw.values[1], 2.4f, 1e-6);
  EXPECT_THAT(raw.sparse, ElementsAre(std::pair<int32_t, float>{3, 0.5f}, std::pair<int32_t, float>{9, 0.7f}));
  EXPECT_THAT(raw.multi_vector, ElementsAre(1, 1, 2, 2, 3, 3));
  EXPECT_EQ(raw.multi_vector_count, 3);
  EXPECT_EQ(raw.multi_vector_dim, 2);
  EXPECT_EQ(raw.num_tokens, 12);
  EXPECT_TRUE(raw.truncated);
  // With the model's Normalize, the combination is a unit vector again.
  const Embedding normalized = MergeWindows(windows, 1, kOutputPooled, /*model_normalizes=*/true, 0, &outputs);
  ASSERT_EQ(normalized.values.size(), 2u);
  EXPECT_NEAR(normalized.values[0], std::sqrt(0.5f), 1e-6);
  EXPECT_NEAR(normalized.values[1], std::sqrt(0.5f), 1e-6);
  EXPECT_TRUE(normalized.sparse.empty());  // not asked for
  EXPECT_TRUE(normalized.multi_vector.empty());
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

namespace relserve {
namespace {

// Chunked rerank through the serving layer: a cross-encoder whose raw logit is 1 when the
// window holds the needle's token and 0 otherwise, so that only a window that reached the
// needle scores 1.
class ChunkedRerankTest : public LongInputTest {
 protected:
  void SetUp() override {
    LongInputTest::SetUp();
    auto needle = tokenizer_->EncodeRaw("zebra");
    ASSERT_TRUE(needle.ok() && !needle->empty());
    needle_ = (*needle)[0];
    auto hay = tokenizer_->EncodeRaw(LongText(20));
    ASSERT_EQ(std::count(hay->begin(), hay->end(), needle_), 0);
    auto reranker = std::make_unique<FakeBackend>(std::vector<std::string>{"score"}, "regression");
    reranker->set_logit_fn([needle = needle_](const SequenceInput& s) {
      return std::vector<float>{std::count(s.input_ids.begin(), s.input_ids.end(), needle) > 0 ? 1.0f : 0.0f};
    });
    harness_.Add("reranker", std::move(reranker), tokenizer_.get(), kMaxLength);
    ServingLimits limits;
    limits.max_windows_per_request = 40;
    harness_.Serve(limits);
  }
  absl::StatusOr<RerankResult> Rerank(const RerankRequest& r) { return harness_.Call(&EncoderServing::Rerank, r); }
  RerankRequest Request() const {
    RerankRequest r;
    r.model = "reranker";
    r.query = "where";
    r.documents = {LongText(12) + " zebra", "short zebra", LongText(12)};
    r.raw_scores = true;
    return r;
  }
  int32_t needle_ = 0;
  ServingHarness harness_;
};

TEST_F(ChunkedRerankTest, ALongDocumentScoresItsBestWindow) {
  RerankRequest req = Request();
  // Not chunked (the server's default), cut by --auto-truncate: the needle at the end is lost.
  auto cut = Rerank(req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_FALSE(cut->chunked);
  EXPECT_EQ(cut->results[0].index, 1);
  EXPECT_EQ(cut->results[0].score, 1.0f);
  EXPECT_EQ(cut->results[1].score, 0.0f);
  EXPECT_EQ(cut->results[1].windows, 1);

  req.chunk_documents = true;
  auto chunked = Rerank(req);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_TRUE(chunked->chunked);
  auto want = EncodePairWindows(req.query, req.documents[0], "documents[0]", *tokenizer_, backend_, kMaxLength, 0, 10);
  ASSERT_TRUE(want.ok());
  ASSERT_GT(want->size(), 2u);
  std::map<int, RerankHit> by_index;
  for (const RerankHit& h : chunked->results) by_index[h.index] = h;
  EXPECT_EQ(by_index[0].score, 1.0f);  // the last window reached the needle
  EXPECT_EQ(by_index[0].windows, static_cast<int32_t>(want->size()));
  EXPECT_EQ(by_index[1].score, 1.0f);
  EXPECT_EQ(by_index[1].windows, 1);
  EXPECT_EQ(by_index[2].score, 0.0f);
  EXPECT_EQ(chunked->results[2].index, 2);  // ties keep the request's order: 0, 1, then 2
  int64_t tokens = 0;
  size_t sequences = 0;
  for (size_t i = 0; i < req.documents.size(); ++i) {
    auto w = EncodePairWindows(req.query, req.documents[i], "d", *tokenizer_, backend_, kMaxLength, 0, 10);
    for (const EncodedInput& e : *w) tokens += static_cast<int64_t>(e.sequence.input_ids.size());
    sequences += w->size();
  }
  EXPECT_EQ(chunked->usage.tokens, tokens);  // every window computed, each an ordinary sequence
  EXPECT_EQ(static_cast<size_t>(chunked->usage.sequences), sequences);

  // max_chunks_per_doc (which turns chunking on by itself) bounds the windows: the needle is past them.
  RerankRequest bounded = Request();
  bounded.max_chunks_per_doc = 2;
  auto two = Rerank(bounded);
  ASSERT_TRUE(two.ok()) << two.status();
  for (const RerankHit& h : two->results) {
    if (h.index == 0) {
      EXPECT_EQ(h.windows, 2);
      EXPECT_EQ(h.score, 0.0f);
    }
  }
  // max_tokens_per_doc cuts each document first: one window, the needle gone.
  RerankRequest short_docs = Request();
  short_docs.chunk_documents = true;
  short_docs.max_tokens_per_doc = 4;
  auto first_tokens = Rerank(short_docs);
  ASSERT_TRUE(first_tokens.ok()) << first_tokens.status();
  for (const RerankHit& h : first_tokens->results) {
    EXPECT_EQ(h.windows, 1) << h.index;
    EXPECT_EQ(h.score, h.index == 1 ? 1.0f : 0.0f) << h.index;
  }
  // A request that says truncate false and does not chunk is refused as over-long.
  RerankRequest refuse = Request();
  refuse.truncation.truncate = false;
  EXPECT_EQ(Rerank(refuse).status().code(), absl::StatusCode::kInvalidArgument);
  // More windows than the request may compute.
  RerankRequest many = Request();
  many.chunk_documents = true;
  many.max_chunks_per_doc = 1000;
  many.documents = {LongText(60), LongText(60)};
  auto refused = Rerank(many);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("more than 40 windows"));
}

}  // namespace
}  // namespace relserve
