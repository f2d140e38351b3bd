// Directories whose tokenizer is only tokenizer.json: small Unigram, WordPiece and byte-level
// BPE files written here, their switches and templates, and every way such a file can be
// refused (each naming the file, the component and what is supported).

#include "server/tokenizer/files/tokenizer_json.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;
using json = nlohmann::json;

const std::string kSpace = "\xe2\x96\x81";  // SentencePiece's "▁"

json AddedToken(int id, const std::string& content, bool special = true) {
  return json{{"id", id},          {"content", content}, {"single_word", false}, {"lstrip", false},
              {"rstrip", false},   {"normalized", !special}, {"special", special}};
}

json Special(const std::string& name) {
  return json{{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
}
json Special(const std::string& name, int type_id) {
  return json{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
}
json Sequence(const std::string& id, int type_id) {
  return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
}
json SpecialTokens(const std::vector<std::pair<std::string, int>>& tokens) {
  json out = json::object();
  for (const auto& [name, id] : tokens) {
    out[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  }
  return out;
}

// A list of pairs (nlohmann reads a braced list of pairs as an object).
json Pieces(const std::vector<std::pair<std::string, double>>& pieces) {
  json out = json::array();
  for (const auto& [piece, score] : pieces) out.push_back(json::array({piece, score}));
  return out;
}
json Merges(const std::vector<std::pair<std::string, std::string>>& merges) {
  json out = json::array();
  for (const auto& [a, b] : merges) out.push_back(json::array({a, b}));
  return out;
}

// A DeBERTa-v3-style tokenizer.json, as DebertaV2Converter writes one, over nine pieces:
// [PAD] [CLS] [SEP] [UNK] ▁ a b ▁ab ab, and [MASK] added at 9.
json UnigramJson() {
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens",
       {AddedToken(0, "[PAD]"), AddedToken(1, "[CLS]"), AddedToken(2, "[SEP]"),
        AddedToken(3, "[UNK]"), AddedToken(9, "[MASK]")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
          {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}}}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "always"},
           {"split", true}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {Special("[CLS]"), Sequence("A", 0), Special("[SEP]")}},
        {"pair",
         {Special("[CLS]"), Sequence("A", 0), Special("[SEP]"), Sequence("B", 1),
          Special("[SEP]", 1)}},
        {"special_tokens", SpecialTokens({{"[CLS]", 1}, {"[SEP]", 2}})}}},
      {"decoder", nullptr},
      {"model",
       {{"type", "Unigram"},
        {"unk_id", 3},
        {"vocab", Pieces({{"[PAD]", 0.0}, {"[CLS]", 0.0}, {"[SEP]", 0.0}, {"[UNK]", 0.0},
                          {kSpace, -2.0}, {"a", -3.0}, {"b", -3.0}, {kSpace + "ab", -1.0},
                          {"ab", -2.0}})},
        {"byte_fallback", false}}}};
}

json WordPieceJson() {
  return json{
      {"version", "1.0"},
      {"added_tokens",
       {AddedToken(0, "[PAD]"), AddedToken(1, "[UNK]"), AddedToken(2, "[CLS]"),
        AddedToken(3, "[SEP]"), AddedToken(4, "[MASK]")}},
      {"normalizer",
       {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
        {"strip_accents", nullptr}, {"lowercase", true}}},
      {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {Special("[CLS]"), Sequence("A", 0), Special("[SEP]")}},
        {"pair",
         {Special("[CLS]"), Sequence("A", 0), Special("[SEP]"), Sequence("B", 1),
          Special("[SEP]", 1)}},
        {"special_tokens", SpecialTokens({{"[CLS]", 2}, {"[SEP]", 3}})}}},
      {"model",
       {{"type", "WordPiece"},
        {"unk_token", "[UNK]"},
        {"continuing_subword_prefix", "##"},
        {"max_input_chars_per_word", 100},
        {"vocab",
         {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}, {"[MASK]", 4}, {"hello", 5},
          {"world", 6}, {"##s", 7}, {"caf", 8}, {"##e", 9}}}}}};
}

