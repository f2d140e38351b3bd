// BertTokenizer's and MPNetTokenizer's switches (tokenizer_config.json), special tokens written
// in the text, the vocabulary file, offsets and truncation, on a small vocabulary of our own
// and on the reference vocabularies of tests/data/reference/tokenizer_wordpiece.

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/models/wordpiece_text_model.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;
using Ids = std::vector<int32_t>;
using Offsets = std::vector<std::pair<int32_t, int32_t>>;

// One token per line; the id of each is its line number.
const std::vector<std::string> kVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "Hello", "##s", "cafe",
    "caf\xC3\xA9", "Cafe", "Caf\xC3\xA9", ",", ".", "\xE4\xB8\xAD", "\xE6\x96\x87", "##\xE6\x96\x87",
    "a", "b", "c", "[FOO]", "[foo]", "[", "]", "foo", "ab", "##c", "d", "mask", "x", "i", "##b"};

int IdOf(const std::string& token) {
  for (size_t i = 0; i < kVocab.size(); ++i) {
    if (kVocab[i] == token) return static_cast<int>(i);
  }
  ADD_FAILURE() << "not in the test vocabulary: " << token;
  return -1;
}

std::unique_ptr<Tokenizer> LoadBert(const std::string& name, const std::string& config = "",
                                    TokenizerFamily family = TokenizerFamily::kBert) {
  const std::string dir = MakeTempDir("wordpiece_" + name);
  std::string vocab;
  for (const std::string& token : kVocab) vocab += token + "\n";
  WriteFile(JoinPath(dir, "vocab.txt"), vocab);
  if (!config.empty()) WriteFile(JoinPath(dir, "tokenizer_config.json"), config);
  auto tokenizer = Tokenizer::Load(dir, family, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

Ids Raw(const Tokenizer& tokenizer, const std::string& text) {
  auto ids = tokenizer.EncodeRaw(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : Ids{};
}

// The ids of tokens of the reference vocabularies, looked up in the file.
class ReferenceVocab {
 public:
  explicit ReferenceVocab(const std::string& file) {
    std::ifstream in(JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_wordpiece/" + file));
    std::string line;
    for (int id = 0; std::getline(in, line); ++id) ids_.emplace(line, id);
  }
  int operator[](const std::string& token) const {
    auto it = ids_.find(token);
    EXPECT_NE(it, ids_.end()) << token;
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  std::map<std::string, int> ids_;
};

TEST(WordPieceTokenizerTest, LowerCasingOnByDefaultAndOff) {
  auto uncased = LoadBert("uncased");
  auto cased = LoadBert("cased", R"({"do_lower_case": false})");
  ASSERT_NE(uncased, nullptr);
  ASSERT_NE(cased, nullptr);
  EXPECT_TRUE(uncased->lower_case());
  EXPECT_FALSE(cased->lower_case());
  EXPECT_EQ(Raw(*uncased, "Hello WORLD"), (Ids{IdOf("hello"), IdOf("world")}));
  EXPECT_EQ(Raw(*cased, "Hello WORLD"), (Ids{IdOf("Hello"), IdOf("[UNK]")}));
  // Python's str.lower: İ becomes i and a combining dot, which accent stripping then drops.
  EXPECT_EQ(Raw(*uncased, "\xC4\xB0"), (Ids{IdOf("i")}));
}

TEST(WordPieceTokenizerTest, StripAccentsFollowsLowerCasingUnlessSet) {
  const std::string cafe = "Caf\xC3\xA9";
  const std::string decomposed = "Cafe\xCC\x81";  // e + U+0301
  auto lower_default = LoadBert("accents_lower");
  auto lower_keep = LoadBert("accents_lower_keep", R"({"strip_accents": false})");
  auto cased_strip = LoadBert("accents_cased_strip", R"({"do_lower_case": false, "strip_accents": true})");
  auto cased_default = LoadBert("accents_cased", R"({"do_lower_case": false, "strip_accents": null})");
  EXPECT_EQ(Raw(*lower_default, cafe), (Ids{IdOf("cafe")}));
  EXPECT_EQ(Raw(*lower_keep, cafe), (Ids{IdOf("caf\xC3\xA9")}));
  EXPECT_EQ(Raw(*cased_strip, cafe), (Ids{IdOf("Cafe")}));
  EXPECT_EQ(Raw(*cased_default, cafe), (Ids{IdOf("Caf\xC3\xA9")}));
  // NFC first: the decomposed spelling is the same word.
  EXPECT_EQ(Raw(*cased_default, decomposed), (Ids{IdOf("Caf\xC3\xA9")}));
  EXPECT_EQ(Raw(*lower_keep, decomposed), (Ids{IdOf("caf\xC3\xA9")}));
}

TEST(WordPieceTokenizerTest, ChineseCharactersAreWordsUnlessSwitchedOff) {
  auto on = LoadBert("cjk_on");
  auto off = LoadBert("cjk_off", R"({"tokenize_chinese_chars": false})");
  const std::string zhongwen = "\xE4\xB8\xAD\xE6\x96\x87";
  EXPECT_EQ(Raw(*on, zhongwen), (Ids{IdOf("\xE4\xB8\xAD"), IdOf("\xE6\x96\x87")}));
  EXPECT_EQ(Raw(*off, zhongwen), (Ids{IdOf("\xE4\xB8\xAD"), IdOf("##\xE6\x96\x87")}));
  EXPECT_EQ(Raw(*on, "a\xE4\xB8\xAD" "b"), (Ids{IdOf("a"), IdOf("\xE4\xB8\xAD"), IdOf("b")}));
  EXPECT_EQ(Raw(*off, "a\xE4\xB8\xAD" "b"), (Ids{IdOf("[UNK]")}));
}

TEST(WordPieceTokenizerTest, NeverSplitWordsAreKeptWhole) {
  auto plain = LoadBert("never_split_none", R"({"do_lower_case": false})");
  auto cased = LoadBert("never_split_cased", R"({"do_lower_case": false, "never_split": ["[FOO]"]})");
  EXPECT_EQ(Raw(*plain, "x [FOO] x"), (Ids{IdOf("x"), IdOf("["), IdOf("[UNK]"), IdOf("]"), IdOf("x")}));
  EXPECT_EQ(Raw(*cased, "x [FOO] x"), (Ids{IdOf("x"), IdOf("[FOO]"), IdOf("x")}));
  // Only whole words: glued to other text it is split as usual.
  EXPECT_EQ(Raw(*cased, "x[FOO]"), (Ids{IdOf("x"), IdOf("["), IdOf("[UNK]"), IdOf("]")}));
  // transformers lowers the text before the word reaches never_split: "[FOO]" no longer
  // matches, "[foo]" does.
  auto lower_upper = LoadBert("never_split_lower_upper", R"({"never_split": ["[FOO]"]})");
  auto lower = LoadBert("never_split_lower", R"({"never_split": ["[foo]"]})");
  EXPECT_EQ(Raw(*lower_upper, "[FOO]"), (Ids{IdOf("["), IdOf("foo"), IdOf("]")}));
  EXPECT_EQ(Raw(*lower, "[FOO]"), (Ids{IdOf("[foo]")}));
  // A never_split word missing from the vocabulary is the unknown token.
  auto missing = LoadBert("never_split_missing", R"({"never_split": ["zzz"]})");
  EXPECT_EQ(Raw(*missing, "zzz"), (Ids{IdOf("[UNK]")}));
}

TEST(WordPieceTokenizerTest, LongWordsAreUnknown) {
  auto short_words = LoadBert("max_chars", R"({"max_input_chars_per_word": 5})");
  auto standard = LoadBert("max_chars_default");
  EXPECT_EQ(Raw(*standard, "hellos"), (Ids{IdOf("hello"), IdOf("##s")}));
  EXPECT_EQ(Raw(*short_words, "hello"), (Ids{IdOf("hello")}));
  EXPECT_EQ(Raw(*short_words, "hellos"), (Ids{IdOf("[UNK]")}));
  // The default limit is 100 characters: "ab" and 98 "##b" fit, one more b does not.
  const std::string hundred = "a" + std::string(99, 'b');
  Ids pieces = {IdOf("ab")};
  pieces.resize(99, IdOf("##b"));
  EXPECT_EQ(Raw(*standard, hundred), pieces);
  EXPECT_EQ(Raw(*standard, hundred + "b"), (Ids{IdOf("[UNK]")}));
}

TEST(WordPieceTokenizerTest, UnknownWordIsOneTokenCoveringTheWord) {
  auto tokenizer = LoadBert("unknown");
  EXPECT_EQ(Raw(*tokenizer, "abc abz zz"), (Ids{IdOf("ab"), IdOf("##c"), IdOf("[UNK]"), IdOf("[UNK]")}));
  auto enc = tokenizer->Encode("abc abz");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->offsets, (Offsets{{0, 0}, {0, 2}, {2, 3}, {4, 7}, {0, 0}}));
}

TEST(WordPieceTokenizerTest, ControlCharactersGoAndWhiteSpaceSplits) {
  auto tokenizer = LoadBert("control");
  // NUL and BEL vanish (joining a and b), so do U+200B, U+00AD and U+FFFD; tab and U+2028
  // separate words.
  EXPECT_EQ(Raw(*tokenizer, std::string("a\0b c\xE2\x80\x8B\xC2\xAD\xEF\xBF\xBD d\tx\xE2\x80\xA8x", 23)),
            (Ids{IdOf("ab"), IdOf("c"), IdOf("d"), IdOf("x"), IdOf("x")}));
  EXPECT_EQ(Raw(*tokenizer, "a\x07" "b"), (Ids{IdOf("ab")}));
  EXPECT_TRUE(Raw(*tokenizer, " \t\xE2\x80\x83\n").empty());
}

TEST(WordPieceTokenizerTest, PunctuationIsSplitOff) {
  auto tokenizer = LoadBert("punctuation");
  EXPECT_EQ(Raw(*tokenizer, "hello, world."), (Ids{IdOf("hello"), IdOf(","), IdOf("world"), IdOf(".")}));
  // ASCII symbols count as punctuation even where Unicode says otherwise ($ is Sc).
  EXPECT_EQ(Raw(*tokenizer, "a$b"), (Ids{IdOf("a"), IdOf("[UNK]"), IdOf("b")}));
}

TEST(WordPieceTokenizerTest, WithoutBasicTokenizationOnlyWhiteSpaceSplits) {
  auto tokenizer = LoadBert("no_basic", R"({"do_basic_tokenize": false})");
  // No lower-casing and no punctuation splitting: "hello," has no "##," piece.
  EXPECT_EQ(Raw(*tokenizer, "Hello hello, world"), (Ids{IdOf("Hello"), IdOf("[UNK]"), IdOf("world")}));
}

TEST(WordPieceTokenizerTest, OffsetsCoverTheOriginalCharacters) {
  auto tokenizer = LoadBert("offsets");
  auto enc = tokenizer->Encode("Caf\xC3\xA9, \xE4\xB8\xAD hellos");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (Ids{2, IdOf("cafe"), IdOf(","), IdOf("\xE4\xB8\xAD"), IdOf("hello"), IdOf("##s"), 3}));
  EXPECT_EQ(enc->offsets, (Offsets{{0, 0}, {0, 5}, {5, 6}, {7, 10}, {11, 16}, {16, 17}, {0, 0}}));
}

TEST(WordPieceTokenizerTest, SpecialTokensInTheTextAreTokens) {
  auto tokenizer = LoadBert("special_in_text");
  auto enc = tokenizer->Encode("a [MASK] b[SEP]");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (Ids{2, IdOf("a"), IdOf("[MASK]"), IdOf("b"), IdOf("[SEP]"), 3}));
  EXPECT_EQ(enc->offsets, (Offsets{{0, 0}, {0, 1}, {2, 8}, {9, 10}, {10, 15}, {0, 0}}));
  // They belong to their text; only the template's own tokens are -1.
  EXPECT_EQ(enc->sequence_ids, (std::vector<int8_t>{-1, 0, 0, 0, 0, -1}));
  // The lower-casing spares them, but another spelling is text.
  EXPECT_EQ(Raw(*tokenizer, "[mask] [Mask]"),
            (Ids{IdOf("["), IdOf("mask"), IdOf("]"), IdOf("["), IdOf("mask"), IdOf("]")}));
  auto pair = tokenizer->EncodePair("[CLS] x", "[PAD]");
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, (Ids{2, 2, IdOf("x"), 3, 0, 3}));
  EXPECT_EQ(pair->token_type_ids, (Ids{0, 0, 0, 0, 1, 1}));
}

TEST(WordPieceTokenizerTest, AddedTokensOfTheConfig) {
  // A token added after training (added_tokens_decoder, id past the vocabulary) and an unknown
  // token missing from vocab.txt, which transformers adds after it.
  auto tokenizer = LoadBert("added", R"({
    "unk_token": "<unk>",
    "added_tokens_decoder": {"33": {"content": "NewTok", "special": false, "normalized": true,
                                    "lstrip": false, "rstrip": false, "single_word": false}}})");
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_EQ(tokenizer->unk_id(), 34);
  EXPECT_EQ(tokenizer->vocab_size(), 35);
  EXPECT_EQ(Raw(*tokenizer, "x NewTok zzz"), (Ids{IdOf("x"), 33, 34}));
  EXPECT_EQ(tokenizer->IdToPiece(33), "NewTok");
  EXPECT_EQ(tokenizer->IdToPiece(34), "<unk>");
  // Matched as written: lower-casing leaves it alone, other spellings are text.
  EXPECT_EQ(Raw(*tokenizer, "newtok"), (Ids{34}));
}

