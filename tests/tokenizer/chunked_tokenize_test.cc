// Long texts are tokenized in chunks cut at spaces, and only as far as the tokens kept need
// (TokenizeOptions::chunk_bytes, text_chunks.h). Every family, from its vocabulary files and from
// tokenizer.json, must give exactly the encodings of the text tokenized whole: ids, spans,
// truncation, refusals, pairs, from either end.

#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "server/tokenizer/text_chunks.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::ReferenceModelPath;
using ::relserve::testing::WriteFile;

std::string Data(const std::string& path) { return JoinPath(RELSERVE_TEST_DATA_DIR, path); }

struct Loaded {
  std::string name;
  std::unique_ptr<Tokenizer> tokenizer;
};

std::vector<Loaded> LoadAll() {
  std::vector<Loaded> out;
  auto add = [&](const std::string& name, absl::StatusOr<std::unique_ptr<Tokenizer>> t) {
    EXPECT_TRUE(t.ok()) << name << ": " << t.status();
    if (t.ok()) out.push_back({name, *std::move(t)});
  };
  const struct {
    const char* name;
    TokenizerFamily family;
    const char* from;
    const char* as;
  } kFiles[] = {
      {"deberta", TokenizerFamily::kDeberta, "reference/tokenizer/spm.model", "spm.model"},
      {"t5", TokenizerFamily::kT5, "tokenizer_json/t5/spiece.model", "spiece.model"},
      {"xlnet", TokenizerFamily::kXlnet, "reference/tokenizer_xlnet/spiece.model", "spiece.model"},
      {"bert", TokenizerFamily::kBert, "reference/tokenizer_wordpiece/vocab_uncased.txt", "vocab.txt"},
      {"bert_cased", TokenizerFamily::kBert, "reference/tokenizer_wordpiece/vocab_cased.txt", "vocab.txt"},
      {"mpnet", TokenizerFamily::kMpnet, "reference/tokenizer_wordpiece/vocab_mpnet.txt", "vocab.txt"},
      {"xlm_roberta", TokenizerFamily::kXlmRoberta, "tokenizer_json/xlm_roberta/sentencepiece.bpe.model",
       "sentencepiece.bpe.model"},
  };
  for (const auto& f : kFiles) {
    const std::string dir = MakeTempDir(std::string("chunked_") + f.name);
    CopyFile(Data(f.from), JoinPath(dir, f.as));
    add(f.name, Tokenizer::Load(dir, f.family, 64));
  }
  {
    const std::string dir = MakeTempDir("chunked_roberta");
    WriteFile(JoinPath(dir, "vocab.json"),
              R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "ab": 6, "<mask>": 7, "\u0120": 8,)"
              R"( "\u0120a": 9, "\u0120\u0120": 10, "c": 11, "\u0120ab": 12})");
    WriteFile(JoinPath(dir, "merges.txt"), "#version: 0.2\na b\n\xC4\xA0 a\n\xC4\xA0 \xC4\xA0\n\xC4\xA0" "a b\n");
    add("roberta", Tokenizer::Load(dir, TokenizerFamily::kRoberta, 64));
  }
  const struct {
    const char* dir;
    TokenizerFamily family;
  } kJson[] = {
      {"bert_cased", TokenizerFamily::kBert},   {"bert_uncased", TokenizerFamily::kBert},
      {"deberta", TokenizerFamily::kDeberta},   {"deberta_lower", TokenizerFamily::kDeberta},
      {"deberta_punct", TokenizerFamily::kDeberta}, {"mpnet", TokenizerFamily::kMpnet},
      {"t5", TokenizerFamily::kT5},             {"xlm_roberta", TokenizerFamily::kXlmRoberta},
      {"xlnet", TokenizerFamily::kXlnet},       {"xlnet_lower_keep_accents", TokenizerFamily::kXlnet},
  };
  for (const auto& j : kJson) {
    add(std::string("json_") + j.dir,
        Tokenizer::LoadTokenizerJson(Data(std::string("tokenizer_json/") + j.dir), j.family, 64));
  }
  return out;
}