// RoBERTa's: byte-level BPE with "Ġ" for a space.
json BpeJson() {
  return json{
      {"version", "1.0"},
      {"added_tokens",
       {AddedToken(0, "<s>"), AddedToken(1, "<pad>"), AddedToken(2, "</s>"),
        AddedToken(3, "<unk>"), AddedToken(9, "<mask>")}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "RobertaProcessing"},
        {"sep", {"</s>", 2}},
        {"cls", {"<s>", 0}},
        {"trim_offsets", true},
        {"add_prefix_space", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab",
         {{"<s>", 0}, {"<pad>", 1}, {"</s>", 2}, {"<unk>", 3}, {"\xc4\xa0", 4}, {"h", 5},
          {"i", 6}, {"hi", 7}, {"\xc4\xa0hi", 8}}},
        {"merges", {"h i", "\xc4\xa0 hi"}}}}};
}

std::string WriteDir(const std::string& name, const json& tokenizer_json) {
  const std::string dir = MakeTempDir(name);
  WriteFile(JoinPath(dir, "tokenizer.json"), tokenizer_json.dump());
  return dir;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadJson(const std::string& name,
                                                    const json& tokenizer_json,
                                                    TokenizerFamily family) {
  return Tokenizer::Load(WriteDir(name, tokenizer_json), family, 512);
}

std::unique_ptr<Tokenizer> MustLoad(const std::string& name, const json& tokenizer_json,
                                    TokenizerFamily family) {
  auto tokenizer = LoadJson(name, tokenizer_json, family);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// The ids of `text`, without special tokens, under the tokenizer `tokenizer_json` describes.
std::vector<int32_t> RawIds(const std::string& name, const json& tokenizer_json, TokenizerFamily family,
                            const std::string& text) {
  std::unique_ptr<Tokenizer> tokenizer = MustLoad(name, tokenizer_json, family);
  if (tokenizer == nullptr) return {};
  auto ids = tokenizer->EncodeRaw(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

// The load fails with INVALID_ARGUMENT and a message holding every one of `parts`.
void ExpectRefused(const std::string& name, const json& tokenizer_json, TokenizerFamily family,
                   const std::vector<std::string>& parts) {
  auto tokenizer = LoadJson(name, tokenizer_json, family);
  ASSERT_FALSE(tokenizer.ok()) << name;
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument) << tokenizer.status();
  for (const std::string& part : parts) {
    EXPECT_NE(tokenizer.status().message().find(part), std::string::npos)
        << name << ": \"" << part << "\" not in: " << tokenizer.status().message();
  }
}

TEST(TokenizerJsonTest, UnigramOnlyDirectoryEncodesWithItsTemplate) {
  auto tokenizer = MustLoad("unigram", UnigramJson(), TokenizerFamily::kDeberta);
  ASSERT_NE(tokenizer, nullptr);
  auto single = tokenizer->Encode("ab   ab ");
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->input_ids, (std::vector<int32_t>{1, 7, 7, 2}));
  auto pair = tokenizer->EncodePair("ab", "b");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, (std::vector<int32_t>{1, 7, 2, 4, 6, 2}));
  EXPECT_EQ(pair->token_type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  // [MASK] comes from added_tokens, beyond the pieces, and is split out of text.
  EXPECT_EQ(tokenizer->mask_id(), 9);
  EXPECT_EQ(tokenizer->vocab_size(), 10);
  auto masked = tokenizer->EncodeRaw("ab[MASK]b");
  ASSERT_TRUE(masked.ok()) << masked.status();
  EXPECT_EQ(*masked, (std::vector<int32_t>{7, 9, 4, 6}));
  EXPECT_EQ(tokenizer->pad_id(), 0);
  EXPECT_EQ(tokenizer->unk_id(), 3);
  EXPECT_FALSE(tokenizer->lower_case());
}

TEST(TokenizerJsonTest, TemplateComesFromThePostProcessor) {
  json file = UnigramJson();
  // [SEP] text [CLS], the pair's second text typed 0.
  file["post_processor"]["single"] = {Special("[SEP]"), Sequence("A", 0), Special("[CLS]")};
  file["post_processor"]["pair"] = {Sequence("A", 0), Special("[SEP]"), Sequence("B", 0)};
  auto tokenizer = MustLoad("template", file, TokenizerFamily::kDeberta);
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->NumSpecialTokens(false), 2);
  EXPECT_EQ(tokenizer->NumSpecialTokens(true), 1);
  auto single = tokenizer->Encode("ab");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->input_ids, (std::vector<int32_t>{2, 7, 1}));
  auto pair = tokenizer->EncodePair("ab", "ab");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->input_ids, (std::vector<int32_t>{7, 2, 7}));
  EXPECT_EQ(pair->token_type_ids, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(pair->sequence_ids, (std::vector<int8_t>{0, -1, 1}));
  // Truncation keeps room for exactly the template's special tokens.
  TokenizeOptions opts;
  opts.max_length = 3;
  auto cut = tokenizer->Encode("ab ab ab", opts);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->input_ids, (std::vector<int32_t>{2, 7, 1}));
}

