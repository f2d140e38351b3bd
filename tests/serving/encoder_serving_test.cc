// The serving layer on its own: a fake backend behind real batchers, no torch and no
// transport. Each call's validation, submission and post-processing (normalisation,
// dimensions, softmax or sigmoid by problem type, top-k, rerank order) is checked against
// values computed here from what the fake backend returns.
#include "server/serving/encoder_serving.h"

#include <cmath>
#include <future>
#include <memory>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/model_batcher.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"
#include "tests/serving/fake_backend.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class EncoderServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("embedder", std::make_unique<FakeBackend>(std::vector<std::string>{}, ""));
    auto tokenizer = Tokenizer::LoadModelFile(RELSERVE_TEST_DATA_DIR "/reference/tokenizer/spm.model",
                                              TokenizerFamily::kDeberta, 16);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    Add("reranker", std::make_unique<FakeBackend>(std::vector<std::string>{"score"}, "regression"), tokenizer_.get());
    Add("classifier", std::make_unique<FakeBackend>(std::vector<std::string>{"neg", "neu", "pos"},
                                                    "single_label_classification", std::vector<float>{1, 3, 2}));
    Add("tagger", std::make_unique<FakeBackend>(std::vector<std::string>{"a", "b"}, "multi_label_classification",
                                                std::vector<float>{0, 2}));
    ServingLimits limits;
    limits.max_inputs_per_request = 4;
    limits.max_response_bytes = 2000;
    limits.auto_truncate = false;  // --auto-truncate false: these tests are about refusals
    harness_.Serve(limits);
    serving_ = &harness_.serving();
  }
  void Add(const std::string& name, std::unique_ptr<FakeBackend> backend, const Tokenizer* tokenizer = nullptr) {
    harness_.Add(name, std::move(backend), tokenizer, 16);
  }
  FakeBackend& backend(int i) { return harness_.backend(i); }

  template <typename Request, typename Result>
  absl::StatusOr<Result> Call(void (EncoderServing::*method)(const Request&, const CallContext&,
                                                             EncoderServing::Done<Result>) const,
                              const Request& request, CallContext context = {}) {
    return harness_.Call(method, request, context);
  }

  std::unique_ptr<Tokenizer> tokenizer_;  // outlives the harness's batchers
  ServingHarness harness_;
  EncoderServing* serving_ = nullptr;
};

TEST_F(EncoderServingTest, EmbedNormalizesCutsDimensionsAndReportsUsage) {
  EmbedRequest req;
  req.inputs = {Input::Tokens({3, 4}), Input::Tokens({1, 2, 3})};
  req.request_id = "r1";
  auto plain = Call(&EncoderServing::Embed, req);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->model, "embedder");  // the default model
  EXPECT_EQ(plain->request_id, "r1");
  EXPECT_THAT(plain->embeddings[0].values, ElementsAre(7, 2, 1, 2));
  EXPECT_THAT(plain->embeddings[1].values, ElementsAre(6, 3, 1, 2));
  EXPECT_EQ(plain->embeddings[1].num_tokens, 3);
  EXPECT_EQ(plain->usage.tokens, 5);
  EXPECT_EQ(plain->usage.sequences, 2);

  req.normalize = true;
  auto normalized = Call(&EncoderServing::Embed, req);
  ASSERT_TRUE(normalized.ok());
  const double n = std::sqrt(49.0 + 4 + 1 + 4);
  EXPECT_NEAR(normalized->embeddings[0].values[0], 7 / n, 1e-6);
  EXPECT_NEAR(normalized->embeddings[0].values[3], 2 / n, 1e-6);

  req.normalize = false;
  req.dimensions = 2;  // the first two values, renormalised
  auto cut = Call(&EncoderServing::Embed, req);
  ASSERT_TRUE(cut.ok());
  ASSERT_EQ(cut->embeddings[0].values.size(), 2u);
  EXPECT_NEAR(cut->embeddings[0].values[0], 7 / std::sqrt(53.0), 1e-6);

  req.dimensions = 5;
  auto bad = Call(&EncoderServing::Embed, req);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("dimensions 5 is outside [0, 4] for model embedder"));
}

