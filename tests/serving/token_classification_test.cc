// EncoderServing::ClassifyTokens and what the reference answers (token_classification_reference_test)
// do not reach: refusals before anything is queued, texts longer than the model (the pipeline's
// stride windows and their merge, or a refusal naming the limit), ignore_labels, batches of
// texts. A fake model whose token logits depend on the token id alone, behind a real batcher,
// with the real WordPiece tokenizer of tests/data/ner/ner_bert.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/serving/encoder_serving.h"
#include "server/serving/token_classification.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"
#include "tests/serving/fake_backend.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kLabels = {"O", "B-PER", "I-PER"};
// Far past 16 tokens, names of up to 4 pieces.
const std::string kLong =
    "Marie met Pierre in Paris. Grace met Alan in London. Ada met Charles in Turin. "
    "Marie met Pierre in Paris.";

class TokenClassificationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tokenizer = Tokenizer::Load(std::string(RELSERVE_TEST_DATA_DIR) + "/ner/ner_bert", TokenizerFamily::kBert, 512);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    // The vocabulary is tiny: names are split into pieces. A piece that starts with an
    // upper-case letter is B-PER, a continuation piece (##) I-PER, anything else O; each decided
    // by a wide margin, whatever the context.
    auto fn = [this](int32_t id) {
      const std::string piece = tokenizer_->IdToPiece(id);
      std::vector<float> l(kLabels.size(), 0.0f);
      if (piece.rfind("##", 0) == 0) {
        l[2] = 5;
      } else if (!piece.empty() && piece[0] >= 'A' && piece[0] <= 'Z' && piece != "[CLS]" && piece != "[SEP]") {
        l[1] = 6;
      } else {
        l[0] = 4;
      }
      return l;
    };
    for (int max_length : {16, 512}) {
      auto ner = std::make_unique<FakeBackend>(std::vector<std::string>{}, "");
      ner->set_token_head(kLabels, fn, tokenizer_->vocab_size());
      harness_.Add(max_length == 16 ? "short" : "long", std::move(ner), tokenizer_.get(), max_length);
    }
    auto embedder = std::make_unique<FakeBackend>(std::vector<std::string>{}, "");
    embedder->set_token_head({}, nullptr, tokenizer_->vocab_size());
    harness_.Add("embedder", std::move(embedder), tokenizer_.get(), 512);
    harness_.Serve(ServingLimits());
  }

  absl::StatusOr<TokenClassifyResult> Call(const TokenClassifyRequest& r) {
    return harness_.Call(&EncoderServing::ClassifyTokens, r);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  ServingHarness harness_;
};

TEST_F(TokenClassificationTest, GroupsAndIgnoresAsThePipeline) {
  TokenClassifyRequest r;
  r.model = "long";
  r.texts = {"Marie met Pierre in Paris.", "met in the"};
  r.aggregation_strategy = AggregationStrategy::kSimple;
  auto out = Call(r);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->results.size(), 2u);
  const std::vector<TokenEntity>& e = out->results[0];
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].entity, "PER");
  EXPECT_EQ(e[0].word, "Marie");
  EXPECT_EQ(e[0].start, 0);
  EXPECT_EQ(e[0].end, 5);
  EXPECT_EQ(e[1].word, "Pierre");
  EXPECT_EQ(e[2].word, "Paris");
  EXPECT_EQ(e[2].start, 20);
  EXPECT_EQ(e[2].end, 25);
  EXPECT_TRUE(out->results[1].empty());
  EXPECT_EQ(out->usage.sequences, 2);

  // Nothing ignored: the O groups come back too; a label of the list left out instead.
  r.ignore_labels = std::vector<std::string>{};
  out = Call(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(out->results[0].size(), 3u);
  EXPECT_EQ(out->results[1].size(), 1u);
  EXPECT_EQ(out->results[1][0].entity, "O");
  EXPECT_EQ(out->results[1][0].word, "met in the");
  r.ignore_labels = std::vector<std::string>{"O", "PER"};
  out = Call(r);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->results[0].empty());

  // With none, one entry per token, labels as they are.
  r.ignore_labels.reset();
  r.aggregation_strategy = AggregationStrategy::kNone;
  out = Call(r);
  ASSERT_TRUE(out.ok()) << out.status();
  // M ##ar ##i ##e, P ##i ##er ##re, P ##ar ##is.
  ASSERT_EQ(out->results[0].size(), 11u);
  EXPECT_EQ(out->results[0][0].entity, "B-PER");
  EXPECT_EQ(out->results[0][0].word, "M");
  EXPECT_EQ(out->results[0][0].index, 1);
  EXPECT_EQ(out->results[0][1].entity, "I-PER");
  EXPECT_EQ(out->results[0][1].word, "##ar");
  EXPECT_EQ(out->results[0][1].start, 1);
  EXPECT_EQ(out->results[0][1].end, 3);
}

