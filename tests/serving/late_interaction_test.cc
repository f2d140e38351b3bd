// ColBERT late interaction in the serving layer (late_interaction.h): each side's tokens, the
// positions scored and MaxSim, against the shared reference fixtures (tests/data/colbert:
// PyLate 1.4 and Stanford ColBERT's tokenization, read from their code by the fixtures' maker),
// and the switches the fixtures leave at one value, written from pylate/models/colbert.py.
#include "server/serving/late_interaction.h"

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/tokenizer.h"
#include "tests/serving/fake_backend.h"

namespace relserve {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using nlohmann::json;

const json& Expected() {
  static const json* expected = [] {
    std::ifstream in(RELSERVE_TEST_DATA_DIR "/colbert/colbert_expected.json");
    return new json(json::parse(in));
  }();
  return *expected;
}

struct Fixture {
  std::string key;  // in colbert_expected.json's "models"
  std::string dir;
};

const Fixture kFixtures[] = {{"cb_pylate", "colbert_pylate"}, {"cb_stanford", "colbert_stanford"}};

// The rules as the fixture's settings state them, in ids.
LateInteractionInfo InfoOf(const json& settings, bool stanford) {
  LateInteractionInfo li;
  li.enabled = true;
  li.layout = stanford ? "stanford" : "pylate";
  li.query_marker_id = settings[stanford ? "query_marker_id" : "query_prefix_id"].get<int32_t>();
  li.document_marker_id = settings[stanford ? "doc_marker_id" : "document_prefix_id"].get<int32_t>();
  li.query_length = settings[stanford ? "query_maxlen" : "query_length"].get<int>();
  li.document_length = settings[stanford ? "doc_maxlen" : "document_length"].get<int>();
  li.do_query_expansion = stanford || settings["do_query_expansion"].get<bool>();
  li.attend_to_expansion_tokens =
      settings[stanford ? "attend_to_mask_tokens" : "attend_to_expansion_tokens"].get<bool>();
  li.expansion_id = settings["mask_token_id"].get<int32_t>();
  li.skiplist_ids = settings["skiplist_ids"].get<std::vector<int32_t>>();
  return li;
}

std::vector<int32_t> AttentionOf(const SequenceInput& s) {
  std::vector<int32_t> mask(s.input_ids.size(), 1);
  if (s.attended_length > 0) {
    for (size_t t = static_cast<size_t>(s.attended_length); t < mask.size(); ++t) mask[t] = 0;
  }
  return mask;
}

class LateInteractionTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    backend_.set_vocab_size(2014);
    auto tokenizer = Tokenizer::Load(std::string(RELSERVE_TEST_DATA_DIR "/colbert/") + GetParam().dir,
                                     TokenizerFamily::kBert, 256);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    model_ = &Expected()["models"][GetParam().key];
    stanford_ = GetParam().key == "cb_stanford";
    info_ = InfoOf((*model_)["settings"], stanford_);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  const json* model_ = nullptr;
  bool stanford_ = false;
  LateInteractionInfo info_;
  FakeBackend backend_{{}, ""};  // set to the fixtures' 2014 ids in SetUp
};

// The markers and the skiplist as each library finds them: convert_tokens_to_ids of the
// prefix (an added token "[Q] " for PyLate, "[unused0]" for Stanford) and of each punctuation
// word (PyLate), the first id of each encoded (Stanford).
TEST_P(LateInteractionTest, MarkersAndSkiplistIds) {
  const json& settings = (*model_)["settings"];
  const std::string q = settings[stanford_ ? "query_token_id" : "query_prefix"].get<std::string>();
  const std::string d = settings[stanford_ ? "doc_token_id" : "document_prefix"].get<std::string>();
  EXPECT_EQ(tokenizer_->TokenToId(q), info_.query_marker_id);
  EXPECT_EQ(tokenizer_->TokenToId(d), info_.document_marker_id);
  EXPECT_EQ(tokenizer_->mask_id(), info_.expansion_id);
  EXPECT_EQ(tokenizer_->TokenToId("no-such-token"), -1);
  const std::string punctuation = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  std::vector<int32_t> ids;
  for (char ch : punctuation) {
    const std::string word(1, ch);
    ids.push_back(stanford_ ? tokenizer_->EncodeRaw(word)->front() : tokenizer_->TokenToId(word));
  }
  EXPECT_THAT(ids, ::testing::UnorderedElementsAreArray(info_.skiplist_ids));
}

