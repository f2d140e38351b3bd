// Every tokenizer family on random text mixing scripts, marks, controls, white space and
// special tokens: encodings stay well formed (ids in the vocabulary, spans inside the text,
// the template's special tokens, truncation within max_length, and the same tokens EncodeRaw
// gives).

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "server/tokenizer/files/tokenizer_files.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::ReferenceModelPath;
using ::relserve::testing::WriteFile;

std::string Reference(const std::string& path) { return JoinPath(RELSERVE_TEST_DATA_DIR, "reference/" + path); }

std::unique_ptr<Tokenizer> Load(TokenizerFamily family) {
  const std::string dir = MakeTempDir(std::string("families_") + TokenizerFamilyName(family));
  switch (family) {
    case TokenizerFamily::kDeberta: CopyFile(ReferenceModelPath(), JoinPath(dir, "spm.model")); break;
    case TokenizerFamily::kT5: CopyFile(ReferenceModelPath(), JoinPath(dir, "spiece.model")); break;
    case TokenizerFamily::kXlnet:
      CopyFile(Reference("tokenizer_xlnet/spiece.model"), JoinPath(dir, "spiece.model"));
      break;
    case TokenizerFamily::kBert:
      CopyFile(Reference("tokenizer_wordpiece/vocab_uncased.txt"), JoinPath(dir, "vocab.txt"));
      break;
    case TokenizerFamily::kMpnet:
      CopyFile(Reference("tokenizer_wordpiece/vocab_mpnet.txt"), JoinPath(dir, "vocab.txt"));
      break;
    case TokenizerFamily::kXlmRoberta:
      CopyFile(Reference("tokenizer_xlnet/spiece.model"), JoinPath(dir, "sentencepiece.bpe.model"));
      break;
    case TokenizerFamily::kRoberta:
      // Every byte's stand-in, and a few merges.
      WriteFile(JoinPath(dir, "vocab.json"),
                R"({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "a": 4, "b": 5, "ab": 6, "<mask>": 7})");
      WriteFile(JoinPath(dir, "merges.txt"), "#version: 0.2\na b\n");
      break;
  }
  auto tokenizer = Tokenizer::Load(dir, family, 64);
  EXPECT_TRUE(tokenizer.ok()) << TokenizerFamilyName(family) << ": " << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// Random text from pieces that exercise every normalization path.
std::string RandomText(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "a", "b", "ab", "Hello", "WORLD", " ", "  ", "\t", "\n", "\r\n", "\xE3\x80\x80", "\xC2\xA0",
      "\xE2\x80\xA8", "\x1c", std::string("\0", 1), "\x07", "\xE2\x80\x8B", "\xC2\xAD", "\xEF\xBF\xBD",
      "\xC3\xA9", "e\xCC\x81", "\xCC\x81", "\xC4\xB0", "\xCE\xA3", "\xEF\xAC\x81", "\xC2\xBD", "\xE2\x91\xA0",
      "\xE4\xB8\xAD\xE6\x96\x87", "\xE3\x83\x86", "\xF0\x9F\x98\x80", "\xF0\xA0\x80\x80", "1,", "9,000",
      "``", "''", "'s", "!", "...", "[MASK]", "[SEP]", "[CLS]", "<mask>", "<s>", "</s>", "<sep>",
      "<cls>", "<pad>", "<extra_id_0>", "[mask]", "<MASK>", "\xEE\x80\x80"};
  std::uniform_int_distribution<size_t> count(0, 12), pick(0, kPieces.size() - 1);
  std::string text;
  for (size_t n = count(rng); n > 0; --n) text += kPieces[pick(rng)];
  return text;
}

void CheckText(const Tokenizer& tokenizer, const Encoding& enc, int8_t sequence, std::string_view text,
               const std::string& label) {
  auto raw = tokenizer.EncodeRaw(text);
  ASSERT_TRUE(raw.ok()) << label << raw.status();
  size_t kept = 0;
  for (size_t i = 0; i < enc.input_ids.size(); ++i) {
    if (enc.sequence_ids[i] != sequence) continue;
    const auto [begin, end] = enc.offsets[i];
    EXPECT_TRUE(0 <= begin && begin <= end && static_cast<size_t>(end) <= text.size()) << label << " token " << i;
    ASSERT_LT(kept, raw->size()) << label;
    EXPECT_EQ((*raw)[kept], enc.input_ids[i]) << label << " token " << i;
    ++kept;
  }
  if (!enc.truncated) {
    EXPECT_EQ(kept, raw->size()) << label;
  }
}

// The template's special tokens left out of enc: T5Tokenizer (the slow files) adds no </s>
// after a text whose kept tokens end with it (_add_eos_if_not_present).
int LeftOutEos(const Tokenizer& tokenizer, const Encoding& enc, bool pair) {
  if (tokenizer.family() != TokenizerFamily::kT5) return 0;
  int left_out = 0;
  for (int8_t sequence = 0; sequence <= (pair ? 1 : 0); ++sequence) {
    int32_t last = -1;
    for (size_t i = 0; i < enc.input_ids.size(); ++i) {
      if (enc.sequence_ids[i] == sequence) last = enc.input_ids[i];
    }
    if (last >= 0 && last == tokenizer.eos_id()) ++left_out;
  }
  return left_out;
}