TEST(TokenizerJsonTest, NoPostProcessorAddsNoSpecialTokens) {
  json file = UnigramJson();
  file["post_processor"] = nullptr;
  auto tokenizer = MustLoad("no_post", file, TokenizerFamily::kDeberta);
  ASSERT_NE(tokenizer, nullptr);
  auto pair = tokenizer->EncodePair("ab", "b");
  ASSERT_TRUE(pair.ok());
  EXPECT_EQ(pair->input_ids, (std::vector<int32_t>{7, 4, 6}));
  EXPECT_EQ(pair->token_type_ids, (std::vector<int32_t>{0, 1, 1}));
  // T5 takes no token types: 0 throughout whatever the file says.
  auto t5 = MustLoad("no_post_t5", file, TokenizerFamily::kT5);
  ASSERT_NE(t5, nullptr);
  auto t5_pair = t5->EncodePair("ab", "b");
  ASSERT_TRUE(t5_pair.ok());
  EXPECT_EQ(t5_pair->token_type_ids, (std::vector<int32_t>{0, 0, 0}));
}

TEST(TokenizerJsonTest, UnigramSwitches) {
  json lower = UnigramJson();
  lower["normalizer"]["normalizers"].insert(lower["normalizer"]["normalizers"].begin(),
                                            json{{"type", "Lowercase"}});
  auto lowered = MustLoad("lower", lower, TokenizerFamily::kDeberta);
  ASSERT_NE(lowered, nullptr);
  EXPECT_TRUE(lowered->lower_case());
  EXPECT_EQ(*lowered->EncodeRaw("AB"), (std::vector<int32_t>{7}));

  // prepend_scheme never: SentencePiece adds no "▁" before the text.
  json never = UnigramJson();
  never["pre_tokenizer"]["pretokenizers"][0]["prepend_scheme"] = "never";
  EXPECT_EQ(RawIds("never", never, TokenizerFamily::kDeberta, "ab ab"), (std::vector<int32_t>{8, 7}));
  // The same from a file of tokenizers before 0.15.
  json old = UnigramJson();
  old["pre_tokenizer"]["pretokenizers"] = {
      {{"type", "WhitespaceSplit"}},
      {{"type", "Metaspace"}, {"replacement", kSpace}, {"add_prefix_space", false}}};
  EXPECT_EQ(RawIds("old_metaspace", old, TokenizerFamily::kDeberta, "ab ab"), (std::vector<int32_t>{8, 7}));

  // A file of tokenizers before 0.15, as T5's on the Hub: the normalizer alone, WhitespaceSplit
  // and Metaspace with add_prefix_space; runs of spaces fold as with the Replace.
  json t5_style = UnigramJson();
  t5_style["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", nullptr}};
  t5_style["pre_tokenizer"]["pretokenizers"] = {
      {{"type", "WhitespaceSplit"}},
      {{"type", "Metaspace"}, {"replacement", kSpace}, {"add_prefix_space", true}}};
  EXPECT_EQ(RawIds("whitespace_split", t5_style, TokenizerFamily::kDeberta, "  ab   ab "),
            (std::vector<int32_t>{7, 7}));

  // Without the Replace, runs of spaces stay (remove_extra_whitespaces off).
  json spaces = UnigramJson();
  spaces["normalizer"] = nullptr;
  EXPECT_EQ(RawIds("spaces", spaces, TokenizerFamily::kDeberta, "ab  ab"), (std::vector<int32_t>{7, 4, 7}));
}

