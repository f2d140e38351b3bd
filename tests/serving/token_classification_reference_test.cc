// Token classification against transformers 4.40.2's TokenClassificationPipeline
// (tests/data/ner: a BERT WordPiece model and a DeBERTa-v3 SentencePiece model, every text with
// every aggregation strategy and ignore_labels), with the tokenizer read from tokenizer.json and
// from the slow vocabulary files: the model's token logits (the engine), then the pipeline's
// post-processing (token_classification.h).

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/serving/token_classification.h"
#include "server/tokenizer/tokenizer.h"

namespace relserve {
namespace {

using nlohmann::json;

const std::string kData = std::string(RELSERVE_TEST_DATA_DIR) + "/ner";

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

const json& Expected() {
  static const json* j = new json(ReadJson(kData + "/ner_expected.json"));
  return *j;
}

struct Param {
  std::string model;      // folder under tests/data/ner
  TokenizerFamily family;
  bool tokenizer_json;    // tokenizer.json, else the slow vocabulary file
};

std::string Name(const ::testing::TestParamInfo<Param>& p) {
  return p.param.model + (p.param.tokenizer_json ? "_tokenizer_json" : "_vocab_file");
}

class TokenClassificationReferenceTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    const std::string dir = kData + "/" + GetParam().model;
    auto tokenizer = GetParam().tokenizer_json ? Tokenizer::LoadTokenizerJson(dir, GetParam().family, 512)
                                               : Tokenizer::Load(dir, GetParam().family, 512);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    ASSERT_EQ(tokenizer_->source_file(), GetParam().tokenizer_json ? "tokenizer.json"
                                         : GetParam().family == TokenizerFamily::kBert ? "vocab.txt"
                                                                                       : "spm.model");
    auto engine = Engine::Load(dir, EngineOptions{});
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  // The token logits of a text's windows.
  std::vector<std::vector<float>> Logits(const std::vector<EncodedInput>& windows) {
    std::vector<SequenceInput> batch;
    for (const EncodedInput& w : windows) batch.push_back(w.sequence);
    auto out = engine_->Run(batch, kOutputTokenLogits);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<std::vector<float>> logits;
    for (SequenceOutput& o : *out) logits.push_back(std::move(o.token_logits));
    return logits;
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
};

TEST_P(TokenClassificationReferenceTest, EveryTextAndCaseAsThePipeline) {
  const json& model = Expected()["models"][GetParam().model];
  const std::vector<std::string> labels = Expected()["labels"].get<std::vector<std::string>>();
  ASSERT_EQ(engine_->info().token_labels, labels);
  EXPECT_TRUE(engine_->info().labels.empty());
  int compared = 0;
  for (const json& t : model["texts"]) {
    const std::string text = t["text"].get<std::string>();
    SCOPED_TRACE(text);
    auto windows = EncodeTokenClassificationText(text, "inputs[0]", *tokenizer_, *engine_, 512, std::nullopt);
    ASSERT_TRUE(windows.ok()) << windows.status();
    ASSERT_EQ(windows->size(), 1u);
    EXPECT_EQ(windows->front().sequence.input_ids, t["input_ids"].get<std::vector<int32_t>>());
    const std::vector<std::vector<float>> logits = Logits(*windows);
    for (const json& c : Expected()["cases"]) {
      const std::string name = c["name"].get<std::string>();
      SCOPED_TRACE(name);
      const json& p = c["parameters"];
      auto strategy = ParseAggregationStrategy(p["aggregation_strategy"].get<std::string>(), "aggregation_strategy");
      ASSERT_TRUE(strategy.ok());
      const std::vector<std::string> ignore =
          p.contains("ignore_labels") ? p["ignore_labels"].get<std::vector<std::string>>() : std::vector<std::string>{"O"};
      const std::vector<TokenEntity> got =
          TokenEntities(text, *windows, {&logits[0]}, labels, *tokenizer_, *strategy, ignore);
      const json& want = t["expected"][name];
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE(i);
        const json& w = want[i];
        const bool none = *strategy == AggregationStrategy::kNone;
        EXPECT_EQ(got[i].entity, w[none ? "entity" : "entity_group"].get<std::string>());
        EXPECT_NEAR(got[i].score, w["score"].get<double>(), 1e-5);
        EXPECT_EQ(got[i].word, w["word"].get<std::string>());
        EXPECT_EQ(got[i].start, w["start"].get<int64_t>());
        EXPECT_EQ(got[i].end, w["end"].get<int64_t>());
        if (none) {
          EXPECT_EQ(got[i].index, w["index"].get<int32_t>());
        }
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 100);
}

// The tokenizer's offsets, in characters, are the fast tokenizer's for every text (a
// SentencePiece piece covers the space before it, after a run of spaces only the last).
TEST_P(TokenClassificationReferenceTest, CharacterOffsetsAsTheFastTokenizer) {
  const json& model = Expected()["models"][GetParam().model];
  for (const json& t : model["texts"]) {
    const std::string text = t["text"].get<std::string>();
    SCOPED_TRACE(text);
    auto windows = EncodeTokenClassificationText(text, "inputs[0]", *tokenizer_, *engine_, 512, std::nullopt);
    ASSERT_TRUE(windows.ok()) << windows.status();
    const EncodedInput& w = windows->front();
    const json& offsets = t["offsets"];
    ASSERT_EQ(w.offsets.size(), offsets.size());
    // One entry per token with aggregation none and nothing ignored: its span in characters.
    const std::vector<float> zeros(w.offsets.size() * 9, 0.0f);
    const std::vector<TokenEntity> tokens =
        TokenEntities(text, *windows, {&zeros}, Expected()["labels"].get<std::vector<std::string>>(), *tokenizer_,
                      AggregationStrategy::kNone, {});
    size_t k = 0;
    for (size_t i = 0; i < w.offsets.size(); ++i) {
      if (w.special[i]) continue;
      ASSERT_LT(k, tokens.size());
      EXPECT_EQ(tokens[k].index, static_cast<int32_t>(i));
      EXPECT_EQ(tokens[k].start, offsets[i][0].get<int64_t>()) << "token " << i;
      EXPECT_EQ(tokens[k].end, offsets[i][1].get<int64_t>()) << "token " << i;
      ++k;
    }
    EXPECT_EQ(k, tokens.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TokenClassificationReferenceTest,
                         ::testing::Values(Param{"ner_bert", TokenizerFamily::kBert, true},
                                           Param{"ner_bert", TokenizerFamily::kBert, false},
                                           Param{"ner_deberta", TokenizerFamily::kDeberta, true},
                                           Param{"ner_deberta", TokenizerFamily::kDeberta, false}),
                         Name);

}  // namespace
}  // namespace relserve
