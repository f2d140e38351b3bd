// T5Tokenizer with legacy=False (transformers 4.31 and later): the SentencePiece model without
// its dummy prefix, a "▁" put before the text (add_prefix_space), the unknown token's text in
// front of a stretch that starts with a space, and no "▁" for text that follows a special
// token directly. tokenizer.json says the same with Metaspace's prepend_scheme "first" (and
// "never" without add_prefix_space).

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model_proto.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/json_util.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;

std::string ModelPath() { return JoinPath(RELSERVE_TEST_DATA_DIR, "tokenizer_json/t5/spiece.model"); }

std::unique_ptr<Tokenizer> LoadT5(const std::string& name, const std::string& config) {
  const std::string dir = MakeTempDir("t5_legacy_" + name);
  CopyFile(ModelPath(), JoinPath(dir, "spiece.model"));
  if (!config.empty()) WriteFile(JoinPath(dir, "tokenizer_config.json"), config);
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kT5, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// The tokenizer.json fixture with Metaspace's prepend_scheme replaced.
std::unique_ptr<Tokenizer> LoadT5Json(const std::string& name, const std::string& scheme) {
  auto json = ReadJsonFile(JoinPath(RELSERVE_TEST_DATA_DIR, "tokenizer_json/t5/tokenizer.json"));
  EXPECT_TRUE(json.ok()) << json.status();
  if (!json.ok()) return nullptr;
  (*json)["pre_tokenizer"]["prepend_scheme"] = scheme;
  const std::string dir = MakeTempDir("t5_legacy_json_" + name);
  WriteFile(JoinPath(dir, "tokenizer.json"), json->dump());
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kT5, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// SentencePiece's ids for `text`, with or without the model's dummy prefix.
std::vector<int32_t> Pieces(const std::string& text, bool dummy_prefix) {
  auto bytes = ReadFileToString(ModelPath());
  EXPECT_TRUE(bytes.ok());
  auto model = SentencePieceModel::LoadSerialized(
      dummy_prefix ? *bytes : *bytes + NoDummyPrefixOverride(), ModelPath());
  EXPECT_TRUE(model.ok()) << model.status();
  auto spans = (*model)->Encode(text);
  EXPECT_TRUE(spans.ok()) << spans.status();
  std::vector<int32_t> ids;
  for (const SentencePieceSpan& span : *spans) ids.push_back(span.id);
  return ids;
}

std::vector<int32_t> Concat(std::vector<std::vector<int32_t>> parts) {
  std::vector<int32_t> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

constexpr int32_t kEos = 1;

TEST(T5LegacyTest, TheOverrideDropsTheDummyPrefix) {
  const std::vector<int32_t> with = Pieces("hello", true);
  const std::vector<int32_t> without = Pieces("hello", false);
  ASSERT_FALSE(with.empty());
  EXPECT_NE(with, without);
  // Without it SentencePiece strips a leading "▁" too, hence T5Tokenizer's "<unk>" in front,
  // whose pieces are then dropped: that gives the dummy prefix's pieces.
  EXPECT_EQ(Pieces("\xE2\x96\x81" "hello", false), without);
  const std::vector<int32_t> unk = Pieces("<unk>", false);
  const std::vector<int32_t> behind = Pieces("<unk>\xE2\x96\x81" "hello", false);
  ASSERT_GE(behind.size(), unk.size());
  EXPECT_EQ(std::vector<int32_t>(behind.begin() + static_cast<std::ptrdiff_t>(unk.size()), behind.end()), with);
}

TEST(T5LegacyTest, TextAfterASpecialTokenStartsAWordOnlyAfterASpace) {
  auto legacy = LoadT5("legacy", "");
  auto modern = LoadT5("modern", R"({"legacy": false})");
  ASSERT_NE(legacy, nullptr);
  ASSERT_NE(modern, nullptr);
  // Plain text: the "▁" the tokenizer puts first does what the dummy prefix did.
  for (const char* text : {"Hello world", "  spaced   out ", "numbers 1,000 and more", "caf\xC3\xA9"}) {
    EXPECT_EQ(*modern->EncodeRaw(text), *legacy->EncodeRaw(text)) << text;
  }
  // Right after </s>: legacy encodes "hello" as a new word, legacy=False as its continuation.
  EXPECT_EQ(*legacy->EncodeRaw("</s>hello"), Concat({{kEos}, Pieces("hello", true)}));
  EXPECT_EQ(*modern->EncodeRaw("</s>hello"), Concat({{kEos}, Pieces("hello", false)}));
  EXPECT_NE(Pieces("hello", true), Pieces("hello", false));
  // With a space after </s> both start a word.
  EXPECT_EQ(*modern->EncodeRaw("</s> hello"), *legacy->EncodeRaw("</s> hello"));
  EXPECT_EQ(*modern->EncodeRaw("the end</s> more"), *legacy->EncodeRaw("the end</s> more"));
  // A text that starts with a special token gets no "▁" before it.
  auto starts = modern->EncodeRaw("</s> hi");
  ASSERT_TRUE(starts.ok());
  EXPECT_EQ(starts->front(), kEos);
  EXPECT_EQ(*starts, *legacy->EncodeRaw("</s> hi"));
  // "▁" written in the text reads as a space.
  EXPECT_EQ(*modern->EncodeRaw("a\xE2\x96\x81" "b"), *modern->EncodeRaw("a b"));
}

TEST(T5LegacyTest, WithoutAddPrefixSpaceTheFirstWordHasNoSpace) {
  auto modern = LoadT5("no_prefix", R"({"legacy": false, "add_prefix_space": false})");
  ASSERT_NE(modern, nullptr);
  EXPECT_EQ(*modern->EncodeRaw("hello world"), Pieces("hello world", false));
  EXPECT_NE(*modern->EncodeRaw("hello world"), Pieces("hello world", true));
}

TEST(T5LegacyTest, OffsetsPointIntoTheCallersText) {
  auto modern = LoadT5("offsets", R"({"legacy": false})");
  ASSERT_NE(modern, nullptr);
  const std::string text = "</s> hello there";
  auto enc = modern->Encode(text);
  ASSERT_TRUE(enc.ok());
  for (size_t i = 0; i < enc->offsets.size(); ++i) {
    const auto [begin, end] = enc->offsets[i];
    EXPECT_LE(begin, end);
    EXPECT_LE(static_cast<size_t>(end), text.size());
  }
  // The last text token ends where the text does.
  EXPECT_EQ(enc->offsets[enc->offsets.size() - 2].second, static_cast<int32_t>(text.size()));
}

// tokenizer.json: "first" is legacy=False, "never" legacy=False without add_prefix_space. (Its
// <extra_id_N> are T5TokenizerFast's, which strip no white space, unlike T5Tokenizer's; texts
// with them are left out here.)
TEST(T5LegacyTest, TokenizerJsonPrependSchemes) {
  auto first = LoadT5Json("first", "first");
  auto never = LoadT5Json("never", "never");
  auto modern = LoadT5("json_modern", R"({"legacy": false})");
  auto no_prefix = LoadT5("json_no_prefix", R"({"legacy": false, "add_prefix_space": false})");
  ASSERT_NE(first, nullptr);
  ASSERT_NE(never, nullptr);
  for (const char* text : {"Hello world", "</s>hello", "</s> hello", "</s>x </s> y",
                           "a\xE2\x96\x81" "b", "  spaced  "}) {
    EXPECT_EQ(*first->EncodeRaw(text), *modern->EncodeRaw(text)) << text;
    EXPECT_EQ(*never->EncodeRaw(text), *no_prefix->EncodeRaw(text)) << text;
  }
}

}  // namespace
}  // namespace relserve