TEST_F(TokenClassificationTest, RefusedBeforeQueueing) {
  TokenClassifyRequest r;
  r.texts = {"Marie met Pierre."};
  r.model = "embedder";
  auto out = Call(r);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("no token-classification head"));

  r.model = "short";
  r.stride = 2;  // with aggregation none
  out = Call(r);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("aggregation_strategy"));
  EXPECT_EQ(FieldErrorOf(out.status())->field, "stride");

  r.aggregation_strategy = AggregationStrategy::kFirst;
  r.stride = 14;  // a window of 16 holds 14 text tokens
  out = Call(r);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("stride 14 is outside [0, 14)"));

  r.stride.reset();
  r.texts = {"Marie met Pierre.", kLong};
  out = Call(r);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("inputs[1] has"));
  EXPECT_THAT(out.status().message(), HasSubstr("more than the model's maximum of 16"));
  EXPECT_THAT(out.status().message(), HasSubstr("stride"));
  EXPECT_EQ(FieldErrorOf(out.status())->kind, FieldErrorKind::kTooLong);

  r.texts.clear();
  EXPECT_EQ(Call(r).status().code(), absl::StatusCode::kInvalidArgument);
  for (const auto& b : harness_.backends()) EXPECT_EQ(b->runs(), 0);
}

// The windows are the tokenizer's overflowing windows: the template around runs of the text's
// tokens, consecutive runs sharing `stride` tokens, the last one shorter.
TEST_F(TokenClassificationTest, StrideWindowsOverlapByStride) {
  auto whole = tokenizer_->Encode(kLong, TokenizeOptions{1000, false});
  ASSERT_TRUE(whole.ok());
  const int text_tokens = static_cast<int>(whole->input_ids.size()) - 2;
  auto windows =
      EncodeTokenClassificationText(kLong, "inputs[0]", *tokenizer_, harness_.backend(0), 16, /*stride=*/4);
  ASSERT_TRUE(windows.ok()) << windows.status();
  // Room for 14 text tokens per window, a step of 10.
  ASSERT_EQ(windows->size(), static_cast<size_t>((text_tokens - 14 + 9) / 10 + 1));
  for (size_t w = 0; w < windows->size(); ++w) {
    const EncodedInput& in = (*windows)[w];
    ASSERT_LE(in.sequence.input_ids.size(), 16u);
    EXPECT_EQ(in.sequence.input_ids.front(), tokenizer_->cls_id());
    EXPECT_EQ(in.sequence.input_ids.back(), tokenizer_->sep_id());
    EXPECT_TRUE(in.special.front());
    EXPECT_TRUE(in.special.back());
    EXPECT_EQ(in.sequence.input_ids[1], whole->input_ids[1 + 10 * w]) << "window " << w;
    EXPECT_EQ(in.offsets[1], whole->offsets[1 + 10 * w]);
  }
  EXPECT_EQ((*windows).back().sequence.input_ids[(*windows).back().sequence.input_ids.size() - 2],
            whole->input_ids[whole->input_ids.size() - 2]);
}

// The entities of the windows, merged, are those of the whole text where the model decides each
// token alone and every entity fits in the windows' overlap (a stride of at least its 4 tokens):
// an entity cut by a window's edge loses to the whole one of the next window, the longer.
TEST_F(TokenClassificationTest, StrideWindowsMergeToTheWholeTextsEntities) {
  for (AggregationStrategy s : {AggregationStrategy::kSimple, AggregationStrategy::kFirst, AggregationStrategy::kMax,
                                AggregationStrategy::kAverage}) {
    SCOPED_TRACE(AggregationStrategyName(s));
    TokenClassifyRequest r;
    r.texts = {kLong, "Ada in Turin."};
    r.aggregation_strategy = s;
    r.model = "long";
    auto want = Call(r);
    ASSERT_TRUE(want.ok()) << want.status();
    r.model = "short";
    for (int stride : {4, 7}) {
      r.stride = stride;
      auto got = Call(r);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->results.size(), 2u);
      EXPECT_GT(got->usage.sequences, 3);
      for (size_t t = 0; t < 2; ++t) {
        ASSERT_EQ(got->results[t].size(), want->results[t].size()) << "stride " << stride;
        for (size_t i = 0; i < got->results[t].size(); ++i) {
          EXPECT_EQ(got->results[t][i].entity, want->results[t][i].entity);
          EXPECT_EQ(got->results[t][i].word, want->results[t][i].word);
          EXPECT_EQ(got->results[t][i].start, want->results[t][i].start);
          EXPECT_EQ(got->results[t][i].end, want->results[t][i].end);
          EXPECT_NEAR(got->results[t][i].score, want->results[t][i].score, 1e-9);
        }
      }
    }
  }
}

TEST(AggregationStrategyTest, ThePipelinesNamesInAnyCase) {
  EXPECT_EQ(*ParseAggregationStrategy("SIMPLE", "s"), AggregationStrategy::kSimple);
  EXPECT_EQ(*ParseAggregationStrategy("average", "s"), AggregationStrategy::kAverage);
  EXPECT_EQ(*ParseAggregationStrategy("None", "s"), AggregationStrategy::kNone);
  auto bad = ParseAggregationStrategy("mean", "parameters.aggregation_strategy");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("none, simple, first, average, max"));
}

}  // namespace
}  // namespace relserve
