// T5Tokenizer's build_inputs_with_special_tokens (transformers 4.40.2) puts each text through
// _add_eos_if_not_present: a text whose ids already end with </s> gets no second one (the
// tokenizer warns and leaves it), in the slow T5 and mT5 tokenizers, legacy or not. Truncation
// still makes room for the </s> (num_special_tokens_to_add counts it), and the template then
// applies to what is kept. The `tokenizers` library's TemplateProcessing, which a model with
// tokenizer.json only gets (T5TokenizerFast), has no such rule: it adds </s> again.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/families/tokenizer_families.h"
#include "server/tokenizer/post_processor_template.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::CopyFile;
using ::relserve::testing::MakeTempDir;
using ::relserve::testing::WriteFile;

using Ids = std::vector<int32_t>;

constexpr int32_t kEos = 1;

std::string FixturePath(const std::string& file) {
  return JoinPath(RELSERVE_TEST_DATA_DIR, "tokenizer_json/t5/" + file);
}

// The slow tokenizer's files: spiece.model (and a tokenizer_config.json when given).
std::unique_ptr<Tokenizer> LoadSlow(const std::string& name, const std::string& config = "") {
  const std::string dir = MakeTempDir("t5_eos_slow_" + name);
  CopyFile(FixturePath("spiece.model"), JoinPath(dir, "spiece.model"));
  if (!config.empty()) WriteFile(JoinPath(dir, "tokenizer_config.json"), config);
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kT5, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// tokenizer.json alone: T5TokenizerFast's TemplateProcessing.
std::unique_ptr<Tokenizer> LoadFast() {
  const std::string dir = MakeTempDir("t5_eos_fast");
  CopyFile(FixturePath("tokenizer.json"), JoinPath(dir, "tokenizer.json"));
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kT5, 512);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

Ids Raw(const Tokenizer& t, const std::string& text) {
  auto ids = t.EncodeRaw(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : Ids{};
}

Ids Cat(Ids a, const Ids& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Ids Head(const Ids& ids, size_t n) { return Ids(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)); }

// Every per-token vector has one entry per id.
void ExpectConsistent(const Encoding& enc) {
  const size_t n = enc.input_ids.size();
  EXPECT_EQ(enc.token_type_ids.size(), n);
  EXPECT_EQ(enc.attention_mask.size(), n);
  EXPECT_EQ(enc.offsets.size(), n);
  EXPECT_EQ(enc.sequence_ids.size(), n);
  EXPECT_GE(enc.untruncated_length, static_cast<int32_t>(n));
  if (!enc.truncated) EXPECT_EQ(enc.untruncated_length, static_cast<int32_t>(n));
}

TEST(T5EosTest, TheFamilyTemplateMarksItsEos) {
  SpecialTokenIds ids;
  ids.pad = 0;
  ids.eos = 1;
  ids.unk = 2;
  auto t5 = FamilyTemplate(Describe(TokenizerFamily::kT5), ids);
  ASSERT_TRUE(t5.ok()) << t5.status();
  ASSERT_EQ(t5->single.size(), 2u);
  EXPECT_TRUE(t5->single[1].unless_text_ends_with_it);
  ASSERT_EQ(t5->pair.size(), 4u);
  EXPECT_TRUE(t5->pair[1].unless_text_ends_with_it);
  EXPECT_TRUE(t5->pair[3].unless_text_ends_with_it);
  // Counted all the same: transformers' num_special_tokens_to_add is 1 (pair 2).
  EXPECT_EQ(t5->NumSpecialTokens(false), 1);
  EXPECT_EQ(t5->NumSpecialTokens(true), 2);
  // No other family has the rule.
  ids.cls = 3;
  ids.sep = 4;
  for (TokenizerFamily family : {TokenizerFamily::kDeberta, TokenizerFamily::kBert, TokenizerFamily::kMpnet,
                                 TokenizerFamily::kRoberta, TokenizerFamily::kXlmRoberta, TokenizerFamily::kXlnet}) {
    auto t = FamilyTemplate(Describe(family), ids);
    ASSERT_TRUE(t.ok()) << t.status();
    for (const auto* side : {&t->single, &t->pair}) {
      for (const TemplatePiece& piece : *side) {
        EXPECT_FALSE(piece.unless_text_ends_with_it) << TokenizerFamilyName(family);
      }
    }
  }
}

TEST(T5EosTest, NoSecondEosAfterATextThatEndsWithOne) {
  for (const char* config : {"", R"({"legacy": false})"}) {
    SCOPED_TRACE(config);
    auto t5 = LoadSlow(config[0] ? "modern" : "legacy", config);
    ASSERT_NE(t5, nullptr);
    ASSERT_EQ(t5->eos_id(), kEos);
    // Plain text: </s> added.
    const Ids hello = Raw(*t5, "hello");
    auto plain = t5->Encode("hello");
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(plain->input_ids, Cat(hello, {kEos}));
    ExpectConsistent(*plain);
    // Text ending with </s>: left as it is, the </s> belonging to the text.
    const Ids with_eos = Raw(*t5, "hello</s>");
    ASSERT_FALSE(with_eos.empty());
    ASSERT_EQ(with_eos.back(), kEos);
    auto ended = t5->Encode("hello</s>");
    ASSERT_TRUE(ended.ok());
    EXPECT_EQ(ended->input_ids, with_eos);
    EXPECT_EQ(ended->sequence_ids.back(), 0);
    EXPECT_EQ(ended->attention_mask.back(), 1);
    EXPECT_FALSE(ended->truncated);
    ExpectConsistent(*ended);
    // </s> alone is one </s>; an empty text still gets one.
    EXPECT_EQ(t5->Encode("</s>")->input_ids, (Ids{kEos}));
    EXPECT_EQ(t5->Encode("")->input_ids, (Ids{kEos}));
    // </s> inside the text is no end: one is added.
    const Ids middle = Raw(*t5, "a</s> b");
    ASSERT_NE(middle.back(), kEos);
    EXPECT_EQ(t5->Encode("a</s> b")->input_ids, Cat(middle, {kEos}));
    // Two written: both stay, none added.
    const Ids twice = Raw(*t5, "x</s></s>");
    ASSERT_EQ(twice.back(), kEos);
    EXPECT_EQ(t5->Encode("x</s></s>")->input_ids, twice);
  }
}

TEST(T5EosTest, EachTextOfAPairOnItsOwn) {
  auto t5 = LoadSlow("pair");
  ASSERT_NE(t5, nullptr);
  const Ids a = Raw(*t5, "first");
  const Ids a_eos = Raw(*t5, "first</s>");
  const Ids b = Raw(*t5, "second");
  const Ids b_eos = Raw(*t5, "second</s>");
  EXPECT_EQ(t5->EncodePair("first", "second")->input_ids, Cat(Cat(a, {kEos}), Cat(b, {kEos})));
  EXPECT_EQ(t5->EncodePair("first</s>", "second")->input_ids, Cat(a_eos, Cat(b, {kEos})));
  EXPECT_EQ(t5->EncodePair("first", "second</s>")->input_ids, Cat(Cat(a, {kEos}), b_eos));
  auto both = t5->EncodePair("first</s>", "second</s>");
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->input_ids, Cat(a_eos, b_eos));
  ExpectConsistent(*both);
  // The </s> of each text is that text's.
  EXPECT_EQ(both->sequence_ids[a_eos.size() - 1], 0);
  EXPECT_EQ(both->sequence_ids.back(), 1);
  // An empty second text gets its </s>.
  EXPECT_EQ(t5->EncodePair("first</s>", "")->input_ids, Cat(a_eos, {kEos}));
}

// prepare_for_model cuts total_len - max_length tokens with total_len counting the </s>, then
// builds from what is kept: a </s> cut off the end is put back by the template, and a kept one
// stands in for it.
TEST(T5EosTest, TruncationLeavesRoomForTheEosAsTransformersDoes) {
  auto t5 = LoadSlow("truncation");
  ASSERT_NE(t5, nullptr);
  const std::string text = "the quick brown fox</s>";
  const Ids raw = Raw(*t5, text);
  ASSERT_GE(raw.size(), 4u);
  ASSERT_EQ(raw.back(), kEos);
  const int n = static_cast<int>(raw.size());
  TokenizeOptions opts;

  // Room for the text and a </s>: nothing cut, nothing added.
  opts.max_length = n + 1;
  auto roomy = t5->Encode(text, opts);
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(roomy->input_ids, raw);
  EXPECT_FALSE(roomy->truncated);

  // Exactly the text: transformers cuts the written </s> and adds the template's, the same ids.
  opts.max_length = n;
  auto exact = t5->Encode(text, opts);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->input_ids, raw);
  EXPECT_TRUE(exact->truncated);
  EXPECT_EQ(exact->untruncated_length, n);
  ExpectConsistent(*exact);

  // Shorter: the end goes, </s> with it, and the template's comes back.
  opts.max_length = n - 1;
  auto shorter = t5->Encode(text, opts);
  ASSERT_TRUE(shorter.ok());
  EXPECT_EQ(shorter->input_ids, Cat(Head(raw, static_cast<size_t>(n - 2)), {kEos}));
  EXPECT_TRUE(shorter->truncated);
  ExpectConsistent(*shorter);

  // From the left the written </s> is kept: none added, one token shorter than max_length.
  opts.max_length = n;
  opts.direction = TruncationDirection::kLeft;
  auto left = t5->Encode(text, opts);
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(left->input_ids, Ids(raw.begin() + 1, raw.end()));
  EXPECT_TRUE(left->truncated);
  ExpectConsistent(*left);
}

