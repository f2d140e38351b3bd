#include "client/bench_workload.h"

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using ::testing::Each;
using ::testing::Ge;
using ::testing::Lt;

BenchWorkload Make(const std::string& lengths, const std::string& input = "tokens", int inputs_per_request = 1) {
  BenchOptions b;
  b.lengths = lengths;
  b.input = input;
  b.inputs_per_request = inputs_per_request;
  b.vocab = 100;
  RequestOptions r;
  r.model = "m";
  r.normalize = true;
  auto w = BenchWorkload::Create(b, r);
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

TEST(BenchWorkloadTest, TokenSequencesHaveTheDrawnLengthsInAClsSepFrame) {
  const BenchWorkload w = Make("uniform:10:20", "tokens", 4);
  std::mt19937_64 rng(1);
  int shortest = 1000, longest = 0;
  for (int i = 0; i < 200; ++i) {
    const v1::EmbedRequest r = w.MakeEmbed(rng);
    EXPECT_EQ(r.model(), "m");
    EXPECT_TRUE(r.normalize());
    ASSERT_EQ(r.inputs_size(), 4);
    for (const v1::Input& in : r.inputs()) {
      const auto& ids = in.tokens().ids();
      ASSERT_GE(ids.size(), 10);
      ASSERT_LE(ids.size(), 20);
      shortest = std::min(shortest, ids.size());
      longest = std::max(longest, ids.size());
      EXPECT_EQ(ids[0], 1);
      EXPECT_EQ(ids[ids.size() - 1], 2);
      EXPECT_THAT(std::vector<int>(ids.begin() + 1, ids.end() - 1), Each(::testing::AllOf(Ge(5), Lt(100))));
    }
  }
  EXPECT_EQ(shortest, 10);
  EXPECT_EQ(longest, 20);
}

TEST(BenchWorkloadTest, SameSeedSameRequests) {
  const BenchWorkload w = Make("log-uniform:8:512");
  std::mt19937_64 a(42), b(42);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(w.MakeEmbed(a).SerializeAsString(), w.MakeEmbed(b).SerializeAsString());
}

TEST(BenchWorkloadTest, ClassifyAndTextInputs) {
  const BenchWorkload w = Make("fixed:12", "text", 2);
  std::mt19937_64 rng(1);
  const v1::ClassifyRequest r = w.MakeClassify(rng);
  ASSERT_EQ(r.inputs_size(), 2);
  const std::vector<std::string> words = absl::StrSplit(r.inputs(0).text(), ' ');
  EXPECT_EQ(words.size(), 10u);  // N - 2 words: about N tokens with [CLS] and [SEP]
}

TEST(BenchWorkloadTest, RerankSendsDocumentsOfTheDrawnLengths) {
  const BenchWorkload w = Make("fixed:7", "text", 3);
  std::mt19937_64 rng(1);
  const v1::RerankRequest r = w.MakeRerank(rng);
  EXPECT_FALSE(r.query().empty());
  ASSERT_EQ(r.documents_size(), 3);
  for (const std::string& d : r.documents()) {
    EXPECT_EQ(std::vector<std::string>(absl::StrSplit(d, ' ')).size(), 5u);
  }
}

TEST(BenchWorkloadTest, BadWorkloads) {
  BenchOptions b;
  b.lengths = "fixed:1";  // no room for [CLS] and [SEP]
  EXPECT_EQ(BenchWorkload::Create(b, {}).status().code(), absl::StatusCode::kInvalidArgument);
  b.lengths = "fixed:8";
  b.vocab = 5;
  EXPECT_EQ(BenchWorkload::Create(b, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve::client