TEST(TokenizerJsonTest, PunctuationSplitsLikeSplitByPunct) {
  json file = UnigramJson();
  file["pre_tokenizer"]["pretokenizers"].insert(
      file["pre_tokenizer"]["pretokenizers"].begin(),
      json{{"type", "Punctuation"}, {"behavior", "Isolated"}});
  auto split = MustLoad("punct", file, TokenizerFamily::kDeberta);
  auto plain = MustLoad("no_punct", UnigramJson(), TokenizerFamily::kDeberta);
  ASSERT_NE(split, nullptr);
  ASSERT_NE(plain, nullptr);
  // Each side of the comma is encoded on its own, so each gets SentencePiece's "▁".
  std::vector<int32_t> expected = *plain->EncodeRaw("ab");
  for (const char* part : {",", "ab"}) {
    const std::vector<int32_t> ids = *plain->EncodeRaw(part);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(*split->EncodeRaw("ab,ab"), expected);
  EXPECT_NE(*plain->EncodeRaw("ab,ab"), expected);
}

TEST(TokenizerJsonTest, WordPieceOnlyDirectory) {
  auto tokenizer = MustLoad("wordpiece", WordPieceJson(), TokenizerFamily::kBert);
  ASSERT_NE(tokenizer, nullptr);
  auto enc = tokenizer->Encode("Hello worlds, CAFÉ");
  ASSERT_TRUE(enc.ok()) << enc.status();
  // Lower-cased, accents stripped (strip_accents null follows lowercase), "," unknown.
  EXPECT_EQ(enc->input_ids, (std::vector<int32_t>{2, 5, 6, 7, 1, 8, 9, 3}));
  EXPECT_EQ(tokenizer->mask_id(), 4);

  json cased = WordPieceJson();
  cased["normalizer"]["lowercase"] = false;
  auto kept = MustLoad("wordpiece_cased", cased, TokenizerFamily::kBert);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(*kept->EncodeRaw("Hello hello"), (std::vector<int32_t>{1, 5}));

  json sparse = WordPieceJson();
  sparse["model"]["vocab"]["##e"] = 12;
  ExpectRefused("wordpiece_sparse", sparse, TokenizerFamily::kBert,
                {"tokenizer.json", "\"##e\"", "12", "[0, 10)"});
}

TEST(TokenizerJsonTest, ByteLevelBpeOnlyDirectory) {
  auto tokenizer = MustLoad("bpe", BpeJson(), TokenizerFamily::kRoberta);
  ASSERT_NE(tokenizer, nullptr);
  auto enc = tokenizer->EncodePair("hi hi", "hi");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (std::vector<int32_t>{0, 7, 8, 2, 2, 7, 2}));
  EXPECT_EQ(enc->token_type_ids, std::vector<int32_t>(7, 0));
  EXPECT_EQ(tokenizer->mask_id(), 9);

  // Merges as pairs (tokenizers 0.20 and later) mean the same.
  json pairs = BpeJson();
  pairs["model"]["merges"] = Merges({{"h", "i"}, {"\xc4\xa0", "hi"}});
  auto from_pairs = MustLoad("bpe_pairs", pairs, TokenizerFamily::kRoberta);
  ASSERT_NE(from_pairs, nullptr);
  EXPECT_EQ(*from_pairs->EncodeRaw("hi hi"), (std::vector<int32_t>{7, 8}));
  // Without the second merge "Ġhi" stays two tokens.
  pairs["model"]["merges"] = Merges({{"h", "i"}});
  auto fewer = MustLoad("bpe_fewer", pairs, TokenizerFamily::kRoberta);
  ASSERT_NE(fewer, nullptr);
  EXPECT_EQ(*fewer->EncodeRaw("hi hi"), (std::vector<int32_t>{7, 4, 7}));

  json prefix = BpeJson();
  prefix["pre_tokenizer"]["add_prefix_space"] = true;
  auto prefixed = MustLoad("bpe_prefix", prefix, TokenizerFamily::kRoberta);
  ASSERT_NE(prefixed, nullptr);
  EXPECT_EQ(*prefixed->EncodeRaw("hi"), (std::vector<int32_t>{8}));
}

