// Zero-shot classification: the pipeline's formulas (zero_shot.h) against values computed here
// from transformers 4.40.2's ZeroShotClassificationPipeline (postprocess and entailment_id), and
// EncoderServing::ZeroShotClassify end to end over a fake NLI model behind a real batcher and
// the reference SentencePiece tokenizer.
#include "server/serving/zero_shot.h"

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

TEST(FormatHypothesisTest, FillsEveryFieldAndUnescapesBraces) {
  EXPECT_EQ(*FormatHypothesis("This example is {}.", "sports"), "This example is sports.");
  EXPECT_EQ(*FormatHypothesis("{0} or {0}?", "x"), "x or x?");
  EXPECT_EQ(*FormatHypothesis("{0}", "x"), "x");
  EXPECT_EQ(*FormatHypothesis("{{literal}} {}", "y"), "{literal} y");
  EXPECT_EQ(*FormatHypothesis("{}", ""), "");
}

TEST(FormatHypothesisTest, RefusesTemplatesPythonCannotFormatWithOneLabel) {
  // str.format refuses a second "{}" (IndexError: one argument) and "{}" beside "{0}" (it cannot
  // switch from automatic to manual numbering).
  for (const char* bad : {"no field", "{{}}", "{1}", "{name}", "{:>5}", "open { brace", "close } brace", "{} and {}",
                          "{0} or {}?", "{} or {0}?"}) {
    auto r = FormatHypothesis(bad, "x");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("hypothesis_template")) << bad;
  }
  EXPECT_THAT(std::string(FormatHypothesis("no field", "x").status().message()), HasSubstr("has no {} for the label"));
}

TEST(FormatHypothesisTest, RefusesHypothesesThatWouldBeHuge) {
  std::string many;
  for (int i = 0; i < 10000; ++i) many += "{0}";
  const std::string label(1000, 'x');  // 10,000 x 1,000 bytes: 10 MB, never built
  auto r = FormatHypothesis(many, label);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("makes a hypothesis of 10000000 bytes, more than the limit"));
  // Under the limit, many fields are fine, and escaped braces count once.
  EXPECT_EQ(FormatHypothesis(std::string(20000, '{') + std::string(20000, '}') + "{0}", "y")->size(), 20001u);
  EXPECT_TRUE(FormatHypothesis(many, "ab").ok());
}

TEST(EntailmentIndexTest, FirstLabelStartingWithEntailInLabel2idOrder) {
  EXPECT_EQ(*EntailmentIndex({"contradiction", "neutral", "entailment"}, "m"), 2);
  EXPECT_EQ(*EntailmentIndex({"ENTAILMENT", "NEUTRAL", "CONTRADICTION"}, "m"), 0);
  EXPECT_EQ(*EntailmentIndex({"not_entailment", "entailment"}, "m"), 1);  // starts with, not contains
  // label2id as save_pretrained writes it is sorted by name: "entail" comes before "entailment".
  EXPECT_EQ(*EntailmentIndex({"entailment", "entail"}, "m"), 1);
  auto none = EntailmentIndex({"LABEL_0", "LABEL_1"}, "sentiment");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("model sentiment has no entailment label"));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("LABEL_0, LABEL_1"));
}

TEST(ZeroShotScoresTest, SingleLabelIsSoftmaxOverTheEntailmentLogits) {
  // Three labels' pairs through a (contradiction, neutral, entailment) head.
  const std::vector<std::vector<float>> logits = {{0.5f, 0.1f, 2.0f}, {1.0f, 0.0f, -1.0f}, {0.0f, 3.0f, 0.5f}};
  const std::vector<double> s = ZeroShotScores(logits, 2, /*multi_label=*/false);
  const double z = std::exp(2.0) + std::exp(-1.0) + std::exp(0.5);
  EXPECT_NEAR(s[0], std::exp(2.0) / z, 1e-12);
  EXPECT_NEAR(s[1], std::exp(-1.0) / z, 1e-12);
  EXPECT_NEAR(s[2], std::exp(0.5) / z, 1e-12);
}