// Words, punctuation, digits, marks, scripts without spaces, special tokens, and white space of
// every kind and length, so that chunks are cut in every situation.
std::string RandomText(std::mt19937& rng, int pieces) {
  static const std::vector<std::string> kWords = {
      "a", "b", "ab", "Hello", "WORLD", "the", "tokenizer's", "isn't", "1,", "9,000", "3.14", "...", "!", "``",
      "\xC3\xA9t\xC3\xA9", "e\xCC\x81", "\xCE\xA3\xCE\xA3", "\xEF\xAC\x81", "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97",
      "\xF0\x9F\x98\x80", "[MASK]", "[SEP]", "[CLS]", "<mask>", "</s>", "<sep>", "<cls>", "<extra_id_0>",
      "abababababababababab", "x-y", "(b)", "\xE2\x96\x81", "\xE2\x96\x81" "a", "a\xE2\x96\x81", "\xC2\xA0"};
  static const std::vector<std::string> kSpaces = {" ", " ", " ", "  ", "   ", "\t", "\n", "\r\n", " \n ", "\xE3\x80\x80"};
  std::uniform_int_distribution<size_t> word(0, kWords.size() - 1), space(0, kSpaces.size() - 1);
  std::bernoulli_distribution glue(0.15);
  std::string text;
  if (glue(rng)) text += kSpaces[space(rng)];
  for (int n = 0; n < pieces; ++n) {
    text += kWords[word(rng)];
    if (!glue(rng)) text += kSpaces[space(rng)];
  }
  return text;
}

void ExpectSame(const absl::StatusOr<Encoding>& whole, const absl::StatusOr<Encoding>& chunked,
                const std::string& label) {
  ASSERT_EQ(whole.ok(), chunked.ok()) << label << ": " << whole.status() << " / " << chunked.status();
  if (!whole.ok()) return;
  EXPECT_EQ(whole->input_ids, chunked->input_ids) << label;
  EXPECT_EQ(whole->offsets, chunked->offsets) << label;
  EXPECT_EQ(whole->sequence_ids, chunked->sequence_ids) << label;
  EXPECT_EQ(whole->token_type_ids, chunked->token_type_ids) << label;
  EXPECT_EQ(whole->truncated, chunked->truncated) << label;
  if (!chunked->length_is_lower_bound) {
    EXPECT_EQ(whole->untruncated_length, chunked->untruncated_length) << label;
  } else {
    EXPECT_LE(chunked->untruncated_length, whole->untruncated_length) << label;
  }
}

TEST(ChunkedTokenizeTest, ChunksGiveTheTokensOfTheWholeText) {
  std::vector<Loaded> all = LoadAll();
  ASSERT_EQ(all.size(), 18u);
  for (const Loaded& l : all) {
    const Tokenizer& t = *l.tokenizer;
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> pieces(0, 60), kept(0, 30);
    for (int round = 0; round < 40; ++round) {
      const std::string a = RandomText(rng, pieces(rng));
      const std::string b = RandomText(rng, pieces(rng));
      for (size_t chunk : {1, 9, 40}) {
        const std::string label = l.name + " round " + std::to_string(round) + " chunk " + std::to_string(chunk);
        TokenizeOptions whole;
        whole.chunk_bytes = 0;
        TokenizeOptions chunked = whole;
        chunked.chunk_bytes = chunk;
        // Every token, then cut from either end, then refused.
        whole.max_length = chunked.max_length = 1 << 20;
        whole.truncate = chunked.truncate = false;
        ExpectSame(t.Encode(a, whole), t.Encode(a, chunked), label + " all [" + absl::CHexEscape(a) + "]");
        ExpectSame(t.EncodePair(a, b, whole), t.EncodePair(a, b, chunked), label + " pair all");
        for (TruncationDirection cut : {TruncationDirection::kRight, TruncationDirection::kLeft}) {
          whole.direction = chunked.direction = cut;
          whole.max_length = chunked.max_length = t.NumSpecialTokens(true) + kept(rng);
          whole.truncate = chunked.truncate = true;
          const std::string side = cut == TruncationDirection::kLeft ? " left" : " right";
          ExpectSame(t.Encode(a, whole), t.Encode(a, chunked), label + side);
          ExpectSame(t.EncodePair(a, b, whole), t.EncodePair(a, b, chunked), label + side + " pair");
          whole.pair_truncation = chunked.pair_truncation = PairTruncation::kOnlyFirst;
          ExpectSame(t.EncodePair(a, b, whole), t.EncodePair(a, b, chunked), label + side + " only first");
          whole.pair_truncation = chunked.pair_truncation = PairTruncation::kLongestFirst;
          // Tokenized once for many pairs.
          auto first = t.TokenizeForPairs(a, "first text", chunked);
          auto second = t.TokenizeForPairs(b, "second text", chunked);
          ASSERT_TRUE(first.ok() && second.ok()) << label;
          ExpectSame(t.EncodePair(a, b, whole), t.EncodePair(*first, *second, chunked), label + side + " prepared");
          whole.truncate = chunked.truncate = false;
          ExpectSame(t.Encode(a, whole), t.Encode(a, chunked), label + side + " refused");
          ExpectSame(t.EncodePair(a, b, whole), t.EncodePair(a, b, chunked), label + side + " pair refused");
        }
      }
    }
  }
}

