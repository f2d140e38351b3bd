#include "server/util/openblas_core.h"

#include "gtest/gtest.h"

namespace relserve {
namespace {

CpuVectorFeatures Features(bool avx2_fma, bool avx512) {
  CpuVectorFeatures f;
  f.avx2_fma = avx2_fma;
  f.avx512 = avx512;
  return f;
}

TEST(OpenBlasCoreTest, TheFallbackOnAnAvx512CpuGetsSkylakeXKernels) {
  EXPECT_EQ(OpenBlasCoreToForce("Prescott", Features(true, true)), "SKYLAKEX");
  EXPECT_EQ(OpenBlasCoreToForce("prescott", Features(true, true)), "SKYLAKEX");
}

TEST(OpenBlasCoreTest, TheFallbackOnAnAvx2CpuGetsHaswellKernels) {
  EXPECT_EQ(OpenBlasCoreToForce("Prescott", Features(true, false)), "HASWELL");
}

TEST(OpenBlasCoreTest, TheFallbackStaysOnACpuWithoutAvx2) {
  EXPECT_EQ(OpenBlasCoreToForce("Prescott", Features(false, false)), "");
}

TEST(OpenBlasCoreTest, AKnownCpuKeepsOpenBlassOwnChoice) {
  EXPECT_EQ(OpenBlasCoreToForce("Cooperlake", Features(true, true)), "");
  EXPECT_EQ(OpenBlasCoreToForce("Zen", Features(true, false)), "");
  EXPECT_EQ(OpenBlasCoreToForce("SkylakeX", Features(true, true)), "");
}

TEST(OpenBlasCoreTest, NoOpenBlasNothingToForce) {
  EXPECT_EQ(OpenBlasCoreToForce("", Features(true, true)), "");
}

}  // namespace
}  // namespace relserve