TEST(T5EosTest, WithoutTruncationTheRealLengthCounts) {
  auto t5 = LoadSlow("no_truncation");
  ASSERT_NE(t5, nullptr);
  const std::string text = "the quick brown fox</s>";
  const Ids raw = Raw(*t5, text);
  const int n = static_cast<int>(raw.size());
  TokenizeOptions opts;
  opts.truncate = false;
  // n tokens in all: they fit in n, untouched (transformers with truncation=False).
  opts.max_length = n;
  auto fits = t5->Encode(text, opts);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->input_ids, raw);
  EXPECT_FALSE(fits->truncated);
  ExpectConsistent(*fits);
  opts.max_length = n - 1;
  auto over = t5->Encode(text, opts);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(std::string(over.status().message()).find("is " + std::to_string(n) + " tokens"), std::string::npos)
      << over.status();
  // A pair: each text's own </s> counts once.
  const Ids b = Raw(*t5, "tail");
  opts.max_length = n + static_cast<int>(b.size()) + 1;
  auto pair = t5->EncodePair(text, "tail", opts);
  ASSERT_TRUE(pair.ok()) << pair.status();
  EXPECT_EQ(pair->input_ids, Cat(raw, Cat(b, {kEos})));
  EXPECT_FALSE(pair->truncated);
}