// `dimensions` on a model whose config.json says it is not Matryoshka-trained, or lists other
// sizes, is refused with vLLM's words (PoolingParams.verify) and kind kUnsupported (OpenAI's
// routes answer it 400, as vLLM); a model that says nothing is cut as before.
TEST(EncoderServingMatryoshkaTest, DimensionsFollowWhatTheConfigSays) {
  ServingHarness harness;
  auto make = [](std::optional<bool> is, std::vector<int> sizes) {
    auto b = std::make_unique<FakeBackend>(std::vector<std::string>{}, "");
    b->set_matryoshka(is, std::move(sizes));
    return b;
  };
  harness.Add("unsaid", make(std::nullopt, {}), nullptr, 16);
  harness.Add("plain", make(false, {}), nullptr, 16);
  harness.Add("mrl", make(true, {}), nullptr, 16);
  harness.Add("listed", make(true, {2, 4}), nullptr, 16);
  harness.Serve(ServingLimits());
  auto embed = [&](const std::string& model, int dimensions) {
    EmbedRequest req;
    req.model = model;
    req.inputs = {Input::Tokens({7, 2})};
    req.dimensions = dimensions;
    return harness.Call(&EncoderServing::Embed, req);
  };
  for (const char* model : {"unsaid", "mrl", "listed"}) {
    auto cut = embed(model, 2);
    ASSERT_TRUE(cut.ok()) << model << ": " << cut.status();
    EXPECT_EQ(cut->embeddings[0].values.size(), 2u) << model;
  }
  EXPECT_TRUE(embed("unsaid", 3).ok());
  EXPECT_TRUE(embed("mrl", 3).ok());
  EXPECT_TRUE(embed("plain", 0).ok());  // no dimensions: nothing to refuse
  const int ran = harness.backend(1).runs();
  auto plain = embed("plain", 2);
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plain.status().message(), "Model \"plain\" does not support matryoshka representation, changing output "
                                      "dimensions will lead to poor results.");
  auto detail = FieldErrorOf(plain.status());
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind, FieldErrorKind::kUnsupported);
  EXPECT_EQ(detail->field, "dimensions");
  auto listed = embed("listed", 3);
  EXPECT_EQ(listed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(listed.status().message(), "Model \"listed\" only supports [2, 4] matryoshka dimensions, use other "
                                       "output dimensions will lead to poor results.");
  EXPECT_EQ(harness.backend(1).runs(), ran);  // refused before anything ran
}

TEST_F(EncoderServingTest, RequestsAreValidatedBeforeAnythingIsQueued) {
  EmbedRequest req;
  req.model = "nope";
  req.inputs = {Input::Tokens({1})};
  EXPECT_EQ(Call(&EncoderServing::Embed, req).status().code(), absl::StatusCode::kNotFound);
  req.model = "";
  req.inputs.assign(5, Input::Tokens({1}));
  auto many = Call(&EncoderServing::Embed, req);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(many.status().message()), HasSubstr("inputs has 5 entries, more than the limit of 4"));
  req.inputs = {Input::Tokens({1}), Input::Text("text but no tokenizer")};
  auto text = Call(&EncoderServing::Embed, req);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("inputs[1]: the model has no tokenizer"));
  req.inputs = {Input::Tokens({1, 5000})};
  EXPECT_EQ(Call(&EncoderServing::Embed, req).status().code(), absl::StatusCode::kInvalidArgument);
  req.inputs = {Input()};
  EXPECT_THAT(std::string(Call(&EncoderServing::Embed, req).status().message()), HasSubstr("inputs[0] is empty"));
  EXPECT_EQ(backend(0).runs(), 0);
}

TEST_F(EncoderServingTest, EmbedTokensReturnsStatesAndRefusesAnswersTooLargeBeforeComputing) {
  EmbedTokensRequest req;
  req.inputs = {Input::Tokens({5, 6})};
  auto r = Call(&EncoderServing::EmbedTokens, req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sequences[0].hidden_size, 3);
  EXPECT_THAT(r->sequences[0].values, ElementsAre(5, 5, 5, 6, 6, 6));
  EXPECT_THAT(r->sequences[0].token_ids, ElementsAre(5, 6));
  const int before = backend(0).runs();
  // 4 x 16 tokens x (3 floats + ids and offsets) is over the 2000-byte limit.
  req.inputs.assign(4, Input::Tokens(std::vector<int32_t>(16, 7)));
  auto big = Call(&EncoderServing::EmbedTokens, req);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("64 tokens x 3 values"));
  EXPECT_EQ(backend(0).runs(), before);
}