TEST(TokenizerJsonTest, AddedTokenFlagsComeFromTheFile) {
  // Without the Replace, SentencePiece keeps a space at the end of the text before [MASK].
  json plain_file = UnigramJson();
  plain_file["normalizer"] = nullptr;
  json file = plain_file;
  file["added_tokens"][4]["lstrip"] = true;  // [MASK] eats the space before it
  auto tokenizer = MustLoad("lstrip", file, TokenizerFamily::kDeberta);
  ASSERT_NE(tokenizer, nullptr);
  auto plain = MustLoad("no_lstrip", plain_file, TokenizerFamily::kDeberta);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(*tokenizer->EncodeRaw("ab [MASK]"), (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(*plain->EncodeRaw("ab [MASK]"), (std::vector<int32_t>{7, 4, 9}));
}

TEST(TokenizerJsonTest, VocabularyFilesWinWhereBothExist) {
  // A WordPiece directory whose vocab.txt and tokenizer.json disagree: Load reads vocab.txt,
  // LoadTokenizerJson the other.
  const std::string dir = WriteDir("both", WordPieceJson());
  WriteFile(JoinPath(dir, "vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nworld\nhello\n");
  auto from_vocab = Tokenizer::Load(dir, TokenizerFamily::kBert, 512);
  auto from_json = Tokenizer::LoadTokenizerJson(dir, TokenizerFamily::kBert, 512);
  ASSERT_TRUE(from_vocab.ok()) << from_vocab.status();
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(*(*from_vocab)->EncodeRaw("hello"), (std::vector<int32_t>{6}));
  EXPECT_EQ(*(*from_json)->EncodeRaw("hello"), (std::vector<int32_t>{5}));
}

TEST(TokenizerJsonTest, MissingFilesNameTokenizerJson) {
  const std::string dir = MakeTempDir("no_tokenizer");
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tokenizer.status().message().find("tokenizer.json"), std::string::npos);
  auto has = Tokenizer::HasFiles(WriteDir("has_json", UnigramJson()), TokenizerFamily::kT5);
  ASSERT_TRUE(has.ok());
  EXPECT_TRUE(*has);
}

TEST(TokenizerJsonTest, RefusedFilesSayWhy) {
  ExpectRefused("wrong_family", BpeJson(), TokenizerFamily::kDeberta,
                {"tokenizer.json", "holds a BPE model", "DeBERTa tokenizer reads a Unigram model"});
  ExpectRefused("wrong_family_bert", UnigramJson(), TokenizerFamily::kBert,
                {"holds a Unigram model", "BERT tokenizer reads a WordPiece model"});

  json word_level = UnigramJson();
  word_level["model"] = {{"type", "WordLevel"}, {"vocab", {{"a", 0}}}, {"unk_token", "a"}};
  ExpectRefused("word_level", word_level, TokenizerFamily::kDeberta,
                {"model is a WordLevel", "Unigram, WordPiece, BPE"});

  json nfc = UnigramJson();
  nfc["normalizer"]["normalizers"][1] = {{"type", "NFC"}};
  ExpectRefused("nfc", nfc, TokenizerFamily::kDeberta,
                {"normalizer.normalizers[1] is a NFC", "does not support"});

  json nfkd = UnigramJson();
  nfkd["normalizer"]["normalizers"][0] = {{"type", "NFKD"}};
  ExpectRefused("nfkd_deberta", nfkd, TokenizerFamily::kDeberta,
                {"normalizer.normalizers[0] is a NFKD", "DeBERTa tokenizer has no counterpart"});

  json replace = UnigramJson();
  replace["normalizer"]["normalizers"][1]["content"] = "_";
  ExpectRefused("replace", replace, TokenizerFamily::kDeberta,
                {"normalizer.normalizers[1]", "replaces", "does not support"});

  json quotes = UnigramJson();
  quotes["normalizer"]["normalizers"].push_back(
      {{"type", "Replace"}, {"pattern", {{"String", "``"}}}, {"content", "\""}});
  ExpectRefused("quotes", quotes, TokenizerFamily::kT5, {"``", "T5 tokenizer does not"});

  json split = UnigramJson();
  split["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}};
  ExpectRefused("split", split, TokenizerFamily::kDeberta,
                {"pre_tokenizer.pretokenizers[0] is a Split"});

  json punct_t5 = UnigramJson();
  punct_t5["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Punctuation"}});
  ExpectRefused("punct_t5", punct_t5, TokenizerFamily::kT5,
                {"is a Punctuation", "T5 tokenizer has no counterpart"});

  json first = UnigramJson();
  first["pre_tokenizer"]["pretokenizers"][0]["prepend_scheme"] = "first";
  ExpectRefused("first", first, TokenizerFamily::kDeberta,
                {"prepend_scheme \"first\" is T5's", "DeBERTa tokenizer has \"always\" and \"never\""});

  json no_metaspace = UnigramJson();
  no_metaspace["pre_tokenizer"] = nullptr;
  ExpectRefused("no_metaspace", no_metaspace, TokenizerFamily::kDeberta, {"Metaspace"});

  json no_unk = UnigramJson();
  no_unk["model"]["unk_id"] = nullptr;
  ExpectRefused("no_unk", no_unk, TokenizerFamily::kDeberta, {"model", "unk_id"});

  json bad_piece = UnigramJson();
  bad_piece["model"]["vocab"][4] = json::array({kSpace});
  ExpectRefused("bad_piece", bad_piece, TokenizerFamily::kDeberta,
                {"model.vocab[4]", "[piece, score]"});

  json unknown_special = UnigramJson();
  unknown_special["post_processor"]["single"][0] = Special("[X]");
  ExpectRefused("unknown_special", unknown_special, TokenizerFamily::kDeberta,
                {"post_processor.single[0]", "\"[X]\"", "special_tokens lacks"});

  json out_of_vocab = UnigramJson();
  out_of_vocab["post_processor"]["special_tokens"]["[CLS]"]["ids"] = {40};
  ExpectRefused("out_of_vocab", out_of_vocab, TokenizerFamily::kDeberta,
                {"special id 40", "outside the vocabulary of 10"});

  json no_text = UnigramJson();
  no_text["post_processor"]["single"] = {Special("[CLS]")};
  ExpectRefused("no_text", no_text, TokenizerFamily::kDeberta, {"single template", "$A"});

  json added_without_id = UnigramJson();
  added_without_id["added_tokens"][0].erase("id");
  ExpectRefused("added_without_id", added_without_id, TokenizerFamily::kDeberta,
                {"added_tokens[0]", "\"id\""});

  json no_bert_normalizer = WordPieceJson();
  no_bert_normalizer["normalizer"] = nullptr;
  ExpectRefused("no_bert_normalizer", no_bert_normalizer, TokenizerFamily::kBert,
                {"BertNormalizer"});

  json prefix = WordPieceJson();
  prefix["model"]["continuing_subword_prefix"] = "@@";
  ExpectRefused("prefix", prefix, TokenizerFamily::kMpnet, {"continuing_subword_prefix \"@@\""});

  json bpe_suffix = BpeJson();
  bpe_suffix["model"]["end_of_word_suffix"] = "</w>";
  ExpectRefused("bpe_suffix", bpe_suffix, TokenizerFamily::kRoberta, {"end_of_word_suffix"});

  json bad_merge = BpeJson();
  bad_merge["model"]["merges"][1] = "a b c";
  ExpectRefused("bad_merge", bad_merge, TokenizerFamily::kRoberta, {"model.merges[1]"});

  const std::string dir = MakeTempDir("not_json");
  WriteFile(JoinPath(dir, "tokenizer.json"), "{\"model\": ");
  auto broken = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("tokenizer.json"), std::string::npos);
}

