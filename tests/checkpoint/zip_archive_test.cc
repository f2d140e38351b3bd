#include "server/checkpoint/zip_archive.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/checkpoint/zip_builder.h"
#include "tests/safetensors/test_files.h"

namespace relserve {
namespace {

using ::relserve::testing::ReadBytes;
using ::relserve::testing::TestDataPath;
using ::relserve::testing::ZipBuilder;

absl::StatusOr<ZipArchive> Parse(const std::string& bytes) {
  return ZipArchive::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.zip");
}

void ExpectError(const absl::StatusOr<ZipArchive>& zip, absl::StatusCode code, const std::string& needle) {
  ASSERT_FALSE(zip.ok());
  EXPECT_EQ(zip.status().code(), code) << zip.status();
  EXPECT_NE(zip.status().message().find(needle), std::string::npos) << zip.status();
  EXPECT_NE(zip.status().message().find("test.zip"), std::string::npos) << zip.status();
}

TEST(ZipArchiveTest, ReadsWhatTorchSaveWrote) {
  // Python's torch.save (PyTorch 1.13): tests/data/pytorch_bin/make_fixtures.py.
  const std::string bytes = ReadBytes(TestDataPath("pytorch_bin/protocol4.bin"));
  auto zip = Parse(bytes);
  ASSERT_TRUE(zip.ok()) << zip.status();
  ASSERT_EQ(zip->entries().size(), 4u);
  EXPECT_EQ(zip->entries()[0].name, "protocol4/data.pkl");
  const ZipArchive::Entry* storage = zip->Find("protocol4/data/1");
  ASSERT_NE(storage, nullptr);
  ASSERT_EQ(storage->size, 8u);  // two float32
  float values[2];
  std::memcpy(values, storage->data, 8);
  EXPECT_EQ(values[0], 3.0f);
  EXPECT_EQ(values[1], 4.0f);
  EXPECT_EQ(static_cast<size_t>(storage->data - reinterpret_cast<const uint8_t*>(bytes.data())) % 64, 0u)
      << "torch aligns storages to 64 bytes";
  for (const ZipArchive::Entry& e : zip->entries()) EXPECT_TRUE(zip->Verify(e).ok()) << e.name;
  EXPECT_EQ(zip->Find("protocol4/data/2"), nullptr);
}

TEST(ZipArchiveTest, ReadsZip64Records) {
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "zip");
    const std::string bytes = ZipBuilder(zip64).Add("a/data.pkl", "pickle").Add("a/data/0", std::string(100, 'q')).Build();
    auto zip = Parse(bytes);
    ASSERT_TRUE(zip.ok()) << zip.status();
    ASSERT_EQ(zip->entries().size(), 2u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(zip->entries()[0].data), zip->entries()[0].size), "pickle");
    EXPECT_EQ(zip->entries()[1].size, 100u);
    EXPECT_TRUE(zip->Verify(zip->entries()[1]).ok());
  }
}

TEST(ZipArchiveTest, EveryTruncationIsDataLoss) {
  for (bool zip64 : {false, true}) {
    const std::string bytes = ZipBuilder(zip64).Add("a/data.pkl", "pickle").Add("a/data/0", std::string(70, 'q')).Build();
    for (size_t n = 0; n < bytes.size(); ++n) {
      SCOPED_TRACE(n);
      auto zip = Parse(bytes.substr(0, n));
      ASSERT_FALSE(zip.ok());
      EXPECT_EQ(zip.status().code(), absl::StatusCode::kDataLoss) << zip.status();
    }
  }
}

TEST(ZipArchiveTest, NotAZipIsDataLossNamingTheEndRecord) {
  ExpectError(Parse(std::string(5000, 'x')), absl::StatusCode::kDataLoss, "no end-of-central-directory record");
  ExpectError(Parse(""), absl::StatusCode::kDataLoss, "the file has 0 bytes");
}

TEST(ZipArchiveTest, ListsButDoesNotHandOutCompressedEntries) {
  ZipBuilder compressed;
  compressed.Add("a/data.pkl", "x").last().method = 8;
  auto zip = Parse(compressed.Build());
  ASSERT_TRUE(zip.ok()) << zip.status();
  ASSERT_EQ(zip->entries().size(), 1u);
  const absl::Status status = zip->Verify(zip->entries()[0]);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("\"a/data.pkl\" is compressed (zip method 8)"), std::string::npos) << status;
}

TEST(ZipArchiveTest, RefusesDuplicates) {
  ExpectError(Parse(ZipBuilder().Add("a/x", "1").Add("a/x", "2").Build()), absl::StatusCode::kInvalidArgument,
              "\"a/x\" appears twice");
}

TEST(ZipArchiveTest, CorruptCrcNamesTheEntry) {
  ZipBuilder builder;
  builder.Add("a/data/0", "weights").last().corrupt_crc = true;
  const std::string bytes = builder.Build();
  auto zip = Parse(bytes);
  ASSERT_TRUE(zip.ok()) << zip.status();
  const absl::Status status = zip->Verify(zip->entries()[0]);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("\"a/data/0\" is corrupt"), std::string::npos) << status;
}

// Sizes and offsets that point outside the file, or fields that contradict each other.
TEST(ZipArchiveTest, InconsistentRecordsAreDataLoss) {
  const std::string good = ZipBuilder().Add("a/data.pkl", "pickle").Add("a/data/0", "0123456789").Build();
  const size_t end = good.size() - 22;
  const size_t directory = good.find("PK\x01\x02");
  ASSERT_NE(directory, std::string::npos);
  auto patched = [&](size_t at, const std::string& bytes) {
    std::string s = good;
    s.replace(at, bytes.size(), bytes);
    return s;
  };
  struct Case {
    const char* what;
    std::string bytes;
    const char* needle;
  };
  const Case cases[] = {
      {"directory offset past the end", patched(end + 16, std::string("\xff\xff\xff\x7f", 4)), "central directory"},
      {"entry count beyond the directory", patched(end + 8, std::string("\xff\x7f\xff\x7f", 4)), "entries"},
      {"saturated count without zip64", patched(end + 8, std::string("\xff\xff\xff\xff", 4)), "zip64"},
      {"directory signature", patched(directory, "XX"), "not a file header"},
      {"entry size past the data", patched(directory + 20, std::string("\xff\xff\x00\x00\xff\xff\x00\x00", 8)),
       "run past the data area"},
      {"sizes disagree", patched(directory + 20, std::string("\x05\x00\x00\x00", 4)), "compressed size"},
      {"local header offset", patched(directory + 42, std::string("\x10\x00\x00\x00", 4)), "local header"},
      {"local name", patched(30, "b"), "names another entry"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ExpectError(Parse(c.bytes), absl::StatusCode::kDataLoss, c.needle);
  }
}

// Byte flips anywhere in a real archive: an error or a consistent archive, never a crash (the
// sanitizer builds run this too).
TEST(ZipArchiveTest, SurvivesEverySingleByteFlip) {
  const std::string bytes = ReadBytes(TestDataPath("pytorch_bin/protocol4.bin"));
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xFF}) {
      std::string mutated = bytes;
      mutated[i] = static_cast<char>(mutated[i] ^ flip);
      auto zip = Parse(mutated);
      if (!zip.ok()) continue;
      for (const ZipArchive::Entry& e : zip->entries()) {
        const auto* begin = reinterpret_cast<const uint8_t*>(mutated.data());
        ASSERT_GE(e.data, begin);
        ASSERT_LE(e.data + e.size, begin + mutated.size()) << "byte " << i;
        (void)zip->Verify(e);
      }
    }
  }
}

}  // namespace
}  // namespace relserve
