// Every tokenizer fixture read from tokenizer.json alone (tests/data/tokenizer_json: the file
// transformers 4.40.2's converters write for the slow tokenizer of the reference data) gives
// the reference outputs, and exactly what the slow tokenizer's own files give for a battery
// of texts: ids, token types, masks, offsets, truncation, special ids and vocabulary size.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/json_util.h"
#include "tests/tokenizer/reference_case_util.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::ExpectCase;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;

std::string DataPath(const std::string& relative) {
  return JoinPath(RELSERVE_TEST_DATA_DIR, relative);
}

nlohmann::json ReadJson(const std::string& relative) {
  auto json = ReadJsonFile(DataPath(relative));
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *std::move(json) : nlohmann::json();
}

// Two directories: one with the slow tokenizer's vocabulary file, one with only the fixture's
// tokenizer.json; both with the same tokenizer_config.json when one is given.
struct TokenizerPair {
  std::unique_ptr<Tokenizer> slow;
  std::unique_ptr<Tokenizer> fast_file;
};

TokenizerPair LoadPair(const std::string& fixture, const std::string& vocab_source,
                       const std::string& vocab_name, TokenizerFamily family,
                       const std::string& config_json = "") {
  TokenizerPair pair;
  const std::string slow_dir = MakeTempDir(fixture + "_slow");
  CopyFile(DataPath(vocab_source), JoinPath(slow_dir, vocab_name));
  const std::string json_dir = MakeTempDir(fixture + "_json");
  CopyFile(DataPath("tokenizer_json/" + fixture + "/tokenizer.json"),
           JoinPath(json_dir, "tokenizer.json"));
  if (!config_json.empty()) {
    WriteFile(JoinPath(slow_dir, "tokenizer_config.json"), config_json);
    WriteFile(JoinPath(json_dir, "tokenizer_config.json"), config_json);
  }
  auto slow = Tokenizer::Load(slow_dir, family, 512);
  auto fast_file = Tokenizer::Load(json_dir, family, 512);
  EXPECT_TRUE(slow.ok()) << slow.status();
  EXPECT_TRUE(fast_file.ok()) << fixture << ": " << fast_file.status();
  if (slow.ok()) pair.slow = *std::move(slow);
  if (fast_file.ok()) pair.fast_file = *std::move(fast_file);
  return pair;
}

// The texts both loads must agree on: every text of the reference cases, and more.
std::vector<std::string> Battery() {
  std::vector<std::string> texts = {
      "",
      " ",
      "Hello world",
      "  leading and trailing   spaces  ",
      "MiXeD CaSe \xC3\x89T\xC3\x89 \xC4\xB0stanbul \xCE\xA3\xCE\xA3",
      "accents: caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9 \xC3\xB1",
      "full-width \xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3 and \xEF\xBC\x91\xEF\xBC\x92",
      "CJK \xE4\xB8\xAD\xE6\x96\x87\xE6\x97\xA5\xE6\x9C\xAC and emoji \xF0\x9F\x98\x80!",
      "numbers 1,000, 2,5 and 19, 9,",
      "tabs\tand\nnew\r\nlines",
      "punctuation: (a), [b]; {c}! \"quoted\" ``twice'' - dash \xE2\x80\x93 en",
      "special [CLS] [SEP] [MASK] [PAD] [UNK] </s> <pad> <unk> <mask> <cls> <sep> <s>",
      "extra <extra_id_0> and <extra_id_99>x<extra_id_3> ids",
      "zero\xE2\x80\x8Bwidth and soft\xC2\xADhyphen and nbsp\xC2\xA0here",
      "\xE2\x96\x81" "already metaspace\xE2\x96\x81",
      "The licensee may redistribute the Software, provided that the copyright notice appears.",
  };
  for (const char* relative :
       {"reference/tokenizer/cases.json", "reference/tokenizer_xlnet/cases.json",
        "reference/tokenizer_wordpiece/cases.json"}) {
    const nlohmann::json reference = ReadJson(relative);
    for (const nlohmann::json& c : reference["cases"]) {
      for (const char* key : {"text"}) {
        if (c.contains(key)) texts.push_back(c[key].get<std::string>());
      }
      for (const char* key : {"texts", "text_pair"}) {
        if (c.contains(key)) {
          for (const auto& text : c[key]) texts.push_back(text.get<std::string>());
        }
      }
      if (c.contains("text_pairs")) {
        for (const auto& pair : c["text_pairs"]) {
          for (const auto& text : pair) texts.push_back(text.get<std::string>());
        }
      }
    }
  }
  return texts;
}