TEST_F(EncoderServingTest, RerankOrdersBySigmoidOfTheLogitWithTopNAndDocuments) {
  RerankRequest req;
  req.model = "reranker";
  req.query = "q";
  req.documents = {"x", "x x x x", "x x"};
  // The fake logit is [CLS] (id 1) plus the pair's length minus one: the pair's length.
  std::vector<float> logits;
  for (const std::string& d : req.documents) {
    auto enc = tokenizer_->EncodePair(req.query, d, TokenizeOptions());
    ASSERT_TRUE(enc.ok());
    logits.push_back(static_cast<float>(enc->input_ids.size()));
  }
  ASSERT_GT(logits[1], logits[2]);
  ASSERT_GT(logits[2], logits[0]);
  auto r = Call(&EncoderServing::Rerank, req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->results.size(), 3u);
  EXPECT_EQ(r->results[0].index, 1);
  EXPECT_EQ(r->results[1].index, 2);
  EXPECT_EQ(r->results[2].index, 0);
  EXPECT_NEAR(r->results[0].score, 1 / (1 + std::exp(-logits[1])), 1e-6);
  EXPECT_TRUE(r->results[0].document.empty());

  req.top_n = 2;
  req.return_documents = true;
  req.raw_scores = true;
  auto top = Call(&EncoderServing::Rerank, req);
  ASSERT_TRUE(top.ok());
  ASSERT_EQ(top->results.size(), 2u);
  EXPECT_EQ(top->results[0].score, logits[1]);
  EXPECT_EQ(top->results[0].document, "x x x x");
  EXPECT_EQ(top->usage.sequences, 3);

  req.model = "embedder";
  auto no_head = Call(&EncoderServing::Rerank, req);
  EXPECT_EQ(no_head.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_head.status().message()), HasSubstr("has no classification head; Rerank needs a cross-encoder"));
  req.model = "reranker";
  req.query = "";
  EXPECT_THAT(std::string(Call(&EncoderServing::Rerank, req).status().message()), HasSubstr("query is empty"));
  req.query = "q";
  req.top_n = -1;
  EXPECT_THAT(std::string(Call(&EncoderServing::Rerank, req).status().message()), HasSubstr("top_n"));
}