TEST(T5EosTest, TheModelFileAloneIsTheSlowTokenizerToo) {
  auto t5 = Tokenizer::LoadModelFile(FixturePath("spiece.model"), TokenizerFamily::kT5, 512);
  ASSERT_TRUE(t5.ok()) << t5.status();
  const Ids raw = Raw(**t5, "hello</s>");
  EXPECT_EQ((*t5)->Encode("hello</s>")->input_ids, raw);
}

// T5TokenizerFast: the `tokenizers` library's TemplateProcessing appends </s> whatever the text
// ends with; only the slow files' tokenizer leaves it out.
TEST(T5EosTest, TokenizerJsonAddsItAgain) {
  auto fast = LoadFast();
  auto slow = LoadSlow("versus_fast");
  ASSERT_NE(fast, nullptr);
  ASSERT_NE(slow, nullptr);
  const Ids raw = Raw(*fast, "hello</s>");
  ASSERT_EQ(raw, Raw(*slow, "hello</s>"));
  auto enc = fast->Encode("hello</s>");
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->input_ids, Cat(raw, {kEos}));
  ExpectConsistent(*enc);
  EXPECT_EQ(slow->Encode("hello</s>")->input_ids, raw);
  EXPECT_EQ(fast->EncodePair("a</s>", "b</s>")->input_ids,
            Cat(Cat(Raw(*fast, "a</s>"), {kEos}), Cat(Raw(*fast, "b</s>"), {kEos})));
  // Where no text ends with </s>, both agree.
  EXPECT_EQ(fast->Encode("hello")->input_ids, slow->Encode("hello")->input_ids);
}

}  // namespace
}  // namespace relserve
