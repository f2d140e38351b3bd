// The simulated GPU: its profile, its --model value and its one device clock (simulated_device.h).
#include "server/simulated/simulated_device.h"

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

TEST(SimulatedDeviceProfileTest, FollowsTheH100Measurements) {
  const SimulatedDeviceProfile p = *FindSimulatedProfile("h100-deberta-v3-base");
  // docs/PERFORMANCE.md, DeBERTa-v3-base bfloat16 on one H100: 32 x 128 5.01 ms, 32 x 512 30.5 ms.
  EXPECT_NEAR(p.DeviceSeconds(32, 128) * 1e3, 5.01, 0.5);
  EXPECT_NEAR(p.DeviceSeconds(32, 512) * 1e3, 30.5, 1.5);
  // 1 x 128 eager is bound by its launch (4.49 ms measured).
  EXPECT_NEAR((p.eager_launch_seconds + p.copy_seconds) * 1e3, 4.49, 0.1);
  EXPECT_GT(p.eager_launch_seconds, p.DeviceSeconds(1, 128));
  // Full batches of the benchmark's lengths: between the 32 x 512 and 32 x 128 rates.
  const double saturated = p.SaturatedTokensPerSecond(64, 16384);
  EXPECT_GT(saturated, 32 * 512 / p.DeviceSeconds(32, 512));
  EXPECT_LT(saturated, 64 * 128 / p.DeviceSeconds(64, 128) * 1.2);
  EXPECT_EQ(FindSimulatedProfile("h200-deberta").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(FindSimulatedProfile("h200-deberta").status().message(), HasSubstr("h100-deberta-v3-base"));
}

TEST(SimulatedDeviceSpecTest, ParsesSettingsAndRefusesBadOnes) {
  EXPECT_TRUE(IsSimulatedModel("simulated:h100-deberta-v3-base"));
  EXPECT_FALSE(IsSimulatedModel("/models/simulated"));
  absl::StatusOr<SimulatedDeviceSpec> plain = ParseSimulatedDeviceSpec("simulated:h100-deberta-v3-base");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->scale, 20);
  EXPECT_EQ(plain->cold_ms, 0);
  EXPECT_TRUE(plain->graphs);
  EXPECT_EQ(plain->Describe(), "simulated:h100-deberta-v3-base,scale=20,cold-ms=0,graphs=1");
  absl::StatusOr<SimulatedDeviceSpec> set =
      ParseSimulatedDeviceSpec("simulated:h100-deberta-v3-base,scale=5,cold-ms=40,graphs=0");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->scale, 5);
  EXPECT_EQ(set->cold_ms, 40);
  EXPECT_FALSE(set->graphs);
  // Reads back.
  EXPECT_EQ(ParseSimulatedDeviceSpec(set->Describe())->Describe(), set->Describe());
  const std::pair<const char*, const char*> bad[] = {
      {"simulated:h100-deberta-v3-base,scale=0.5", "scale 0.5 is outside [1, 1000]"},
      {"simulated:h100-deberta-v3-base,cold-ms=-1", "cold-ms -1 is outside [0, 10000]"},
      {"simulated:h100-deberta-v3-base,graphs=2", "graphs 2 is not 0 or 1"},
      {"simulated:h100-deberta-v3-base,speed=2", "unknown setting \"speed\" (known: scale, cold-ms, graphs)"},
      {"simulated:h100-deberta-v3-base,scale", "\"scale\" is not NAME=NUMBER"},
  };
  for (const auto& [text, message] : bad) {
    absl::StatusOr<SimulatedDeviceSpec> s = ParseSimulatedDeviceSpec(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.status().message(), HasSubstr(message)) << text;
  }
  EXPECT_EQ(ParseSimulatedDeviceSpec("simulated:tpu").status().code(), absl::StatusCode::kNotFound);
}

// Work queued from several threads runs one piece at a time: four pieces of 30 ms queued at
// once take about 120 ms, and the busy time is their sum.
TEST(SimulatedDeviceTest, SerialisesWorkOnOneClockAndSleeps) {
  SimulatedDevice device;
  const absl::Time t0 = absl::Now();
  std::vector<std::thread> threads;
  std::vector<absl::Time> ends(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] { ends[i] = device.Enqueue(t0, absl::Milliseconds(30), t0); });
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration took = absl::Now() - t0;
  EXPECT_GE(took, absl::Milliseconds(119));
  EXPECT_LT(took, absl::Milliseconds(400));
  EXPECT_EQ(device.busy(), absl::Milliseconds(120));
  std::sort(ends.begin(), ends.end());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ends[i], t0 + absl::Milliseconds(30 * (i + 1)));
  // A launch that ends after the work: the batch ends then, but the device is free earlier.
  const absl::Time t1 = absl::Now();
  EXPECT_EQ(device.Enqueue(t1, absl::Milliseconds(5), t1 + absl::Milliseconds(40)), t1 + absl::Milliseconds(40));
  const absl::Time t2 = absl::Now();
  EXPECT_LT(device.Enqueue(t2, absl::Milliseconds(5), t2), t2 + absl::Milliseconds(10));
}

}  // namespace
}  // namespace relserve