TEST(ZeroShotScoresTest, MultiLabelIsEntailmentAgainstContradictionPerLabel) {
  const std::vector<std::vector<float>> logits = {{0.5f, 0.1f, 2.0f}, {1.0f, 0.0f, -1.0f}};
  const std::vector<double> s = ZeroShotScores(logits, 2, /*multi_label=*/true);
  EXPECT_NEAR(s[0], std::exp(2.0) / (std::exp(2.0) + std::exp(0.5)), 1e-12);
  EXPECT_NEAR(s[1], std::exp(-1.0) / (std::exp(-1.0) + std::exp(1.0)), 1e-12);
  // Entailment at 0: contradiction is the last logit (the pipeline's index -1).
  const std::vector<double> first = ZeroShotScores({{2.0f, 0.3f, 1.0f}}, 0, true);
  EXPECT_NEAR(first[0], std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-12);
  // One candidate label is scored on its own even without multi_label.
  const std::vector<double> one = ZeroShotScores({{0.5f, 0.1f, 2.0f}}, 2, false);
  EXPECT_NEAR(one[0], s[0], 1e-12);
  // Large logits do not overflow.
  const std::vector<double> big = ZeroShotScores({{0.0f, 0.0f, 1000.0f}, {0.0f, 0.0f, 999.0f}}, 2, false);
  EXPECT_NEAR(big[0], 1 / (1 + std::exp(-1.0)), 1e-12);
}

TEST(ZeroShotOrderTest, HighestFirstAndTiesLaterLabelFirst) {
  EXPECT_THAT(ZeroShotOrder({0.2, 0.5, 0.3}), ElementsAre(1, 2, 0));
  // numpy's reversed(argsort(...)): equal scores come out later index first.
  EXPECT_THAT(ZeroShotOrder({0.25, 0.25, 0.5}), ElementsAre(2, 1, 0));
}

// A DeBERTa-like NLI model (contradiction, neutral, entailment) whose logits are functions of
// the pair's ids, served with the reference SentencePiece tokenizer.
std::vector<float> NliLogits(const SequenceInput& s) {
  double sum = 0;
  for (int32_t id : s.input_ids) sum += id;
  const double n = static_cast<double>(s.input_ids.size());
  return {static_cast<float>(0.1 * n), 0.25f, static_cast<float>(std::fmod(sum, 97.0) / 20.0)};
}

class ZeroShotServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = Tokenizer::LoadModelFile(RELSERVE_TEST_DATA_DIR "/reference/tokenizer/spm.model",
                                              TokenizerFamily::kDeberta, kMaxLength);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    auto nli = std::make_unique<FakeBackend>(std::vector<std::string>{"contradiction", "neutral", "entailment"},
                                             "single_label_classification");
    nli->set_logit_fn(NliLogits);
    harness_.Add("nli", std::move(nli), tokenizer_.get(), kMaxLength);
    harness_.Add("sentiment",
                 std::make_unique<FakeBackend>(std::vector<std::string>{"negative", "positive"},
                                               "single_label_classification"),
                 tokenizer_.get(), kMaxLength);
    harness_.Add("embedder", std::make_unique<FakeBackend>(std::vector<std::string>{}, ""), tokenizer_.get(),
                 kMaxLength);
    ServingLimits limits;
    limits.max_inputs_per_request = 8;
    harness_.Serve(limits);
  }
  absl::StatusOr<ZeroShotResult> Classify(const ZeroShotRequest& request) {
    return harness_.Call(&EncoderServing::ZeroShotClassify, request);
  }
  // The logits the fake model gives the pair (text, template with label), tokenized here.
  std::vector<float> PairLogits(const std::string& text, const std::string& hypothesis) {
    TokenizeOptions options;
    options.max_length = kMaxLength;
    auto enc = tokenizer_->EncodePair(text, hypothesis, options);
    EXPECT_TRUE(enc.ok()) << enc.status();
    SequenceInput s;
    s.input_ids = enc->input_ids;
    return NliLogits(s);
  }

  static constexpr int kMaxLength = 64;
  std::unique_ptr<Tokenizer> tokenizer_;  // outlives the harness's batchers
  ServingHarness harness_;
};