// A long text cut to a few tokens is read only as far as they need: its whole length stays
// unknown (a lower bound), and the tokens are those of a prefix (suffix) read whole.
TEST(ChunkedTokenizeTest, LongTextsAreReadOnlyAsFarAsTheKeptTokens) {
  std::vector<Loaded> all = LoadAll();
  std::string text;
  for (int i = 0; text.size() < (4u << 20); ++i) text += (i % 7 == 0 ? "Hello, world " : "the tokenizer's ab ");
  const std::string_view head(text.data(), 64 << 10), tail(text.data() + text.size() - (64 << 10), 64 << 10);
  for (const Loaded& l : all) {
    const Tokenizer& t = *l.tokenizer;
    TokenizeOptions opts;
    opts.max_length = 512;
    auto right = t.Encode(text, opts);
    ASSERT_TRUE(right.ok()) << l.name << right.status();
    EXPECT_TRUE(right->truncated) << l.name;
    EXPECT_TRUE(right->length_is_lower_bound) << l.name;
    EXPECT_LT(right->untruncated_length, 4096) << l.name;
    auto head_whole = t.Encode(head, opts);
    ASSERT_TRUE(head_whole.ok());
    EXPECT_EQ(right->input_ids, head_whole->input_ids) << l.name;
    EXPECT_EQ(right->offsets, head_whole->offsets) << l.name;

    opts.direction = TruncationDirection::kLeft;
    auto left = t.Encode(text, opts);
    ASSERT_TRUE(left.ok()) << l.name << left.status();
    EXPECT_TRUE(left->length_is_lower_bound) << l.name;
    // The last tokens of the text's last 64 KiB read whole, their spans moved to where that
    // tail lies in the text.
    auto tail_whole = t.Encode(tail, opts);
    ASSERT_TRUE(tail_whole.ok());
    EXPECT_EQ(left->input_ids, tail_whole->input_ids) << l.name;
    const int32_t shift = static_cast<int32_t>(text.size() - tail.size());
    for (size_t i = 0; i < left->offsets.size(); ++i) {
      if (left->sequence_ids[i] < 0) continue;
      EXPECT_EQ(left->offsets[i].first, tail_whole->offsets[i].first + shift) << l.name << " token " << i;
    }

    // Refused without reading it all, the count saying so.
    opts.truncate = false;
    auto refused = t.Encode(text, opts);
    ASSERT_FALSE(refused.ok()) << l.name;
    EXPECT_NE(std::string(refused.status().message()).find("more than"), std::string::npos) << refused.status();
    // A pair with the long text on either side.
    opts.truncate = true;
    auto pair = t.EncodePair(text, "short text", opts);
    ASSERT_TRUE(pair.ok()) << pair.status();
    EXPECT_TRUE(pair->length_is_lower_bound);
    EXPECT_EQ(pair->input_ids.size(), 512u) << l.name;
  }
}

// keep_going is asked between chunks, and its status ends the tokenizing there.
TEST(ChunkedTokenizeTest, KeepGoingStopsALongText) {
  auto t = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 64);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string text;
  while (text.size() < (1u << 20)) text += "the quick brown fox ";
  TokenizeOptions opts;
  opts.max_length = 1 << 30;
  opts.truncate = false;
  int asked = 0;
  opts.keep_going = [&asked] {
    return ++asked < 3 ? absl::OkStatus() : absl::DeadlineExceededError("the deadline passed");
  };
  auto stopped = (*t)->Encode(text, opts);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(asked, 3);
  asked = -1000000;
  auto whole = (*t)->Encode(text, opts);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_GT(asked, -1000000 + 10);  // once per chunk of 16 KiB
  EXPECT_FALSE(whole->length_is_lower_bound);
}

