// --int8-weight-bits's words (int8_weight_bits.h).
#include "server/model/layers/int8_weight_bits.h"

#include <string>

#include "gtest/gtest.h"

namespace relserve {
namespace {

// Each value's name parses back to it; anything else is refused naming the three.
TEST(Int8WeightBitsTest, WordsReadBackAndOthersAreRefused) {
  for (Int8WeightBits value : {Int8WeightBits::kAuto, Int8WeightBits::kSeven, Int8WeightBits::kEight}) {
    auto parsed = ParseInt8WeightBits(Int8WeightBitsName(value));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, value);
  }
  EXPECT_EQ(Int8WeightBitsName(Int8WeightBits::kSeven), "7");
  EXPECT_EQ(Int8WeightBitsName(Int8WeightBits::kEight), "8");
  for (const char* bad : {"", "6", "16", "Auto", "8bit", " 8"}) {
    auto parsed = ParseInt8WeightBits(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(parsed.status().message()).find("auto, 7, 8"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace relserve
