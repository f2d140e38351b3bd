#include "client/bench_workload.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/request_building.h"

namespace relserve::client {
namespace {

constexpr int kClsId = 1;
constexpr int kSepId = 2;
constexpr int kFirstDrawnId = 5;  // ids below are special tokens in the DeBERTa-v3 vocabulary
constexpr const char* kRerankQuery = "how are long documents ranked";

const std::vector<std::string>& Words() {
  static const std::vector<std::string> kWords = {
      "the",   "of",   "and",   "to",    "in",    "is",    "for",   "on",    "that",  "with",  "as",
      "was",   "by",   "at",    "from",  "time",  "year",  "city",  "world", "water", "light", "house",
      "story", "music", "game", "school", "river", "model", "team",  "night", "paper", "field"};
  return kWords;
}

}  // namespace

absl::StatusOr<BenchWorkload> BenchWorkload::Create(const BenchOptions& bench, const RequestOptions& request) {
  // Token-id sequences need room for [CLS] and [SEP].
  auto lengths = LengthDistribution::Parse(bench.lengths, bench.input == "tokens" ? 2 : 1);
  if (!lengths.ok()) return lengths.status();
  if (bench.vocab <= kFirstDrawnId) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab must exceed ", kFirstDrawnId));
  }
  return BenchWorkload(bench, request, *std::move(lengths));
}

std::string BenchWorkload::MakeText(int length, std::mt19937_64& rng) const {
  const std::vector<std::string>& words = Words();
  std::uniform_int_distribution<size_t> pick(0, words.size() - 1);
  std::string text;
  for (int i = 0; i < std::max(1, length - 2); ++i) absl::StrAppend(&text, i == 0 ? "" : " ", words[pick(rng)]);
  return text;
}

v1::Input BenchWorkload::MakeInput(std::mt19937_64& rng) const {
  const int length = lengths_.Draw(rng);
  v1::Input input;
  if (bench_.input == "text") {
    input.set_text(MakeText(length, rng));
    return input;
  }
  std::uniform_int_distribution<int> token(kFirstDrawnId, bench_.vocab - 1);
  auto* ids = input.mutable_tokens()->mutable_ids();
  ids->Reserve(length);
  ids->Add(kClsId);
  for (int i = 0; i < length - 2; ++i) ids->Add(token(rng));
  ids->Add(kSepId);
  return input;
}

v1::EmbedRequest BenchWorkload::MakeEmbed(std::mt19937_64& rng) const {
  std::vector<v1::Input> inputs;
  for (int i = 0; i < bench_.inputs_per_request; ++i) inputs.push_back(MakeInput(rng));
  return BuildEmbedRequest(request_, std::move(inputs));
}

v1::ClassifyRequest BenchWorkload::MakeClassify(std::mt19937_64& rng) const {
  std::vector<v1::Input> inputs;
  for (int i = 0; i < bench_.inputs_per_request; ++i) inputs.push_back(MakeInput(rng));
  return BuildClassifyRequest(request_, std::move(inputs));
}

v1::RerankRequest BenchWorkload::MakeRerank(std::mt19937_64& rng) const {
  std::vector<std::string> documents;
  for (int i = 0; i < bench_.inputs_per_request; ++i) documents.push_back(MakeText(lengths_.Draw(rng), rng));
  return BuildRerankRequest(request_, kRerankQuery, documents);
}

}  // namespace relserve::client