TEST_F(ZeroShotServingTest, ScoresAndOrderAsThePipeline) {
  const std::vector<std::string> labels = {"sports", "politics", "cooking and food"};
  const std::string text = "The match went to extra time before the home side scored.";
  ZeroShotRequest req;
  req.model = "nli";
  req.sequences = {text, "A short one."};
  req.candidate_labels = labels;
  for (bool multi : {false, true}) {
    req.multi_label = multi;
    auto r = Classify(req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->model, "nli");
    ASSERT_EQ(r->results.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      const ZeroShotClassification& c = r->results[i];
      EXPECT_EQ(c.sequence, req.sequences[i]);
      // Expected: the pipeline's postprocess over the logits of each (text, hypothesis) pair.
      std::vector<double> entail, contra;
      for (const std::string& l : labels) {
        const std::vector<float> lg = PairLogits(req.sequences[i], "This example is " + l + ".");
        entail.push_back(lg[2]);
        contra.push_back(lg[0]);
      }
      std::vector<double> want(labels.size());
      double z = 0;
      for (double e : entail) z += std::exp(e);
      for (size_t k = 0; k < labels.size(); ++k) {
        want[k] = multi ? std::exp(entail[k]) / (std::exp(entail[k]) + std::exp(contra[k])) : std::exp(entail[k]) / z;
      }
      ASSERT_EQ(c.labels.size(), labels.size());
      double total = 0;
      for (size_t j = 0; j < c.labels.size(); ++j) {
        const LabelScore& l = c.labels[j];
        EXPECT_EQ(l.label, labels[l.index]);
        EXPECT_NEAR(l.score, want[l.index], 1e-6) << "label " << l.label << " multi " << multi;
        if (j > 0) {
          EXPECT_GE(c.labels[j - 1].score, l.score);
        }
        total += l.score;
      }
      if (!multi) {
        EXPECT_NEAR(total, 1.0, 1e-5);
      }
    }
    // One pair per text and label, all through the batcher.
    EXPECT_EQ(r->usage.sequences, 6);
  }
}

TEST_F(ZeroShotServingTest, TemplateAndTruncationOfThePremiseOnly) {
  ZeroShotRequest req;
  req.model = "nli";
  req.sequences = {"Il pleut."};
  req.candidate_labels = {"weather"};
  req.hypothesis_template = "Ce texte parle de {}.";
  auto r = Classify(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<float> lg = PairLogits("Il pleut.", "Ce texte parle de weather.");
  EXPECT_NEAR(r->results[0].labels[0].score, std::exp(lg[2]) / (std::exp(lg[2]) + std::exp(lg[0])), 1e-6);

  // A premise longer than the model is cut (the pipeline always truncates only_first) ...
  std::string long_text;
  for (int i = 0; i < 60; ++i) long_text += "word number " + std::to_string(i) + " ";
  req.sequences = {long_text};
  req.hypothesis_template = "";
  auto cut = Classify(req);
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->usage.tokens, kMaxLength);
  // ... unless the request says not to.
  req.truncation.truncate = false;
  auto refused = Classify(req);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sequences[0] with candidate_labels[0]"));
  // A hypothesis that leaves no room for the premise is refused, not cut.
  req.truncation.truncate = true;
  req.candidate_labels = {long_text};
  auto no_room = Classify(req);
  EXPECT_EQ(no_room.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_room.status().message()), HasSubstr("only the first text may be cut"));
}

TEST_F(ZeroShotServingTest, RefusesWhatThePipelineCannotAnswer) {
  ZeroShotRequest req;
  req.model = "nli";
  req.sequences = {"text"};
  req.candidate_labels = {};
  EXPECT_THAT(std::string(Classify(req).status().message()), HasSubstr("candidate_labels is empty"));
  req.candidate_labels = {"a", ""};
  EXPECT_THAT(std::string(Classify(req).status().message()), HasSubstr("candidate_labels[1] is empty"));
  req.candidate_labels = {"a"};
  req.hypothesis_template = "no field";
  EXPECT_EQ(Classify(req).status().code(), absl::StatusCode::kInvalidArgument);
  req.hypothesis_template = "";
  req.sequences = {};
  EXPECT_THAT(std::string(Classify(req).status().message()), HasSubstr("sequences is empty"));
  req.sequences = {"a", "b", "c"};
  req.candidate_labels = {"1", "2", "3"};  // 9 pairs, more than the limit of 8
  EXPECT_THAT(std::string(Classify(req).status().message()), HasSubstr("3 x 3 = 9 pairs, more than the limit of 8"));
  req.sequences = {"text"};
  req.model = "sentiment";
  auto no_entailment = Classify(req);
  EXPECT_EQ(no_entailment.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(no_entailment.status().message()), HasSubstr("no entailment label"));
  req.model = "embedder";
  EXPECT_EQ(Classify(req).status().code(), absl::StatusCode::kFailedPrecondition);
  for (const auto& b : harness_.backends()) EXPECT_EQ(b->runs(), 0);
}

TEST_F(ZeroShotServingTest, ListModelsNamesTheEntailmentLabel) {
  auto d = harness_.serving().DescribeModel("nli");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->entailment_label, "entailment");
  EXPECT_EQ(harness_.serving().DescribeModel("sentiment")->entailment_label, "");
}

}  // namespace
}  // namespace relserve
