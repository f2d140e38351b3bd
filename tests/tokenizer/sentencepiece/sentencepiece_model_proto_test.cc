// A Unigram model written by SerializeSentencePieceModel, loaded by SentencePiece itself: the
// scores, piece types and normalizer switches must arrive as written, since each one changes
// how text is cut.

#include "server/tokenizer/sentencepiece/sentencepiece_model_proto.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

namespace relserve {
namespace {

using PieceType = SentencePieceModelSpec::PieceType;

constexpr int kUnk = 0, kBos = 1, kSpace = 2, kA = 3, kB = 4, kSpaceAb = 5, kAb = 6, kX = 7;

SentencePieceModelSpec SmallSpec() {
  SentencePieceModelSpec spec;
  spec.pieces = {
      {"<unk>", 0.0f, PieceType::kUnknown},
      {"<s>", 0.0f, PieceType::kControl},
      {"\xe2\x96\x81", -2.0f, PieceType::kNormal},
      {"a", -3.0f, PieceType::kNormal},
      {"b", -3.0f, PieceType::kNormal},
      {"\xe2\x96\x81" "ab", -1.0f, PieceType::kNormal},
      {"ab", -2.0f, PieceType::kNormal},
      {"X", 0.0f, PieceType::kUserDefined},
  };
  return spec;
}

std::vector<int> Ids(const SentencePieceModelSpec& spec, const std::string& text) {
  auto model = SentencePieceModel::LoadSerialized(SerializeSentencePieceModel(spec), "spec");
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  auto spans = (*model)->Encode(text);
  EXPECT_TRUE(spans.ok()) << spans.status();
  std::vector<int> ids;
  if (spans.ok()) {
    for (const SentencePieceSpan& span : *spans) ids.push_back(span.id);
  }
  return ids;
}

TEST(SentencePieceModelProtoTest, LoadsWithPiecesAndReservedIds) {
  auto model = SentencePieceModel::LoadSerialized(SerializeSentencePieceModel(SmallSpec()), "spec");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->vocab_size(), 8);
  EXPECT_EQ((*model)->PieceToId("\xe2\x96\x81" "ab"), kSpaceAb);
  EXPECT_EQ((*model)->IdToPiece(kX), "X");
  const RelserveSpmReservedIds reserved = (*model)->reserved_ids();
  EXPECT_EQ(reserved.unk, kUnk);
  EXPECT_EQ(reserved.bos, kBos);  // "<s>" is a control piece
  EXPECT_EQ(reserved.eos, -1);    // no "</s>"
}

TEST(SentencePieceModelProtoTest, ScoresDecideTheCut) {
  SentencePieceModelSpec spec = SmallSpec();
  EXPECT_EQ(Ids(spec, "ab ab"), (std::vector<int>{kSpaceAb, kSpaceAb}));
  // "▁ab" now costs more than "▁" + "ab".
  spec.pieces[kSpaceAb].score = -20.0f;
  EXPECT_EQ(Ids(spec, "ab"), (std::vector<int>{kSpace, kAb}));
  spec.pieces[kAb].score = -10.0f;  // and "ab" more than "a" + "b"
  EXPECT_EQ(Ids(spec, "ab"), (std::vector<int>{kSpace, kA, kB}));
}

TEST(SentencePieceModelProtoTest, PieceTypes) {
  const SentencePieceModelSpec spec = SmallSpec();
  // A control piece never comes out of text; unknown characters are the unknown piece.
  const std::vector<int> control = Ids(spec, "<s>");
  EXPECT_EQ(std::count(control.begin(), control.end(), kBos), 0);
  EXPECT_EQ(std::count(control.begin(), control.end(), kUnk), 1);
  // A user-defined piece is cut out wherever it stands.
  EXPECT_EQ(Ids(spec, "aXb"), (std::vector<int>{kSpace, kA, kX, kB}));
}

TEST(SentencePieceModelProtoTest, NormalizerSwitches) {
  SentencePieceModelSpec spec = SmallSpec();
  EXPECT_EQ(Ids(spec, "  ab   ab "), (std::vector<int>{kSpaceAb, kSpaceAb}));
  spec.add_dummy_prefix = false;
  EXPECT_EQ(Ids(spec, "ab ab"), (std::vector<int>{kAb, kSpaceAb}));
  spec.add_dummy_prefix = true;
  spec.remove_extra_whitespaces = false;
  EXPECT_EQ(Ids(spec, "ab  ab"), (std::vector<int>{kSpaceAb, kSpace, kSpaceAb}));
}

TEST(SentencePieceModelProtoTest, RefusedModelsNameTheSource) {
  SentencePieceModelSpec no_unk = SmallSpec();
  no_unk.pieces[kUnk].type = PieceType::kNormal;
  auto model = SentencePieceModel::LoadSerialized(SerializeSentencePieceModel(no_unk), "dir/x.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("dir/x.json"), std::string::npos) << model.status();

  SentencePieceModelSpec duplicate = SmallSpec();
  duplicate.pieces[kB].piece = "a";
  EXPECT_FALSE(
      SentencePieceModel::LoadSerialized(SerializeSentencePieceModel(duplicate), "x").ok());
  EXPECT_FALSE(SentencePieceModel::LoadSerialized("not a model", "x").ok());
}

}  // namespace
}  // namespace relserve
