#include "server/model/kernels/packed_panels.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace relserve {
namespace {

// A packing of its own over the shared storage: value (feature f, depth j) at panel f / 4,
// position j * 4 + f % 4, as the GEMMs' packings write theirs through data().
class TestPanels : public PackedPanels<int16_t, 4, 8> {
 public:
  TestPanels(int64_t n, int64_t k) : PackedPanels(n, k) {
    for (int64_t f = 0; f < n; ++f) {
      for (int64_t j = 0; j < k; ++j) data()[(f / 4) * padded_k() * 4 + j * 4 + f % 4] = static_cast<int16_t>(f * 100 + j + 1);
    }
  }
};

TEST(PackedPanelsTest, PanelsCoverTheFeaturesAndDepthRoundsUpToTheStep) {
  const TestPanels w(10, 13);
  EXPECT_EQ(w.n(), 10);
  EXPECT_EQ(w.k(), 13);
  EXPECT_EQ(w.panels(), 3);     // 4 + 4 + 2 features
  EXPECT_EQ(w.padded_k(), 16);  // 13 rounded up to a multiple of 8
  EXPECT_EQ(TestPanels::kPanelWidth, 4);
  EXPECT_EQ(TestPanels::kDepthStep, 8);
  const TestPanels exact(8, 16);
  EXPECT_EQ(exact.panels(), 2);
  EXPECT_EQ(exact.padded_k(), 16);
}

TEST(PackedPanelsTest, PanelsLieOneAfterAnotherAlignedWithZeroPadding) {
  const TestPanels w(10, 13);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.panel(0)) % 64, 0u);
  for (int64_t p = 0; p + 1 < w.panels(); ++p) EXPECT_EQ(w.panel(p + 1) - w.panel(p), w.padded_k() * 4);
  for (int64_t p = 0; p < w.panels(); ++p) {
    for (int64_t j = 0; j < w.padded_k(); ++j) {
      for (int64_t c = 0; c < 4; ++c) {
        const int64_t f = p * 4 + c;
        const int16_t expected = f < w.n() && j < w.k() ? static_cast<int16_t>(f * 100 + j + 1) : 0;
        EXPECT_EQ(w.panel(p)[j * 4 + c], expected) << "feature " << f << " depth " << j;
      }
    }
  }
}

TEST(PackedPanelsTest, AnEmptyWeightStillHasAlignedStorage) {
  const TestPanels w(0, 0);
  EXPECT_EQ(w.panels(), 0);
  EXPECT_EQ(w.padded_k(), 0);
  EXPECT_NE(w.panel(0), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.panel(0)) % 64, 0u);
}

}  // namespace
}  // namespace relserve
