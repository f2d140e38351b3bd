#include "server/safetensors/dtype.h"

#include "gtest/gtest.h"

namespace relserve {
namespace {

TEST(StDTypeTest, NamesRoundTripWithSizes) {
  struct Case {
    StDType dtype;
    const char* name;
    size_t size;
  };
  const Case cases[] = {
      {StDType::kF64, "F64", 8},   {StDType::kF32, "F32", 4}, {StDType::kF16, "F16", 2},
      {StDType::kBF16, "BF16", 2}, {StDType::kI64, "I64", 8}, {StDType::kI32, "I32", 4},
      {StDType::kI16, "I16", 2},   {StDType::kI8, "I8", 1},   {StDType::kU8, "U8", 1},
      {StDType::kBool, "BOOL", 1},
  };
  for (const Case& c : cases) {
    auto parsed = ParseStDType(c.name);
    ASSERT_TRUE(parsed.ok()) << c.name;
    EXPECT_EQ(*parsed, c.dtype);
    EXPECT_EQ(StDTypeName(c.dtype), c.name);
    EXPECT_EQ(StDTypeSize(c.dtype), c.size) << c.name;
  }
}

TEST(StDTypeTest, RejectsUnknownNames) {
  for (const char* name : {"", "f32", "FLOAT32", "U16", "U64", "F8_E4M3", "BOOL "}) {
    auto parsed = ParseStDType(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(std::string("'") + name + "'"),
              std::string_view::npos);
  }
}

TEST(StDTypeTest, LayoutRankDescendsWithAlignment) {
  // The Python writer's data order: I64, F64, F32, I32, BF16, F16, I16, I8, U8, BOOL.
  const StDType order[] = {StDType::kI64,  StDType::kF64, StDType::kF32, StDType::kI32,
                           StDType::kBF16, StDType::kF16, StDType::kI16, StDType::kI8,
                           StDType::kU8,   StDType::kBool};
  for (size_t i = 1; i < std::size(order); ++i) {
    EXPECT_GT(StDTypeLayoutRank(order[i - 1]), StDTypeLayoutRank(order[i])) << i;
    EXPECT_GE(StDTypeSize(order[i - 1]), StDTypeSize(order[i])) << i;
  }
}

}  // namespace
}  // namespace relserve
