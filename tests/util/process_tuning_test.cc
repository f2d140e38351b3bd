#include "server/util/process_tuning.h"

#include <malloc.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/malloc_mmap_threshold.h"

namespace relserve {
namespace {

// The variables each test gives, through the reader the programs' main() would hand in.
class AllocatorModeTest : public ::testing::Test {
 protected:
  AllocatorMode Mode() const {
    auto mode = AllocatorModeFromEnvironment(MapEnvironmentReader(env_));
    EXPECT_TRUE(mode.ok()) << mode.status();
    return mode.value_or(AllocatorMode::kCache);
  }
  void Set(const std::string& name, const std::string& value) { env_[name] = value; }
  void Unset(const std::string& name) { env_.erase(name); }

  std::map<std::string, std::string> env_;
};

TEST_F(AllocatorModeTest, TheBufferCacheByDefault) {
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
  Set("RELSERVE_ALLOCATOR", "");
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
}

TEST_F(AllocatorModeTest, EachModeByName) {
  Set("RELSERVE_ALLOCATOR", "cache");
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
  Set("RELSERVE_ALLOCATOR", "heap");
  EXPECT_EQ(Mode(), AllocatorMode::kHeap);
  Set("RELSERVE_ALLOCATOR", "system");
  EXPECT_EQ(Mode(), AllocatorMode::kSystem);
}

TEST_F(AllocatorModeTest, TheOlderSwitchMeansSystemUnlessTheModeIsNamed) {
  Set("RELSERVE_MALLOC_DEFAULTS", "1");
  EXPECT_EQ(Mode(), AllocatorMode::kSystem);
  Set("RELSERVE_ALLOCATOR", "heap");
  EXPECT_EQ(Mode(), AllocatorMode::kHeap);
  Unset("RELSERVE_ALLOCATOR");
  Set("RELSERVE_MALLOC_DEFAULTS", "0");
  EXPECT_EQ(Mode(), AllocatorMode::kCache);
}

TEST_F(AllocatorModeTest, AnUnknownValueNamesTheVariableAndTheChoices) {
  Set("RELSERVE_ALLOCATOR", "jemalloc");
  auto mode = AllocatorModeFromEnvironment(MapEnvironmentReader(env_));
  ASSERT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mode.status().message()),
              ::testing::AllOf(::testing::HasSubstr("RELSERVE_ALLOCATOR=\"jemalloc\""),
                               ::testing::HasSubstr("cache, heap or system")));
}

TEST(AskedDTypeTest, EitherFlagFormTheLastOneOrTheEnvironment) {
  std::map<std::string, std::string> env;
  auto asked = [&env](std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return AskedDType(argv.data(), MapEnvironmentReader(env));
  };
  EXPECT_EQ(asked({"relserve", "--model", "m=/m", "--dtype", "int8"}), "int8");
  EXPECT_EQ(asked({"relserve-model", "bench", "--dtype=bfloat16"}), "bfloat16");
  EXPECT_EQ(asked({"relserve", "--dtype", "int8", "--dtype=float32"}), "float32");
  EXPECT_EQ(asked({"relserve", "--dtype"}), "");  // no value: the flag parser's error, not ours
  EXPECT_EQ(asked({"relserve", "--model", "int8"}), "");
  EXPECT_EQ(asked({"relserve"}), "");
  env["RELSERVE_DTYPE"] = "int8";
  EXPECT_EQ(asked({"relserve"}), "int8");
  EXPECT_EQ(asked({"relserve", "--dtype", "bfloat16"}), "bfloat16");  // the flag wins
}

TEST(AskedFlagTest, AnyFlagByNameOrItsVariable) {
  std::map<std::string, std::string> env;
  auto asked = [&env](std::vector<std::string> args, const std::string& name) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return AskedFlag(argv.data(), MapEnvironmentReader(env), name);
  };
  EXPECT_EQ(asked({"relserve", "--float32-gemm", "blas"}, "float32-gemm"), "blas");
  EXPECT_EQ(asked({"relserve", "--float32-gemm=auto"}, "float32-gemm"), "auto");
  EXPECT_EQ(asked({"relserve", "--float32-gemmx", "blas"}, "float32-gemm"), "");
  EXPECT_EQ(asked({"relserve", "--dtype", "int8"}, "float32-gemm"), "");
  env["RELSERVE_FLOAT32_GEMM"] = "blas";
  EXPECT_EQ(asked({"relserve"}, "float32-gemm"), "blas");
  EXPECT_EQ(asked({"relserve", "--float32-gemm", "auto"}, "float32-gemm"), "auto");  // the flag wins
}

// The short spin: always under bfloat16 and int8; under float32 (asked or by default) only where
// its forward makes no BLAS call, which --float32-gemm blas undoes.
TEST(ShortSpinForTest, Float32OnlyWhereThePackedGemmTakesEveryBatch) {
  for (const char* dtype : {"bfloat16", "int8"}) {
    EXPECT_TRUE(ShortSpinFor(dtype, false, ""));
    EXPECT_TRUE(ShortSpinFor(dtype, true, "blas"));
  }
  for (const char* dtype : {"float32", ""}) {
    EXPECT_TRUE(ShortSpinFor(dtype, true, ""));
    EXPECT_TRUE(ShortSpinFor(dtype, true, "auto"));
    EXPECT_FALSE(ShortSpinFor(dtype, true, "blas"));
    EXPECT_FALSE(ShortSpinFor(dtype, false, ""));
  }
  EXPECT_FALSE(ShortSpinFor("float16", true, ""));
}

// Blocks glibc mapped on its own, now.
size_t MappedBlocks() { return mallinfo2().hblks; }

// A block written through, so that the compiler keeps its allocation.
void* Touched(size_t bytes) {
  void* p = std::malloc(bytes);
  if (p != nullptr) static_cast<volatile char*>(p)[bytes - 1] = 1;
  return p;
}

// Under the cache mode a block smaller than the threshold comes from an arena, so what a library
// allocates and frees on every call is not mapped, faulted in and unmapped each time: OpenBLAS's
// threaded GEMM takes a 516 KiB job array per call (glibc's default threshold, 128 KiB, maps it).
// A block from the threshold up is mapped on its own and goes back to the system when freed.
TEST(TuneMallocTest, TheCacheModeMapsOnlyBlocksFromTheThresholdUp) {
  TuneMalloc(AllocatorMode::kCache);
  const size_t before = MappedBlocks();
  void* job_array = Touched(528384 - 16);
  ASSERT_NE(job_array, nullptr);
  EXPECT_EQ(MappedBlocks(), before);
  void* below = Touched(kMallocMmapThresholdBytes - 4096);
  ASSERT_NE(below, nullptr);
  EXPECT_EQ(MappedBlocks(), before);
  void* at = Touched(kMallocMmapThresholdBytes);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(MappedBlocks(), before + 1);
  std::free(at);
  EXPECT_EQ(MappedBlocks(), before);
  std::free(below);
  std::free(job_array);
}

}  // namespace
}  // namespace relserve
