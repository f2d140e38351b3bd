// The simulated GPU behind the backend interface (simulated_backend.h): the shapes it runs, the
// time it sleeps, the cold cost per (thread, shape), and its outputs.
#include "server/simulated/simulated_backend.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

SimulatedDeviceSpec Spec(const std::string& settings = "") {
  return *ParseSimulatedDeviceSpec("simulated:h100-deberta-v3-base" + settings);
}

std::vector<SequenceInput> Batch(int size, int length) {
  SequenceInput s;
  for (int i = 0; i < length; ++i) s.input_ids.push_back(i + 1);
  return std::vector<SequenceInput>(size, s);
}

TEST(SimulatedBackendTest, RoundsShapesAndReplaysGraphsWhereTheyFit) {
  SimulatedBackend backend(Spec(), nullptr);
  SimulatedBackend::Shape s = backend.ShapeOf(5, 100);
  EXPECT_EQ(s.length, 112);
  EXPECT_TRUE(s.graph);   // 6 x 112 = 672 <= 4096
  EXPECT_EQ(s.rows, 6);
  s = backend.ShapeOf(20, 160);
  EXPECT_TRUE(s.graph);   // 24 x 160 = 3840
  EXPECT_EQ(s.rows, 24);
  s = backend.ShapeOf(20, 300);
  EXPECT_FALSE(s.graph);  // 24 x 320
  EXPECT_EQ(s.rows, 24);
  EXPECT_EQ(s.length, 320);
  SimulatedBackend eager(Spec(",graphs=0"), nullptr);
  EXPECT_FALSE(eager.ShapeOf(5, 100).graph);
  EXPECT_EQ(eager.ShapeOf(5, 100).rows, 6);
  EXPECT_TRUE(backend.WarmsUpPerThread());
  EXPECT_EQ(backend.WarmUpBatchSizes(64).back(), 64);
  EXPECT_EQ(backend.WarmUpLengths(512).size(), 20u);
}

// One eager batch of 20 x 300 at scale 10: the launch (4.4 ms) and the device (0.1 + 1.1 us x
// 24 x 320 + 1.4 ns x 24 x 320^2 + 0.02 ms = 11.99 ms), overlapped: about 120 ms of wall time,
// all of it busy; the stages say where it went.
TEST(SimulatedBackendTest, SleepsTheDeviceTimeScaledAndCountsItBusy) {
  double busy_reported = 0;
  SimulatedBackend backend(Spec(",scale=10"), [&](double s) { busy_reported += s; });
  const double device = backend.spec().profile.DeviceSeconds(24, 320) + backend.spec().profile.copy_seconds;
  RunTimings timings;
  const absl::Time t0 = absl::Now();
  auto out = backend.RunTimed(Batch(20, 300), kOutputPooled, &timings);
  const double took = absl::ToDoubleSeconds(absl::Now() - t0);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NEAR(busy_reported, device * 10, 1e-9);
  EXPECT_NEAR(backend.busy_seconds(), device * 10, 1e-9);
  EXPECT_GE(took, device * 10 - 0.001);
  EXPECT_LT(took, device * 10 + 0.08);
  EXPECT_NEAR(absl::ToDoubleSeconds(timings.forward), 0.044, 0.02);  // the launch
  EXPECT_NEAR(absl::ToDoubleSeconds(timings.forward + timings.results), device * 10, 0.05);
  ASSERT_EQ(out->size(), 20u);
  EXPECT_EQ((*out)[0].num_tokens, 300);
  ASSERT_EQ((*out)[0].pooled.size(), 768u);
  EXPECT_EQ((*out)[0].pooled[0], 300 * 301 / 2);  // the sum of the ids
}

TEST(SimulatedBackendTest, AColdShapeCostsOncePerThread) {
  SimulatedBackend backend(Spec(",scale=1,cold-ms=30"), nullptr);
  auto timed = [&] {
    const absl::Time t0 = absl::Now();
    EXPECT_TRUE(backend.Run(Batch(2, 16), kOutputPooled).ok());
    return absl::Now() - t0;
  };
  EXPECT_GE(timed(), absl::Milliseconds(30));  // cold on this thread
  EXPECT_LT(timed(), absl::Milliseconds(25));  // warm
  EXPECT_EQ(backend.cold_batches(), 1);
  std::thread other([&] { EXPECT_GE(timed(), absl::Milliseconds(30)); });  // cold on another thread
  other.join();
  EXPECT_EQ(backend.cold_batches(), 2);
  backend.Run(Batch(3, 16), kOutputPooled).IgnoreError();  // another size: cold again
  EXPECT_EQ(backend.cold_batches(), 3);
}

TEST(SimulatedBackendTest, ValidatesLikeAModel) {
  SimulatedBackend backend(Spec(), nullptr);
  EXPECT_THAT(backend.Validate(Batch(1, 513)[0]).message(), HasSubstr("513 tokens, more than max_length 512"));
  SequenceInput bad;
  bad.input_ids = {5, 128100};
  EXPECT_THAT(backend.Validate(bad).message(), HasSubstr("input_ids[1] = 128100 is outside [0, 128100)"));
  EXPECT_EQ(backend.Run(Batch(1, 4), kOutputLogits).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(backend.Run({bad}, kOutputPooled).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
