// The warm-up's runs and its check of what the model computes, on a backend that needs no model.
#include "server/batching/warm_up.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Answers every sequence with `pooled` and, when asked for them, `logits`; records the lengths
// it ran and what it was asked for.
class FakeBackend : public InferenceBackend {
 public:
  FakeBackend() {
    info_.vocab_size = 100;
    info_.dtype = DType::kFloat32;
    info_.device = "cpu";
    info_.labels = {"a", "b", "c"};
  }
  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput&) const override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch, uint32_t outputs) override {
    lengths.push_back(static_cast<int>(batch.at(0).input_ids.size()));
    sizes.push_back(static_cast<int>(batch.size()));
    asked = outputs;
    if (!fail.ok()) return fail;
    std::vector<SequenceOutput> out(batch.size());
    for (SequenceOutput& o : out) {
      o.pooled = pooled;
      if (outputs & kOutputLogits) o.logits = logits;
    }
    return out;
  }

  ModelInfo info_;
  std::vector<float> pooled = {0.5f, -0.5f, 0.25f, 0.75f};
  std::vector<float> logits = {1, 2, 3};
  absl::Status fail;
  std::vector<int> lengths;
  std::vector<int> sizes;  // of each batch run
  uint32_t asked = 0;
};

const auto kNeverStop = [] { return false; };

TEST(WarmUpTest, RunsEveryLengthUpToTheMaximumAskingForPooledAndLogits) {
  FakeBackend b;
  ASSERT_TRUE(WarmUp(b, "m", 100, kNeverStop).ok());
  EXPECT_THAT(b.lengths, ElementsAre(16, 32, 64, 100));
  EXPECT_EQ(b.asked, uint32_t{kOutputPooled | kOutputLogits});
  b.info_.labels.clear();
  b.lengths.clear();
  ASSERT_TRUE(WarmUp(b, "m", 8, kNeverStop).ok());
  EXPECT_THAT(b.lengths, ElementsAre(8));
  EXPECT_EQ(b.asked, uint32_t{kOutputPooled});
}

// The lengths are the backend's: a device that runs batches at rounded lengths names them.
class RoundingBackend : public FakeBackend {
 public:
  std::vector<int> WarmUpLengths(int max_length) const override { return {24, 48, max_length}; }
};

TEST(WarmUpTest, RunsTheLengthsTheBackendNames) {
  RoundingBackend b;
  ASSERT_TRUE(WarmUp(b, "m", 100, nullptr).ok());
  EXPECT_THAT(b.lengths, ElementsAre(24, 48, 100));
}

TEST(WarmUpTest, NaNInThePooledOutputFailsNamingModelLengthAndOutput) {
  FakeBackend b;
  b.pooled[1] = std::nanf("");
  b.pooled[2] = std::numeric_limits<float>::infinity();
  const absl::Status s = WarmUp(b, "m", 100, kNeverStop);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "model m: warm-up at 16 tokens gave NaN (2 of 4 values) in the pooled output: its weights hold NaN or "
            "infinity, or its activations overflow; every request would fail (--warmup false skips this check)");
  EXPECT_THAT(b.lengths, ElementsAre(16));  // stops at the first length
}

TEST(WarmUpTest, InfinityInTheLogitsFailsAndFloat16IsNamed) {
  FakeBackend b;
  b.info_.dtype = DType::kFloat16;
  b.logits[2] = -std::numeric_limits<float>::infinity();
  const absl::Status s = WarmUp(b, "cls", 16, kNeverStop);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("model cls: warm-up at 16 tokens gave infinity (1 of 3 values) in the logits"));
  EXPECT_THAT(s.message(), HasSubstr("overflow in float16 (try --dtype bfloat16 or float32)"));
}

TEST(WarmUpTest, AFailedRunAndAStopAreReported) {
  FakeBackend b;
  b.fail = absl::ResourceExhaustedError("out of memory");
  absl::Status s = WarmUp(b, "m", 100, kNeverStop);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "model m: warm-up at 16 tokens failed: out of memory");
  b.fail = absl::OkStatus();
  b.lengths.clear();
  int polls = 0;
  s = WarmUp(b, "m", 100, [&polls] { return ++polls > 2; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(b.lengths, ElementsAre(16, 32));
}

// A backend that names its batch sizes: every (size, length) within the batch tokens, largest
// first; sizes past the tokens are skipped, but one sequence always runs.
class SizedBackend : public FakeBackend {
 public:
  std::vector<int> WarmUpBatchSizes(int max_batch_size) const override {
    std::vector<int> out;
    for (int s : {1, 3, 8}) {
      if (s <= max_batch_size) out.push_back(s);
    }
    return out;
  }
};

TEST(WarmUpWorkerTest, RunsEveryShapeWithinTheLimitsLargestFirst) {
  SizedBackend b;
  int shapes = 0;
  ASSERT_TRUE(WarmUpWorker(b, "m", 100, /*max_batch_size=*/8, /*max_batch_tokens=*/300, kNeverStop, &shapes).ok());
  // Lengths 100, 64, 32, 16; sizes 8, 3, 1 where size x length <= 300.
  EXPECT_THAT(b.lengths, ElementsAre(100, 100, 64, 64, 32, 32, 32, 16, 16, 16));
  EXPECT_THAT(b.sizes, ElementsAre(3, 1, 3, 1, 8, 3, 1, 8, 3, 1));
  EXPECT_EQ(shapes, 10);
  EXPECT_EQ(b.asked, uint32_t{kOutputPooled | kOutputLogits});
  b.lengths.clear();
  b.sizes.clear();
  ASSERT_TRUE(WarmUpWorker(b, "m", 16, /*max_batch_size=*/2, /*max_batch_tokens=*/8, kNeverStop).ok());
  EXPECT_THAT(b.sizes, ElementsAre(1));  // a sequence longer than max_batch_tokens runs alone
}

TEST(WarmUpWorkerTest, AFailureNamesTheShape) {
  SizedBackend b;
  b.fail = absl::ResourceExhaustedError("out of memory");
  const absl::Status s = WarmUpWorker(b, "m", 16, 8, 1000, kNeverStop);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("model m: warm-up at 8 x 16 tokens failed: out of memory"));
  EXPECT_EQ(WarmUpWorker(b, "m", 16, 8, 1000, [] { return true; }).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace relserve