// Each query and document: the ids, the attention mask and the scored positions of the
// reference.
TEST_P(LateInteractionTest, EachSideAsTheReferenceTokenizesIt) {
  for (const char* side_name : {"queries", "documents"}) {
    const LateInteractionSide side =
        std::string(side_name) == "queries" ? LateInteractionSide::kQuery : LateInteractionSide::kDocument;
    for (const json& want : (*model_)[side_name]) {
      const std::string text = want["text"].get<std::string>();
      auto e = EncodeLateInteraction(text, side, "text", *tokenizer_, backend_, info_);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_THAT(e->sequence.input_ids, ElementsAreArray(want["input_ids"].get<std::vector<int32_t>>())) << text;
      EXPECT_THAT(AttentionOf(e->sequence), ElementsAreArray(want["attention_mask"].get<std::vector<int32_t>>()))
          << text;
      EXPECT_THAT(ScoredPositions(e->sequence, side, info_),
                  ElementsAreArray(want["scored_positions"].get<std::vector<int32_t>>()))
          << text;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LateInteractionTest, ::testing::ValuesIn(kFixtures),
                         [](const auto& p) { return p.param.key; });

// PyLate's switches the fixture leaves on (colbert.py tokenize and encode): with
// attend_to_expansion_tokens false the [MASK]s are not attended to but still scored; without
// query expansion a query is not padded and all its tokens are scored; an empty prefix puts no
// marker; a query longer than query_length is cut with [SEP] kept.
class PyLateSwitchesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    backend_.set_vocab_size(2014);
    auto tokenizer = Tokenizer::Load(RELSERVE_TEST_DATA_DIR "/colbert/colbert_pylate", TokenizerFamily::kBert, 256);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    info_ = InfoOf(Expected()["models"]["cb_pylate"]["settings"], false);
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  LateInteractionInfo info_;
  FakeBackend backend_{{}, ""};  // set to the fixtures' 2014 ids in SetUp
};

TEST_F(PyLateSwitchesTest, ExpansionTokensNotAttendedToAreStillScored) {
  info_.attend_to_expansion_tokens = false;
  const json& want = Expected()["models"]["cb_pylate"]["queries"][0];
  auto e = EncodeLateInteraction(want["text"].get<std::string>(), LateInteractionSide::kQuery, "query", *tokenizer_,
                                 backend_, info_);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->sequence.input_ids, ElementsAreArray(want["input_ids"].get<std::vector<int32_t>>()));
  // [CLS] [Q] and the text's tokens through [SEP] attended to; the [MASK]s (id 4) not.
  const std::vector<int32_t>& ids = e->sequence.input_ids;
  const auto first_mask = std::find(ids.begin() + 2, ids.end(), info_.expansion_id) - ids.begin();
  EXPECT_EQ(e->sequence.attended_length, first_mask);
  EXPECT_EQ(ids[first_mask - 1], 3);  // [SEP]
  EXPECT_EQ(ScoredPositions(e->sequence, LateInteractionSide::kQuery, info_).size(), ids.size());
}

TEST_F(PyLateSwitchesTest, WithoutQueryExpansionAQueryIsItsOwnTokens) {
  info_.do_query_expansion = false;
  info_.attend_to_expansion_tokens = false;
  auto e = EncodeLateInteraction("dog", LateInteractionSide::kQuery, "query", *tokenizer_, backend_, info_);
  ASSERT_TRUE(e.ok()) << e.status();
  const std::vector<int32_t> dog = *tokenizer_->EncodeRaw("dog");
  std::vector<int32_t> want = {2, 2012};
  want.insert(want.end(), dog.begin(), dog.end());
  want.push_back(3);
  EXPECT_EQ(e->sequence.input_ids, want);
  EXPECT_EQ(e->sequence.attended_length, 0);
  EXPECT_EQ(ScoredPositions(e->sequence, LateInteractionSide::kQuery, info_).size(), want.size());
}

TEST_F(PyLateSwitchesTest, AnEmptyPrefixPutsNoMarkerAndLongTextsAreCut) {
  info_.query_marker_id = -1;
  info_.document_marker_id = -1;
  auto q = EncodeLateInteraction("  dog  ", LateInteractionSide::kQuery, "query", *tokenizer_, backend_, info_);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->sequence.input_ids.size(), 32u);  // query_length, no marker to make room for
  EXPECT_EQ(q->sequence.input_ids[1], tokenizer_->EncodeRaw("dog")->front());
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "dog sleeps ";
  auto d = EncodeLateInteraction(long_text, LateInteractionSide::kDocument, "documents[0]", *tokenizer_, backend_,
                                 info_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->sequence.input_ids.size(), 80u);
  EXPECT_EQ(d->sequence.input_ids.back(), 3);  // [SEP] kept
  EXPECT_TRUE(d->truncated);
  auto empty = EncodeLateInteraction("   ", LateInteractionSide::kDocument, "documents[2]", *tokenizer_, backend_,
                                     info_);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("documents[2] is empty"));
}

TEST(LateInteractionSideTest, NamesOfEachSide) {
  for (const char* q : {"", "query", "search_query"}) EXPECT_EQ(*LateInteractionSideOf(q, "f"), LateInteractionSide::kQuery);
  for (const char* d : {"document", "passage", "search_document"}) {
    EXPECT_EQ(*LateInteractionSideOf(d, "f"), LateInteractionSide::kDocument);
  }
  auto bad = LateInteractionSideOf("classification", "input_type");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("input_type \"classification\""));
}

// Sum over query vectors of the best dot product with a document vector.
TEST(MaxSimTest, SumOfEachQueryVectorsBestMatch) {
  const std::vector<float> query = {1, 0, 0, 1, 0.6f, 0.8f};  // 3 vectors of 2
  const std::vector<float> document = {0.8f, 0.6f, 0, 1};      // 2 vectors
  // best: max(0.8, 0) + max(0.6, 1) + max(0.48 + 0.48, 0.8) = 0.8 + 1 + 0.96
  EXPECT_NEAR(MaxSim(query, document, 2), 2.76, 1e-6);
  EXPECT_EQ(MaxSim(query, {}, 2), 0);
  EXPECT_EQ(KeptVectors(query, 2, {0, 2}), (std::vector<float>{1, 0, 0.6f, 0.8f}));
}

}  // namespace
}  // namespace relserve
