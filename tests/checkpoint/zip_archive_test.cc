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

// A CRC-32 of 0 is checked like any other: only data whose CRC-32 is 0 (the empty entry) has
// it. Otherwise a corrupted file would load with its CRC fields zeroed.
TEST(ZipArchiveTest, AZeroCrcIsCheckedLikeAnyOther) {
  for (bool descriptor : {false, true}) {
    SCOPED_TRACE(descriptor ? "data descriptor" : "local header");
    ZipBuilder builder;
    builder.Add("a/data/0", "weights").last().zero_crc = true;
    builder.last().data_descriptor = descriptor;
    builder.Add("a/empty", "").last().zero_crc = true;
    builder.last().data_descriptor = descriptor;
    const std::string bytes = builder.Build();
    auto zip = Parse(bytes);
    ASSERT_TRUE(zip.ok()) << zip.status();
    const absl::Status status = zip->Verify(*zip->Find("a/data/0"));
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(status.message().find("\"a/data/0\" is corrupt"), std::string::npos) << status;
    EXPECT_NE(status.message().find("the archive records 00000000"), std::string::npos) << status;
    EXPECT_NE(status.message().find("set_crc32_options(False)"), std::string::npos) << status;
    EXPECT_TRUE(zip->Verify(*zip->Find("a/empty")).ok());
  }
}

// torch.save's layout: flag bit 3, nothing in the local header, a data descriptor after the
// data (with 8-byte sizes in zip64 archives).
TEST(ZipArchiveTest, ReadsDataDescriptors) {
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "zip");
    ZipBuilder builder(zip64);
    builder.Add("a/data.pkl", "pickle").last().data_descriptor = true;
    builder.Add("a/data/0", std::string(100, 'q')).last().data_descriptor = true;
    auto zip = Parse(builder.Build());
    ASSERT_TRUE(zip.ok()) << zip.status();
    ASSERT_EQ(zip->entries().size(), 2u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(zip->entries()[0].data), zip->entries()[0].size), "pickle");
    for (const ZipArchive::Entry& e : zip->entries()) EXPECT_TRUE(zip->Verify(e).ok()) << e.name;
  }
}

// The central directory's CRC-32 is the one the data is checked against; a local header or data
// descriptor that records another is an inconsistent archive, and so are other local sizes.
TEST(ZipArchiveTest, LocalRecordsMustAgreeWithTheCentralDirectory) {
  for (bool descriptor : {false, true}) {
    ZipBuilder builder;
    builder.Add("a/data.pkl", "pickle");
    builder.Add("a/data/0", "weights").last().local_crc_differs = true;
    builder.last().data_descriptor = descriptor;
    ExpectError(Parse(builder.Build()), absl::StatusCode::kDataLoss,
                descriptor ? "the data descriptor of entry \"a/data/0\" records CRC-32"
                           : "the local header of entry \"a/data/0\" records CRC-32");
  }
  // Zeroing the central directory's CRC alone no longer passes either.
  std::string bytes = ReadBytes(TestDataPath("pytorch_bin/protocol4.bin"));
  const size_t central = bytes.find("PK\x01\x02");
  ASSERT_NE(central, std::string::npos);
  ASSERT_EQ(bytes.compare(central + 46, 18, "protocol4/data.pkl"), 0);
  bytes.replace(central + 16, 4, std::string(4, '\0'));
  ExpectError(Parse(bytes), absl::StatusCode::kDataLoss,
              "the data descriptor of entry \"protocol4/data.pkl\" records CRC-32 82a3a3bb, the central directory 00000000");

  ZipBuilder sizes;
  sizes.Add("a/data/0", "weights");
  std::string patched = sizes.Build();
  patched[18] = 3;  // the local header's compressed size
  ExpectError(Parse(patched), absl::StatusCode::kDataLoss, "the local header of entry \"a/data/0\" records sizes of 3");
  ZipBuilder described;
  described.Add("a/data/0", "weights").last().data_descriptor = true;
  patched = described.Build();
  const size_t descriptor = patched.find("PK\x07\x08");
  ASSERT_NE(descriptor, std::string::npos);
  patched[descriptor + 8] = 3;
  ExpectError(Parse(patched), absl::StatusCode::kDataLoss, "records other sizes");
}

// Entries that share bytes would let a small file cost many times its size in CRC work: refused
// while the directory is read, naming two of them.
TEST(ZipArchiveTest, RefusesOverlappingEntries) {
  const std::string bytes =
      ZipBuilder::Overlapping({{"a/data.pkl", "pickle"}}, {"a/data/0", "a/data/1", "a/data/2"}, std::string(1000, 'w'));
  // Each entry on its own is consistent.
  ExpectError(Parse(bytes), absl::StatusCode::kDataLoss, "entries \"a/data/0\" (bytes ");
  ExpectError(Parse(bytes), absl::StatusCode::kDataLoss, ") and \"a/data/1\" (bytes ");
  ExpectError(Parse(bytes), absl::StatusCode::kDataLoss, "overlap");
  EXPECT_TRUE(Parse(ZipBuilder::Overlapping({{"a/data.pkl", "pickle"}}, {"a/data/0"}, "w")).ok());
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