TEST(TokenizerFamiliesTest, RandomTextGivesWellFormedEncodings) {
  for (TokenizerFamily family : {TokenizerFamily::kDeberta, TokenizerFamily::kT5, TokenizerFamily::kBert,
                                 TokenizerFamily::kMpnet, TokenizerFamily::kXlnet, TokenizerFamily::kRoberta,
                                 TokenizerFamily::kXlmRoberta}) {
    std::unique_ptr<Tokenizer> tokenizer = Load(family);
    ASSERT_NE(tokenizer, nullptr);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> length(0, 24);
    for (int round = 0; round < 300; ++round) {
      const std::string a = RandomText(rng), b = RandomText(rng);
      const bool pair = round % 2 == 1;
      TokenizeOptions opts;
      opts.max_length = tokenizer->NumSpecialTokens(pair) + length(rng);
      auto enc = pair ? tokenizer->EncodePair(a, b, opts) : tokenizer->Encode(a, opts);
      const std::string label = std::string(TokenizerFamilyName(family)) + " round " + std::to_string(round);
      ASSERT_TRUE(enc.ok()) << label << ": " << enc.status();
      const size_t n = enc->input_ids.size();
      ASSERT_EQ(enc->token_type_ids.size(), n);
      ASSERT_EQ(enc->offsets.size(), n);
      ASSERT_EQ(enc->sequence_ids.size(), n);
      EXPECT_LE(n, static_cast<size_t>(opts.max_length)) << label;
      int specials = 0;
      for (size_t i = 0; i < n; ++i) {
        EXPECT_GE(enc->input_ids[i], 0) << label;
        EXPECT_LT(enc->input_ids[i], tokenizer->vocab_size()) << label;
        specials += enc->sequence_ids[i] < 0;
      }
      EXPECT_EQ(specials, tokenizer->NumSpecialTokens(pair) - LeftOutEos(*tokenizer, *enc, pair)) << label;
      CheckText(*tokenizer, *enc, 0, a, label);
      if (pair) CheckText(*tokenizer, *enc, 1, b, label);
      ASSERT_TRUE(tokenizer->Pad(&*enc, opts.max_length).ok());
      EXPECT_EQ(enc->input_ids.size(), static_cast<size_t>(opts.max_length));
    }
  }
}

TEST(TokenizerFamiliesTest, NamesAndFileDescriptions) {
  EXPECT_STREQ(TokenizerFamilyName(TokenizerFamily::kXlnet), "XLNet");
  EXPECT_STREQ(TokenizerFamilyName(TokenizerFamily::kRoberta), "RoBERTa");
  EXPECT_EQ(TokenizerFilesDescription(Describe(TokenizerFamily::kDeberta)), "spm.model or spiece.model or tokenizer.json");
  EXPECT_EQ(TokenizerFilesDescription(Describe(TokenizerFamily::kXlnet)), "spiece.model or spm.model or tokenizer.json");
  EXPECT_EQ(TokenizerFilesDescription(Describe(TokenizerFamily::kMpnet)), "vocab.txt or tokenizer.json");
  EXPECT_EQ(TokenizerFilesDescription(Describe(TokenizerFamily::kRoberta)), "vocab.json and merges.txt, or tokenizer.json");
}

// The registry is the descriptor files (server/tokenizer/families/CMakeLists.txt finds them):
// one descriptor per file <name>_family.cc, each its own family, each what Describe gives.
TEST(TokenizerFamiliesTest, EveryDescriptorFileIsRegistered) {
  const std::filesystem::path folder =
      std::filesystem::path(RELSERVE_TEST_DATA_DIR) / ".." / ".." / "server" / "tokenizer" / "families";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 10 && name.compare(name.size() - 10, 10, "_family.cc") == 0) ++files;
  }
  EXPECT_GE(files, 7u);
  EXPECT_EQ(AllTokenizerFamilyDescriptors().size(), files);
  std::set<int> families;
  for (const TokenizerFamilyDescriptor* d : AllTokenizerFamilyDescriptors()) {
    EXPECT_TRUE(families.insert(static_cast<int>(d->family)).second) << d->name;
    EXPECT_EQ(&Describe(d->family), d) << d->name;
  }
  // The enumerators count from 0, one descriptor each.
  EXPECT_EQ(*families.begin(), 0);
  EXPECT_EQ(*families.rbegin(), static_cast<int>(families.size()) - 1);
}

TEST(TokenizerFamiliesTest, EachFamilyLooksForItsOwnFiles) {
  const std::string dir = MakeTempDir("families_files");
  CopyFile(ReferenceModelPath(), JoinPath(dir, "spiece.model"));
  EXPECT_TRUE(Tokenizer::HasFiles(dir, TokenizerFamily::kDeberta).value());
  EXPECT_TRUE(Tokenizer::HasFiles(dir, TokenizerFamily::kXlnet).value());
  EXPECT_FALSE(Tokenizer::HasFiles(dir, TokenizerFamily::kBert).value());
  EXPECT_FALSE(Tokenizer::HasFiles(dir, TokenizerFamily::kRoberta).value());
  WriteFile(JoinPath(dir, "vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n");
  EXPECT_TRUE(Tokenizer::HasFiles(dir, TokenizerFamily::kMpnet).value());
  EXPECT_EQ(Tokenizer::HasFiles(JoinPath(dir, "absent"), TokenizerFamily::kBert).value(), false);
}

}  // namespace
}  // namespace relserve