TEST(WordPieceTokenizerTest, VocabularyFileAsTransformersReadsIt) {
  auto vocab = WordPieceVocab::Parse("a\r\nb\rc\nb\n\nd", "vocab.txt");
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  EXPECT_EQ(vocab->size(), 6);
  EXPECT_EQ(vocab->Find("a"), 0);
  EXPECT_EQ(vocab->Find("b"), 3);  // listed twice: the last line answers
  EXPECT_EQ(vocab->Find("c"), 2);
  EXPECT_EQ(vocab->Find(""), 4);
  EXPECT_EQ(vocab->Find("d"), 5);
  EXPECT_EQ(vocab->Token(1), "b");

  auto bad = WordPieceVocab::Parse("a\nb\xFF\n", "dir/vocab.txt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("dir/vocab.txt: line 2"), std::string_view::npos) << bad.status();

  const std::string empty = MakeTempDir("wordpiece_missing");
  auto missing = Tokenizer::Load(empty, TokenizerFamily::kBert, 512);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("vocab.txt"), std::string_view::npos) << missing.status();
  EXPECT_FALSE(Tokenizer::HasFiles(empty, TokenizerFamily::kBert).value());
  const std::string dir = MakeTempDir("wordpiece_dir");
  ASSERT_EQ(mkdir(JoinPath(dir, "vocab.txt").c_str(), 0755), 0);
  EXPECT_EQ(Tokenizer::HasFiles(dir, TokenizerFamily::kBert).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::Load(dir, TokenizerFamily::kMpnet, 512).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WordPieceTokenizerTest, BertPairsAreTruncatedLongestFirst) {
  auto tokenizer = LoadBert("truncate");
  TokenizeOptions opts;
  opts.max_length = 8;  // 5 + 3 tokens and 3 specials: 3 to drop
  auto enc = tokenizer->EncodePair("a b c d x", "hello world x", opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  // The longer first text loses 2 (down to the second's 3), then the tie costs the second 1.
  EXPECT_EQ(enc->input_ids, (Ids{2, IdOf("a"), IdOf("b"), IdOf("c"), 3, IdOf("hello"), IdOf("world"), 3}));
  EXPECT_EQ(enc->token_type_ids, (Ids{0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(enc->truncated);
  EXPECT_EQ(enc->untruncated_length, 11);
}

TEST(WordPieceTokenizerTest, LeftTruncationKeepsTheEndOfEachText) {
  auto tokenizer = LoadBert("truncate_left");
  TokenizeOptions opts;
  opts.max_length = 8;
  opts.direction = TruncationDirection::kLeft;
  auto enc = tokenizer->EncodePair("a b c d x", "hello world x", opts);
  ASSERT_TRUE(enc.ok()) << enc.status();
  // The same counts as from the right (3 + 2), taken from the start of each text.
  EXPECT_EQ(enc->input_ids, (Ids{2, IdOf("c"), IdOf("d"), IdOf("x"), 3, IdOf("world"), IdOf("x"), 3}));
  EXPECT_EQ(enc->offsets[1], std::make_pair(4, 5));
}

// MPNet: <s> a </s></s> b </s> from the reference vocabulary, its literal special tokens, and
// BERT's [MASK], which is only a word for MPNet.
TEST(WordPieceTokenizerTest, MpnetTemplateAndSpecialTokens) {
  const ReferenceVocab v("vocab_mpnet.txt");
  const std::string dir = MakeTempDir("mpnet_template");
  CopyFile(JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer_wordpiece/vocab_mpnet.txt"),
           JoinPath(dir, "vocab.txt"));
  auto loaded = Tokenizer::Load(dir, TokenizerFamily::kMpnet, 512);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& mpnet = **loaded;
  EXPECT_EQ(mpnet.NumSpecialTokens(true), 4);
  auto enc = mpnet.Encode("a <mask> b x </s>");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (Ids{v["<s>"], v["a"], v["<mask>"], v["b"], v["x"], v["</s>"], v["</s>"]}));
  // [MASK] is in the vocabulary, but not one of MPNet's special tokens: lower-cased and split.
  EXPECT_EQ(mpnet.EncodeRaw("[MASK]").value(), mpnet.EncodeRaw("[ mask ]").value());
  EXPECT_EQ(mpnet.EncodeRaw("[MASK]").value().front(), v["["]);
  // <mask> eats the space before it (lstrip), as MPNetTokenizer's mask token does.
  EXPECT_EQ(enc->offsets[2], std::make_pair(2, 8));

  TokenizeOptions opts;
  opts.max_length = 9;  // 4 + 3 tokens and 4 specials: 2 to drop
  auto pair = mpnet.EncodePair("one two three four", "a b c", opts);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, (Ids{v["<s>"], v["one"], v["two"], v["three"], v["</s>"], v["</s>"], v["a"], v["b"],
                                  v["</s>"]}));
  EXPECT_EQ(pair->token_type_ids, Ids(9, 0));
  EXPECT_EQ(pair->sequence_ids, (std::vector<int8_t>{-1, 0, 0, 0, -1, -1, 1, 1, -1}));
  ASSERT_TRUE(mpnet.Pad(&*pair, 11).ok());
  EXPECT_EQ(pair->input_ids.back(), v["<pad>"]);
  EXPECT_EQ(pair->attention_mask, (Ids{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}));
}

}  // namespace
}  // namespace relserve