// A vocabulary or an added token that spans a space turns chunking off: the text is read
// whole, and the tokens stay right.
TEST(ChunkedTokenizeTest, TokensAcrossWhiteSpaceTurnChunkingOff) {
  const std::string dir = MakeTempDir("chunked_added_space");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model"));
  WriteFile(JoinPath(dir, "added_tokens.json"), R"({"new york": 1000})");
  auto t = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 64);
  ASSERT_TRUE(t.ok()) << t.status();
  std::string text;
  for (int i = 0; i < 300; ++i) text += i % 3 == 0 ? "in new york " : "the ab ";
  TokenizeOptions whole, chunked;
  whole.chunk_bytes = 0;
  chunked.chunk_bytes = 4;
  whole.max_length = chunked.max_length = 1 << 20;
  auto a = (*t)->Encode(text, whole), b = (*t)->Encode(text, chunked);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->input_ids, b->input_ids);
  EXPECT_FALSE(b->length_is_lower_bound);
  int new_york = 0;
  for (int32_t id : b->input_ids) new_york += id == 1000;
  EXPECT_EQ(new_york, 100);
  chunked.max_length = 16;
  auto cut = (*t)->Encode(text, chunked);
  ASSERT_TRUE(cut.ok());
  EXPECT_FALSE(cut->length_is_lower_bound);  // read whole: its length is known
  EXPECT_EQ(cut->untruncated_length, a->untruncated_length);
}

TEST(TextChunksTest, RunStarts) {
  const std::string text = " ab  c\td e\n x\xe3\x80\x80y \xe2\x96\x81z \xc3\xa9 \xcc\x81q r";
  // Single spaces between plain characters only: not a leading space, not a run of two, not
  // beside a tab, U+3000, SentencePiece's U+2581 or a combining mark.
  EXPECT_EQ(CutAtOrBefore(text, 0), std::string::npos);
  EXPECT_EQ(CutAtOrBefore(text, 7), std::string::npos);
  EXPECT_EQ(CutAtOrAfter(text, 0), 8u);
  EXPECT_EQ(CutAtOrAfter(text, 9), 22u);  // between "z" and "é"
  EXPECT_EQ(CutAtOrAfter(text, 23), text.size() - 2);
  EXPECT_EQ(CutAtOrBefore(text, text.size()), text.size() - 2);
  EXPECT_FALSE(IsCutSpace('\t'));
  EXPECT_FALSE(IsCutSpace('\n'));
}

TEST(TextChunksTest, ChunksKeepEveryByteOnceWithAWordOfContextOnEachSide) {
  const std::string text = "one two three four five six seven eight nine ten";
  // Forward: the kept ranges tile the text; each chunk reaches one word past what it keeps and
  // starts one word before it.
  size_t keep = 0, begin = 0, covered = 0;
  for (int n = 0;; ++n) {
    ASSERT_LT(n, 100);
    const TextChunk c = ForwardChunk(text, keep, begin, 6);
    EXPECT_EQ(c.keep_begin, covered);
    if (c.last) {
      EXPECT_EQ(c.end, text.size());
      break;
    }
    EXPECT_GE(c.keep_end - c.keep_begin, 6u);
    EXPECT_TRUE(IsCutSpace(text[c.keep_end]));
    EXPECT_TRUE(IsCutSpace(text[c.end]));
    EXPECT_NE(text.substr(c.keep_end, c.end - c.keep_end).find_first_not_of(' '), std::string::npos);
    if (c.keep_begin > 0) {
      EXPECT_LT(c.begin, c.keep_begin);
      EXPECT_TRUE(IsCutSpace(text[c.begin]));
    }
    covered = c.keep_end;
    std::tie(keep, begin) = NextForward(text, c);
  }
  // Backward: the same from the end.
  size_t keep_end = std::string::npos, end = text.size(), from = text.size();
  for (int n = 0;; ++n) {
    ASSERT_LT(n, 100);
    const TextChunk c = BackwardChunk(text, keep_end, end, 6);
    EXPECT_EQ(c.keep_end == std::string::npos ? text.size() : c.keep_end, from);
    if (c.last) {
      EXPECT_EQ(c.begin, 0u);
      EXPECT_EQ(c.keep_begin, 0u);
      break;
    }
    EXPECT_TRUE(IsCutSpace(text[c.keep_begin]));
    EXPECT_TRUE(IsCutSpace(text[c.begin]));
    EXPECT_LT(c.begin, c.keep_begin);
    from = c.keep_begin;
    std::tie(keep_end, end) = NextBackward(text, c);
  }
}

}  // namespace
}  // namespace relserve