void ExpectSameEncoding(const absl::StatusOr<Encoding>& slow, const absl::StatusOr<Encoding>& fast,
                        const std::string& what) {
  ASSERT_EQ(slow.ok(), fast.ok()) << what << ": " << slow.status() << " / " << fast.status();
  if (!slow.ok()) return;
  EXPECT_EQ(slow->input_ids, fast->input_ids) << what;
  EXPECT_EQ(slow->token_type_ids, fast->token_type_ids) << what;
  EXPECT_EQ(slow->attention_mask, fast->attention_mask) << what;
  EXPECT_EQ(slow->offsets, fast->offsets) << what;
  EXPECT_EQ(slow->sequence_ids, fast->sequence_ids) << what;
  EXPECT_EQ(slow->truncated, fast->truncated) << what;
}

// `skip`: texts left out, by a substring.
void ExpectSameTokenizer(const TokenizerPair& pair, const std::string& skip = "") {
  ASSERT_NE(pair.slow, nullptr);
  ASSERT_NE(pair.fast_file, nullptr);
  const Tokenizer& slow = *pair.slow;
  const Tokenizer& fast = *pair.fast_file;
  EXPECT_EQ(slow.vocab_size(), fast.vocab_size());
  EXPECT_EQ(slow.pad_id(), fast.pad_id());
  EXPECT_EQ(slow.unk_id(), fast.unk_id());
  EXPECT_EQ(slow.cls_id(), fast.cls_id());
  EXPECT_EQ(slow.sep_id(), fast.sep_id());
  EXPECT_EQ(slow.eos_id(), fast.eos_id());
  EXPECT_EQ(slow.mask_id(), fast.mask_id());
  EXPECT_EQ(slow.lower_case(), fast.lower_case());
  EXPECT_EQ(slow.NumSpecialTokens(false), fast.NumSpecialTokens(false));
  EXPECT_EQ(slow.NumSpecialTokens(true), fast.NumSpecialTokens(true));
  for (int id = 0; id < slow.vocab_size(); ++id) {
    ASSERT_EQ(slow.IdToPiece(id), fast.IdToPiece(id)) << "id " << id;
  }
  const std::vector<std::string> texts = Battery();
  TokenizeOptions short_opts;
  short_opts.max_length = 8;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& text = texts[i];
    if (!skip.empty() && text.find(skip) != std::string::npos) continue;
    ExpectSameEncoding(slow.Encode(text), fast.Encode(text), "text: " + text);
    ExpectSameEncoding(slow.Encode(text, short_opts), fast.Encode(text, short_opts),
                       "truncated text: " + text);
    const std::string& other = texts[(i * 7 + 3) % texts.size()];
    if (!skip.empty() && other.find(skip) != std::string::npos) continue;
    ExpectSameEncoding(slow.EncodePair(text, other), fast.EncodePair(text, other),
                       "pair: " + text + " | " + other);
  }
}

TEST(TokenizerJsonReferenceTest, DebertaGivesTheReferencePieces) {
  TokenizerPair pair = LoadPair("deberta", "reference/tokenizer/spm.model", "spm.model",
                                TokenizerFamily::kDeberta);
  ASSERT_NE(pair.fast_file, nullptr);
  const nlohmann::json reference = ReadJson("reference/tokenizer/cases.json");
  ASSERT_FALSE(reference["cases"].empty());
  for (const nlohmann::json& c : reference["cases"]) {
    auto ids = pair.fast_file->EncodeRaw(c["text"].get<std::string>());
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << c["text"];
  }
  ExpectSameTokenizer(pair);
}