TEST_F(EncoderServingTest, ClassifyScoresByProblemTypeWithTopK) {
  ClassifyRequest req;
  req.model = "classifier";
  req.inputs = {Input::Tokens({1})};
  auto softmax = Call(&EncoderServing::Classify, req);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  const double z = std::exp(1.0) + std::exp(3.0) + std::exp(2.0);
  ASSERT_EQ(softmax->results[0].labels.size(), 3u);
  EXPECT_EQ(softmax->results[0].labels[0].label, "neu");
  EXPECT_EQ(softmax->results[0].labels[0].index, 1);
  EXPECT_NEAR(softmax->results[0].labels[0].score, std::exp(3.0) / z, 1e-6);
  EXPECT_EQ(softmax->results[0].labels[2].label, "neg");
  EXPECT_THAT(softmax->results[0].logits, ElementsAre(1, 3, 2));

  req.top_k = 1;
  req.raw_scores = true;
  auto raw = Call(&EncoderServing::Classify, req);
  ASSERT_EQ(raw->results[0].labels.size(), 1u);
  EXPECT_EQ(raw->results[0].labels[0].score, 3);

  req = ClassifyRequest();
  req.model = "tagger";
  req.inputs = {Input::Tokens({1})};
  auto sigmoid = Call(&EncoderServing::Classify, req);
  ASSERT_TRUE(sigmoid.ok());
  EXPECT_NEAR(sigmoid->results[0].labels[0].score, 1 / (1 + std::exp(-2.0)), 1e-6);
  EXPECT_NEAR(sigmoid->results[0].labels[1].score, 0.5, 1e-6);

  req.model = "reranker";  // one label, regression: the value itself
  req.inputs = {Input::Tokens({42})};
  auto regression = Call(&EncoderServing::Classify, req);
  ASSERT_TRUE(regression.ok());
  EXPECT_EQ(regression->results[0].labels[0].score, 42);

  req.model = "embedder";
  EXPECT_EQ(Call(&EncoderServing::Classify, req).status().code(), absl::StatusCode::kFailedPrecondition);
  req.model = "classifier";
  req.top_k = -2;
  EXPECT_EQ(Call(&EncoderServing::Classify, req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EncoderServingTest, NonFiniteOutputsAreInternalAndCounted) {
  ClassifyRequest req;
  req.model = "classifier";
  req.inputs = {Input::Tokens({1}), Input::Tokens({999})};
  auto r = Call(&EncoderServing::Classify, req);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("model classifier produced non-finite values"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("sequence 1 of the request"));
  EXPECT_THAT(harness_.metrics().Render(), HasSubstr("relserve_nonfinite_outputs_total{model=\"classifier\"} 1"));
}

TEST_F(EncoderServingTest, ExpiredAndCancelledCallsAreNotComputed) {
  EmbedRequest req;
  req.inputs = {Input::Tokens({1})};
  CallContext expired;
  expired.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_EQ(Call(&EncoderServing::Embed, req, expired).status().code(), absl::StatusCode::kDeadlineExceeded);
  CallContext cancelled;
  cancelled.cancelled = std::make_shared<std::atomic<bool>>(true);
  EXPECT_EQ(Call(&EncoderServing::Embed, req, cancelled).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(backend(0).runs(), 0);
}

// Work for a call nobody waits for stops before it is done: tokenizing too (Tokenize has no
// batcher to drop it), between a rerank's pairs and a zero-shot's.
TEST_F(EncoderServingTest, ExpiredAndCancelledCallsStopTokenizing) {
  TokenizeRequest tokenize;
  tokenize.model = "reranker";
  tokenize.inputs = {Input::Text("a b c")};
  CallContext expired;
  expired.deadline = absl::Now() - absl::Seconds(1);
  auto late = serving_->Tokenize(tokenize, expired);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("deadline passed while its inputs were tokenized"));
  CallContext cancelled;
  cancelled.cancelled = std::make_shared<std::atomic<bool>>(true);
  EXPECT_EQ(serving_->Tokenize(tokenize, cancelled).status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(serving_->Tokenize(tokenize).ok());

  RerankRequest rerank;
  rerank.model = "reranker";
  rerank.query = "q";
  rerank.documents = {"x", "y"};
  EXPECT_EQ(Call(&EncoderServing::Rerank, rerank, expired).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(backend(1).runs(), 0);
}

// A long query is tokenized once for every document, and only as far as a pair can keep it:
// the pairs are those of the texts encoded one pair at a time.
TEST_F(EncoderServingTest, RerankPairsALongQueryWithEachDocument) {
  RerankRequest req;
  req.model = "reranker";
  for (int i = 0; i < 20000; ++i) req.query += "the query ";
  req.documents = {"x", "x x x x", "x x"};
  req.truncation.truncate = true;
  auto r = Call(&EncoderServing::Rerank, req);
  ASSERT_TRUE(r.ok()) << r.status();
  // Every pair is cut to the model's 16 tokens (the fake logit is the pair's length).
  for (const RerankHit& hit : r->results) EXPECT_NEAR(hit.score, 1 / (1 + std::exp(-16.0f)), 1e-6);
  EXPECT_EQ(r->usage.tokens, 3 * 16);
  req.truncation.truncate = false;
  auto refused = Call(&EncoderServing::Rerank, req);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("documents[0]: text pair is more than"));
}

// --auto-truncate is on unless said otherwise, as TEI 1.9's.
TEST(ServingLimitsTest, AutoTruncateIsOnByDefault) { EXPECT_TRUE(ServingLimits().auto_truncate); }

// --auto-truncate: requests that do not say are cut; a request's own truncate wins either way.
TEST_F(EncoderServingTest, AutoTruncateIsTheDefaultOfRequestsThatDoNotSay) {
  TokenizeRequest req;
  req.inputs = {Input::Tokens(std::vector<int32_t>(20, 1))};
  ServingLimits limits = serving_->limits();
  limits.auto_truncate = true;
  const EncoderServing automatic(&harness_.registry(), &harness_.metrics(), limits);
  auto cut = automatic.Tokenize(req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE(cut->results[0].truncated);
  EXPECT_EQ(cut->results[0].input_ids.size(), 16u);
  req.truncation.truncate = false;  // said: refused even so
  EXPECT_THAT(std::string(automatic.Tokenize(req).status().message()), HasSubstr("more than the maximum of 16"));
  req.truncation.truncate.reset();  // with --auto-truncate false: refused
  EXPECT_EQ(serving_->Tokenize(req).status().code(), absl::StatusCode::kInvalidArgument);

  // Every call resolves it the same way: Embed, and Rerank's pairs.
  EmbedRequest embed;
  embed.inputs = {Input::Tokens(std::vector<int32_t>(20, 2))};
  EXPECT_EQ(Call(&EncoderServing::Embed, embed).status().code(), absl::StatusCode::kInvalidArgument);
  std::promise<absl::StatusOr<EmbedResult>> answer;
  automatic.Embed(embed, {}, [&answer](absl::StatusOr<EmbedResult> r) { answer.set_value(std::move(r)); });
  auto embedded = answer.get_future().get();
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  EXPECT_TRUE(embedded->embeddings[0].truncated);
  EXPECT_EQ(embedded->embeddings[0].num_tokens, 16);
  RerankRequest rerank;
  rerank.model = "reranker";
  rerank.query = "a query";
  rerank.documents = {"The GNU General Public License is a free, copyleft license for software"};
  EXPECT_EQ(Call(&EncoderServing::Rerank, rerank).status().code(), absl::StatusCode::kInvalidArgument);
  std::promise<absl::StatusOr<RerankResult>> ranked;
  automatic.Rerank(rerank, {}, [&ranked](absl::StatusOr<RerankResult> r) { ranked.set_value(std::move(r)); });
  auto reranked = ranked.get_future().get();
  ASSERT_TRUE(reranked.ok()) << reranked.status();
  EXPECT_EQ(reranked->usage.tokens, 16);
}

// truncation_direction left: token ids keep their end; texts keep their end inside the template.
TEST_F(EncoderServingTest, LeftTruncationKeepsTheEndOfEachInput) {
  TokenizeRequest req;
  std::vector<int32_t> ids(20);
  for (int i = 0; i < 20; ++i) ids[i] = 100 + i;
  std::vector<int32_t> types(20, 0);
  types[19] = 1;
  req.inputs = {Input::Tokens(ids, types)};
  req.truncation = {true, TruncationDirection::kLeft};
  auto cut = serving_->Tokenize(req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->results[0].input_ids, std::vector<int32_t>(ids.begin() + 4, ids.end()));
  EXPECT_EQ(cut->results[0].token_type_ids, std::vector<int32_t>(types.begin() + 4, types.end()));
  EXPECT_TRUE(cut->results[0].truncated);

  const std::string text = "The GNU General Public License is a free, copyleft license for software and other kinds";
  auto raw = tokenizer_->EncodeRaw(text);
  ASSERT_TRUE(raw.ok());
  ASSERT_GT(raw->size(), 14u);
  req.model = "reranker";  // the model with the tokenizer
  req.inputs = {Input::Text(text)};
  auto left = serving_->Tokenize(req);
  ASSERT_TRUE(left.ok()) << left.status();
  std::vector<int32_t> want = {tokenizer_->cls_id()};
  want.insert(want.end(), raw->end() - 14, raw->end());
  want.push_back(tokenizer_->sep_id());
  EXPECT_EQ(left->results[0].input_ids, want);
  req.truncation.direction = TruncationDirection::kRight;
  auto right = serving_->Tokenize(req);
  ASSERT_TRUE(right.ok()) << right.status();
  EXPECT_EQ(right->results[0].input_ids[1], (*raw)[0]);
}

// TEI's /embed: `dimensions` cuts and normalises only when asked (dimensions_renormalize off).
TEST_F(EncoderServingTest, DimensionsWithoutRenormalisation) {
  EmbedRequest req;
  req.inputs = {Input::Tokens({3, 4})};
  req.dimensions = 2;
  req.dimensions_renormalize = false;
  auto cut = Call(&EncoderServing::Embed, req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_THAT(cut->embeddings[0].values, ElementsAre(7, 2));
  req.normalize = true;
  auto unit = Call(&EncoderServing::Embed, req);
  ASSERT_TRUE(unit.ok());
  EXPECT_NEAR(unit->embeddings[0].values[0], 7 / std::sqrt(53.0), 1e-6);
}

// TEI's rule: the sigmoid of one logit, the softmax of several, whatever the problem type.
TEST_F(EncoderServingTest, ClassifyByLogitCountAsTeiDoes) {
  ClassifyRequest req;
  req.score_rule = ScoreRule::kLogitCount;
  req.model = "reranker";  // one label, regression by its config
  req.inputs = {Input::Tokens({1})};
  auto one = Call(&EncoderServing::Classify, req);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_NEAR(one->results[0].labels[0].score, 1 / (1 + std::exp(-1.0)), 1e-6);
  req.model = "tagger";  // multi-label by its config: TEI still takes the softmax
  auto several = Call(&EncoderServing::Classify, req);
  ASSERT_TRUE(several.ok());
  EXPECT_NEAR(several->results[0].labels[0].score, std::exp(2.0) / (1 + std::exp(2.0)), 1e-6);
  EXPECT_NEAR(several->results[0].labels[0].score + several->results[0].labels[1].score, 1, 1e-6);
  req.raw_scores = true;
  auto raw = Call(&EncoderServing::Classify, req);
  EXPECT_EQ(raw->results[0].labels[0].score, 2);
}

// TEI's /tokenize: every token, past the model's maximum, never refused.
TEST_F(EncoderServingTest, TokenizeWholeTexts) {
  TokenizeRequest req;
  req.model = "reranker";
  req.inputs = {Input::Text("the quick brown fox jumps over the lazy dog and then some more words follow it")};
  EXPECT_THAT(std::string(serving_->Tokenize(req).status().message()), HasSubstr("truncation is off"));
  req.whole_text = true;
  auto whole = serving_->Tokenize(req);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_GT(whole->results[0].input_ids.size(), 16u);
  EXPECT_FALSE(whole->results[0].truncated);
  EXPECT_EQ(whole->results[0].input_ids.back(), tokenizer_->sep_id());
  req.inputs = {Input::Tokens(std::vector<int32_t>(20, 1))};
  auto ids = serving_->Tokenize(req);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->results[0].input_ids.size(), 20u);
}

// Tokenize marks the tokens the template added ([CLS], [SEP]) itself, so that no transport asks
// the tokenizer: a [SEP] written in the text has the same id and is the text's own token.
TEST_F(EncoderServingTest, TokenizeMarksTheTemplatesSpecialTokens) {
  TokenizeRequest req;
  req.model = "reranker";
  req.inputs = {Input::Text("left [SEP] right")};
  auto t = serving_->Tokenize(req);
  ASSERT_TRUE(t.ok()) << t.status();
  const Tokenized& r = t->results[0];
  ASSERT_EQ(r.special.size(), r.input_ids.size());
  ASSERT_GE(r.input_ids.size(), 5u);
  EXPECT_EQ(r.input_ids.front(), tokenizer_->cls_id());
  EXPECT_EQ(r.input_ids.back(), tokenizer_->sep_id());
  EXPECT_TRUE(r.special.front());
  EXPECT_TRUE(r.special.back());
  int written_sep = 0;
  for (size_t k = 1; k + 1 < r.input_ids.size(); ++k) {
    EXPECT_FALSE(r.special[k]) << k;
    if (r.input_ids[k] == tokenizer_->sep_id()) ++written_sep;
  }
  EXPECT_EQ(written_sep, 1);
  // Token ids are the caller's: none is the template's.
  req.inputs = {Input::Tokens({tokenizer_->cls_id(), 7, tokenizer_->sep_id()})};
  auto ids = serving_->Tokenize(req);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->results[0].special, std::vector<bool>(3, false));
}

TEST_F(EncoderServingTest, AliasesDescribeAndDecode) {
  auto backend = std::make_unique<FakeBackend>(std::vector<std::string>{}, "");
  ServedModel a;
  a.name = "org/e5";
  a.aliases = {"e5", "shared"};
  a.model_id = "org/e5";
  a.backend = backend.get();
  ServedModel b = a;
  b.name = "other/e5-large";
  b.aliases = {"e5-large", "shared"};
  b.model_id = "other/e5-large@v2";
  ModelRegistry registry;
  registry.Add(a);
  registry.Add(b);
  auto by_name = registry.Find("org/e5");
  ASSERT_TRUE(by_name.ok());
  auto by_alias = registry.Find("e5");
  ASSERT_TRUE(by_alias.ok()) << by_alias.status();
  EXPECT_EQ((*by_alias)->name, "org/e5");
  auto ambiguous = registry.Find("shared");
  EXPECT_EQ(ambiguous.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(ambiguous.status().message()), HasSubstr("could be any of org/e5, other/e5-large"));
  EXPECT_THAT(std::string(registry.Find("e6").status().message()), HasSubstr("served: org/e5, other/e5-large"));
  EncoderServing serving(&registry, nullptr, ServingLimits());
  auto described = serving.DescribeModel("e5-large");
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->name, "other/e5-large");
  EXPECT_EQ(described->aliases, (std::vector<std::string>{"e5-large", "shared"}));
  EXPECT_EQ(described->model_id, "other/e5-large@v2");

  auto encoded = tokenizer_->Encode("hello world");
  ASSERT_TRUE(encoded.ok());
  const std::vector<int32_t> words(encoded->input_ids.begin() + 1, encoded->input_ids.end() - 1);
  auto texts = serving_->Decode("reranker", {encoded->input_ids, words}, true);
  ASSERT_TRUE(texts.ok()) << texts.status();
  EXPECT_EQ(*texts, (std::vector<std::string>{"hello world", "hello world"}));
  auto special = serving_->Decode("reranker", {encoded->input_ids}, false);
  ASSERT_TRUE(special.ok());
  EXPECT_EQ(*special, std::vector<std::string>{"[CLS] hello world[SEP]"});
  auto outside = serving_->Decode("reranker", {{5}, {5, 5000}}, true);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("ids[1][1] = 5000 is outside the vocabulary"));
  EXPECT_THAT(std::string(serving_->Decode("reranker", {{5000}}, true).status().message()),
              HasSubstr("ids[0] = 5000 is outside"));  // one sequence: its own position
  EXPECT_EQ(serving_->Decode("embedder", {{5}}, true).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(serving_->Decode("reranker", std::vector<std::vector<int32_t>>(5, {5}), true)
                              .status()
                              .message()),
              HasSubstr("ids has 5 entries, more than the limit of 4"));
}

TEST_F(EncoderServingTest, TokenizeAndListModels) {
  TokenizeRequest req;
  req.model = "tagger";
  req.inputs = {Input::Tokens({4, 5}, {0, 1}), Input::Tokens({6})};
  auto t = serving_->Tokenize(req);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "tagger");
  EXPECT_THAT(t->results[0].token_type_ids, ElementsAre(0, 1));
  EXPECT_THAT(t->results[1].token_type_ids, ElementsAre(0));  // filled in
  EXPECT_TRUE(t->results[0].pieces.empty());                   // no tokenizer
  req.inputs = {Input::Tokens(std::vector<int32_t>(20, 1))};
  EXPECT_THAT(std::string(serving_->Tokenize(req).status().message()), HasSubstr("more than the maximum of 16"));
  req.truncation.truncate = true;
  auto cut = serving_->Tokenize(req);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->results[0].truncated);
  EXPECT_EQ(cut->results[0].input_ids.size(), 16u);

  const std::vector<ModelDescription> models = serving_->ListModels();
  ASSERT_EQ(models.size(), 4u);
  EXPECT_EQ(models[0].name, "embedder");
  EXPECT_FALSE(models[0].has_classifier());
  EXPECT_EQ(models[0].info.dtype, DType::kBFloat16);
  EXPECT_EQ(models[2].info.problem_type, ProblemType::kSingleLabel);
  EXPECT_EQ(models[3].info.problem_type, ProblemType::kMultiLabel);
  EXPECT_EQ(models[1].info.problem_type, ProblemType::kRegression);
  EXPECT_STREQ(ProblemTypeName(models[3].info.problem_type), "multi_label_classification");
  EXPECT_EQ(serving_->default_model(), "embedder");
  // An int8 model says so (gRPC ListModels, TEI /info), not float32.
  backend(0).set_dtype(DType::kInt8);
  EXPECT_EQ(serving_->ListModels()[0].info.dtype, DType::kInt8);
  EXPECT_STREQ(DTypeName(DType::kInt8), "int8");
}

}  // namespace
}  // namespace relserve