TEST(TokenizerJsonTest, ParseReadsEveryComponent) {
  json file = UnigramJson();
  file["normalizer"]["normalizers"].push_back(
      {{"type", "Precompiled"}, {"precompiled_charsmap", "AAEC"}});
  file["normalizer"]["normalizers"].push_back(
      {{"type", "Replace"}, {"pattern", {{"String", "``"}}}, {"content", "\""}});
  auto parsed = ParseTokenizerJson(file, "t.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->model_type, TokenizerJson::ModelType::kUnigram);
  EXPECT_EQ(parsed->unigram_vocab.size(), 9u);
  EXPECT_EQ(parsed->unk_id, 3);
  EXPECT_EQ(parsed->precompiled_charsmap, std::string("\x00\x01\x02", 3));
  EXPECT_TRUE(parsed->collapse_spaces);
  EXPECT_TRUE(parsed->replace_quotes);
  EXPECT_TRUE(parsed->metaspace);
  EXPECT_EQ(parsed->prepend_scheme, "always");
  ASSERT_EQ(parsed->added_tokens.size(), 5u);
  EXPECT_EQ(parsed->added_tokens[4].first, 9);
  EXPECT_EQ(parsed->added_tokens[4].second.content, "[MASK]");
  EXPECT_TRUE(parsed->added_tokens[4].second.flags.special);
  ASSERT_TRUE(parsed->post_processor.has_value());
  ASSERT_EQ(parsed->post_processor->pair.size(), 5u);
  EXPECT_EQ(parsed->post_processor->pair[3].sequence, 1);
  EXPECT_EQ(parsed->post_processor->pair[4].ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(parsed->post_processor->pair[4].type_id, 1);

  file["normalizer"]["normalizers"].back() = {{"type", "Precompiled"},
                                              {"precompiled_charsmap", "not base64!"}};
  auto bad = ParseTokenizerJson(file, "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("base64"), std::string::npos);
}

}  // namespace
}  // namespace relserve