TEST(TokenizerJsonReferenceTest, DebertaLowerCase) {
  TokenizerPair pair = LoadPair("deberta_lower", "reference/tokenizer/spm.model", "spm.model",
                                TokenizerFamily::kDeberta, R"({"do_lower_case": true})");
  ASSERT_NE(pair.fast_file, nullptr);
  EXPECT_TRUE(pair.fast_file->lower_case());
  ExpectSameTokenizer(pair);
  // The file alone says it: no tokenizer_config.json beside it.
  const std::string dir = MakeTempDir("deberta_lower_alone");
  CopyFile(DataPath("tokenizer_json/deberta_lower/tokenizer.json"), JoinPath(dir, "tokenizer.json"));
  auto alone = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE((*alone)->lower_case());
  EXPECT_EQ(*(*alone)->EncodeRaw("HELLO World"), *pair.slow->EncodeRaw("hello world"));
}

TEST(TokenizerJsonReferenceTest, DebertaSplitByPunct) {
  TokenizerPair pair = LoadPair("deberta_punct", "reference/tokenizer/spm.model", "spm.model",
                                TokenizerFamily::kDeberta, R"({"split_by_punct": true})");
  ExpectSameTokenizer(pair);
  auto plain = Tokenizer::LoadModelFile(DataPath("reference/tokenizer/spm.model"),
                                        TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(plain.ok());
  ASSERT_NE(pair.fast_file, nullptr);
  EXPECT_NE(*pair.fast_file->EncodeRaw("(a), b."), *(*plain)->EncodeRaw("(a), b."));
}

TEST(TokenizerJsonReferenceTest, T5GivesTheCasePieces) {
  TokenizerPair pair =
      LoadPair("t5", "tokenizer_json/t5/spiece.model", "spiece.model", TokenizerFamily::kT5);
  ASSERT_NE(pair.slow, nullptr);
  ASSERT_NE(pair.fast_file, nullptr);
  const nlohmann::json cases = ReadJson("tokenizer_json/t5/cases.json");
  ASSERT_FALSE(cases["cases"].empty());
  for (const nlohmann::json& c : cases["cases"]) {
    const std::string text = c["text"].get<std::string>();
    // SentencePiece's ids where the text holds no special token; T5's <extra_id_N> and </s>
    // written in the text are those tokens in both loads (checked by ExpectSameTokenizer).
    if (text.find('<') != std::string::npos) continue;
    auto ids = pair.fast_file->EncodeRaw(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>()) << text;
  }
  EXPECT_EQ(pair.fast_file->eos_id(), 1);
  EXPECT_EQ(pair.fast_file->vocab_size(), 1100);
  ExpectSameTokenizer(pair);
}

TEST(TokenizerJsonReferenceTest, XlnetEveryCase) {
  TokenizerPair pair = LoadPair("xlnet", "reference/tokenizer_xlnet/spiece.model", "spiece.model",
                                TokenizerFamily::kXlnet);
  ASSERT_NE(pair.fast_file, nullptr);
  const nlohmann::json reference = ReadJson("reference/tokenizer_xlnet/cases.json");
  ASSERT_EQ(reference["cases"].size(), 25u);
  for (const nlohmann::json& c : reference["cases"]) {
    ExpectCase(*pair.fast_file, c, c["xlnet"], c["tokens"]);
  }
  ExpectSameTokenizer(pair);
}

TEST(TokenizerJsonReferenceTest, XlnetLowerCaseKeepAccents) {
  TokenizerPair pair = LoadPair("xlnet_lower_keep_accents", "reference/tokenizer_xlnet/spiece.model",
                                "spiece.model", TokenizerFamily::kXlnet,
                                R"({"do_lower_case": true, "keep_accents": true})");
  ExpectSameTokenizer(pair);
}

// XLMRobertaTokenizer: sentencepiece.bpe.model read with fairseq's ids, against the
// tokenizer.json XLMRobertaConverter writes in that order. The model stands in for XLM-R's and
// also holds <pad> (SentencePiece id 5) and <mask>, so, as in transformers, the pad token is
// the model's <pad> at 6.
TEST(TokenizerJsonReferenceTest, XlmRobertaFairseqIds) {
  TokenizerPair pair = LoadPair("xlm_roberta", "tokenizer_json/xlm_roberta/sentencepiece.bpe.model",
                                "sentencepiece.bpe.model", TokenizerFamily::kXlmRoberta);
  ASSERT_NE(pair.slow, nullptr);
  ASSERT_NE(pair.fast_file, nullptr);
  for (const Tokenizer* t : {pair.slow.get(), pair.fast_file.get()}) {
    EXPECT_EQ(t->cls_id(), 0);
    EXPECT_EQ(t->pad_id(), 6);
    EXPECT_EQ(t->sep_id(), 2);
    EXPECT_EQ(t->eos_id(), 2);
    EXPECT_EQ(t->unk_id(), 3);
    EXPECT_EQ(t->mask_id(), 1001);
    EXPECT_EQ(t->vocab_size(), 1002);
  }
  // Every text piece is SentencePiece's id plus one; unknown pieces are <unk> (3).
  auto spm = SentencePieceModel::Load(DataPath("tokenizer_json/xlm_roberta/sentencepiece.bpe.model"));
  ASSERT_TRUE(spm.ok()) << spm.status();
  for (const std::string& text : Battery()) {
    if (text.find('<') != std::string::npos) continue;  // special tokens written in the text
    auto spans = (*spm)->Encode(text);
    ASSERT_TRUE(spans.ok());
    std::vector<int32_t> want;
    for (const SentencePieceSpan& span : *spans) want.push_back(span.id == 0 ? 3 : span.id + 1);
    EXPECT_EQ(*pair.slow->EncodeRaw(text), want) << text;
  }
  auto enc = pair.slow->EncodePair("a", "b");
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->input_ids.front(), 0);
  EXPECT_EQ(std::count(enc->input_ids.begin(), enc->input_ids.end(), 2), 3);  // </s> </s> ... </s>
  // The stand-in's control pieces <cls>, <sep> and <eod> are no special tokens of XLM-R, so
  // tokenizer.json lists them as plain pieces of score 0, which reads as user-defined: written
  // in a text they are those pieces, where the slow tokenizer spells them out. XLM-R's own
  // model has no such pieces.
  ExpectSameTokenizer(pair, "<cls>");
}

class WordPieceJsonReferenceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(WordPieceJsonReferenceTest, EveryCase) {
  const std::string name = GetParam();
  const nlohmann::json reference = ReadJson("reference/tokenizer_wordpiece/cases.json");
  const std::string vocab = reference["vocab_files"][name]["file"].get<std::string>();
  const TokenizerFamily family = name == "mpnet" ? TokenizerFamily::kMpnet : TokenizerFamily::kBert;
  const std::string config = name == "bert_cased" ? R"({"do_lower_case": false})" : "";
  TokenizerPair pair =
      LoadPair(name, "reference/tokenizer_wordpiece/" + vocab, "vocab.txt", family, config);
  ASSERT_NE(pair.fast_file, nullptr);
  ASSERT_EQ(reference["cases"].size(), 25u);
  for (const nlohmann::json& c : reference["cases"]) {
    ExpectCase(*pair.fast_file, c, c[name], c["tokens"][name]);
  }
  ExpectSameTokenizer(pair);
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, WordPieceJsonReferenceTest,
                         ::testing::Values("bert_uncased", "bert_cased", "mpnet"));

}  // namespace
}  // namespace relserve
