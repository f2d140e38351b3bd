#include "server/safetensors/safetensors_writer.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/safetensors/safetensors_file.h"
#include "tests/safetensors/test_files.h"

namespace relserve {
namespace {

using ::relserve::testing::ReadBytes;
using ::relserve::testing::TestDataPath;

// Splits a serialized image into (N, header text incl. padding); checks the prefix fits.
std::pair<uint64_t, std::string> SplitHeader(const std::string& image) {
  EXPECT_GE(image.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(image[i]);
  EXPECT_LE(8 + n, image.size());
  return {n, image.substr(8, n)};
}

std::string Bytes(size_t n, int seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>((i * 31 + seed * 7 + 1) & 0xFF);
  return out;
}

std::string FloatBytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

class SafetensorsWriterTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchDir(); }
  void TearDown() override { testing::RemoveScratchDir(dir_); }
  std::string dir_;
};

TEST_F(SafetensorsWriterTest, RoundTripsEveryDTypeWithEmptyTensorsAndMetadata) {
  const StDType all[] = {StDType::kF64, StDType::kF32, StDType::kF16, StDType::kBF16,
                         StDType::kI64, StDType::kI32, StDType::kI16, StDType::kI8,
                         StDType::kU8,  StDType::kBool};
  struct Expected {
    std::string name;
    StDType dtype;
    std::vector<int64_t> shape;
    std::string bytes;
  };
  std::vector<Expected> expected;
  int seed = 0;
  for (StDType dtype : all) {
    const std::string base(StDTypeName(dtype));
    const size_t size = StDTypeSize(dtype);
    expected.push_back({base + ".matrix", dtype, {2, 3}, Bytes(6 * size, ++seed)});
    expected.push_back({base + ".empty", dtype, {0, 4}, ""});
    expected.push_back({base + ".scalar", dtype, {}, Bytes(size, ++seed)});
  }
  SafetensorsWriter writer;
  for (const Expected& e : expected) {
    ASSERT_TRUE(writer.Add(e.name, e.dtype, e.shape, e.bytes.data(), e.bytes.size()).ok())
        << e.name;
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "round trip"}};
  writer.SetMetadata(metadata);
  const std::string path = dir_ + "/all.safetensors";
  ASSERT_TRUE(writer.WriteFile(path).ok());

  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata(), metadata);
  ASSERT_EQ((*file)->tensors().size(), expected.size());
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    const TensorView* view = (*file)->Find(e.name);
    ASSERT_NE(view, nullptr);
    EXPECT_EQ(view->dtype, e.dtype);
    EXPECT_EQ(view->shape, e.shape);
    ASSERT_EQ(view->nbytes, e.bytes.size());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(view->data), view->nbytes), e.bytes);
    // The layout order keeps every tensor aligned to its element size within the mapping.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(view->data) % StDTypeSize(e.dtype), 0u);
  }
}

// Expected bytes follow the reference implementation's own serialization tests.
TEST_F(SafetensorsWriterTest, MatchesReferenceSerializerBytes) {
  const std::string data = FloatBytes({0, 1, 2, 3, 4, 5});
  {
    SafetensorsWriter writer;
    ASSERT_TRUE(writer.Add("attn.0", StDType::kF32, {1, 2, 3}, data.data(), data.size()).ok());
    const std::string header =
        R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
    ASSERT_EQ(header.size(), 64u);  // needs no padding
    EXPECT_EQ(writer.Serialize(), std::string("\x40\0\0\0\0\0\0\0", 8) + header + data);
  }
  {
    SafetensorsWriter writer;
    ASSERT_TRUE(writer.Add("attn0", StDType::kF32, {1, 1, 2, 3}, data.data(), data.size()).ok());
    const std::string header =
        R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})"
        "       ";
    EXPECT_EQ(writer.Serialize(), std::string("\x48\0\0\0\0\0\0\0", 8) + header + data);
  }
  {
    SafetensorsWriter writer;
    EXPECT_EQ(writer.Serialize(), std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
    writer.SetMetadata({{"framework", "pt"}});
    EXPECT_EQ(writer.Serialize(), std::string("\x28\0\0\0\0\0\0\0", 8) +
                                      R"({"__metadata__":{"framework":"pt"}})" + "     ");
    writer.SetMetadata({});
    EXPECT_EQ(writer.Serialize(),
              std::string("\x18\0\0\0\0\0\0\0", 8) + R"({"__metadata__":{}})" + "     ");
  }
}

TEST_F(SafetensorsWriterTest, LaysOutByDescendingAlignmentThenName) {
  SafetensorsWriter writer;
  auto add = [&](const std::string& name, StDType dtype, int64_t n) {
    const std::string bytes =
        Bytes(static_cast<size_t>(n) * StDTypeSize(dtype), static_cast<int>(n));
    ASSERT_TRUE(writer.Add(name, dtype, {n}, bytes.data(), bytes.size()).ok()) << name;
  };
  add("a", StDType::kU8, 3);
  add("b", StDType::kF64, 1);
  add("g", StDType::kF32, 2);
  add("c", StDType::kF32, 1);
  add("d", StDType::kI64, 1);
  add("e", StDType::kBF16, 1);
  add("f", StDType::kBool, 1);
  add("h", StDType::kI32, 1);
  add("i", StDType::kF16, 1);
  add("j", StDType::kI16, 1);
  add("k", StDType::kI8, 1);
  const std::string expected = R"({"d":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
                               R"("c":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},)"
                               R"("g":{"dtype":"F32","shape":[2],"data_offsets":[20,28]},)"
                               R"("h":{"dtype":"I32","shape":[1],"data_offsets":[28,32]},)"
                               R"("e":{"dtype":"BF16","shape":[1],"data_offsets":[32,34]},)"
                               R"("i":{"dtype":"F16","shape":[1],"data_offsets":[34,36]},)"
                               R"("j":{"dtype":"I16","shape":[1],"data_offsets":[36,38]},)"
                               R"("k":{"dtype":"I8","shape":[1],"data_offsets":[38,39]},)"
                               R"("a":{"dtype":"U8","shape":[3],"data_offsets":[39,42]},)"
                               R"("f":{"dtype":"BOOL","shape":[1],"data_offsets":[42,43]}})";
  const std::string image = writer.Serialize();
  auto [n, header] = SplitHeader(image);
  EXPECT_EQ(header.substr(0, expected.size()), expected);
  EXPECT_EQ(image.size(), 8 + n + 43);
  // The data buffer holds the tensors in that same order.
  EXPECT_EQ(image.substr(8 + n, 8), Bytes(8, 1));
  EXPECT_EQ(image.substr(8 + n + 39, 3), Bytes(3, 3));
}

// Parses the bytes back: N is a multiple of 8, padding is spaces only, and the JSON before it
// is compact (what nlohmann's own compact dump of it reproduces, key order included).
TEST_F(SafetensorsWriterTest, HeaderIsCompactJsonPaddedWithSpacesToEightBytes) {
  for (size_t len = 1; len <= 16; ++len) {
    SafetensorsWriter writer;
    const std::string data = FloatBytes({1.5f});
    ASSERT_TRUE(writer.Add(std::string(len, 'x'), StDType::kF32, {1}, data.data(), 4).ok());
    ASSERT_TRUE(writer.Add("y", StDType::kU8, {0}, nullptr, 0).ok());
    writer.SetMetadata({{"format", "pt"}});
    const std::string image = writer.Serialize();
    auto [n, header] = SplitHeader(image);
    SCOPED_TRACE(len);
    EXPECT_EQ(n % 8, 0u);
    EXPECT_EQ(image.size(), 8 + n + 4);
    const size_t json_end = header.find_last_not_of(' ') + 1;
    EXPECT_LT(header.size() - json_end, 8u);
    const std::string json = header.substr(0, json_end);
    auto parsed = nlohmann::ordered_json::parse(json);
    EXPECT_EQ(parsed.dump(), json);
    EXPECT_EQ(parsed.begin().key(), "__metadata__");
    EXPECT_EQ(parsed[std::string(len, 'x')]["data_offsets"], nlohmann::ordered_json::array({0, 4}));
    EXPECT_EQ(image.substr(8 + n), data);
  }
}

TEST_F(SafetensorsWriterTest, EscapesNamesLikeTheReferenceSerializer) {
  const std::string name = "a\"b\\c\n\t\x01\x1f/\x7f\xc3\xa9";  // ends in U+00E9
  SafetensorsWriter writer;
  ASSERT_TRUE(writer.Add(name, StDType::kU8, {1}, "z", 1).ok());
  writer.SetMetadata({{"k\r", "v\b\f"}});
  const std::string header = SplitHeader(writer.Serialize()).second;
  EXPECT_NE(header.find(R"("a\"b\\c\n\t\u0001\u001f/)"
                        "\x7f\xc3\xa9\""),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"({"k\r":"v\b\f"})"), std::string::npos) << header;

  const std::string path = dir_ + "/escaped.safetensors";
  ASSERT_TRUE(writer.WriteFile(path).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_NE((*file)->Find(name), nullptr);
  EXPECT_EQ((*file)->metadata().at("k\r"), "v\b\f");
}

TEST_F(SafetensorsWriterTest, RewritesReferenceFileByteForByte) {
  const std::string path = TestDataPath("reference/deberta_v3_like/model.safetensors");
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  SafetensorsWriter writer;
  // Added in reverse to show that the output order does not depend on insertion order.
  for (auto it = (*file)->tensors().rbegin(); it != (*file)->tensors().rend(); ++it) {
    ASSERT_TRUE(writer.Add(it->name, it->dtype, it->shape, it->data, it->nbytes).ok());
  }
  writer.SetMetadata((*file)->metadata());
  EXPECT_TRUE(writer.Serialize() == ReadBytes(path));
}

TEST_F(SafetensorsWriterTest, AddRejectsBadTensors) {
  SafetensorsWriter writer;
  const std::string bytes(16, '\0');
  ASSERT_TRUE(writer.Add("w", StDType::kF32, {2, 2}, bytes.data(), 16).ok());
  struct Case {
    const char* label;
    absl::Status status;
    std::string needle;
  };
  const Case cases[] = {
      {"duplicate", writer.Add("w", StDType::kF32, {2, 2}, bytes.data(), 16), "'w'"},
      {"too_few_bytes", writer.Add("x", StDType::kF32, {2, 2}, bytes.data(), 12), "needs 16"},
      {"too_many_bytes", writer.Add("x", StDType::kF16, {2}, bytes.data(), 8), "needs 4"},
      {"negative_dim", writer.Add("x", StDType::kU8, {-1}, bytes.data(), 0), "negative"},
      {"overflow", writer.Add("x", StDType::kF64, {int64_t{1} << 62, 4}, bytes.data(), 0),
       "overflows"},
      {"null_data", writer.Add("x", StDType::kU8, {1}, nullptr, 1), "null"},
      {"reserved_name", writer.Add("__metadata__", StDType::kU8, {0}, nullptr, 0), "reserved"},
      {"bad_utf8", writer.Add("x\xff", StDType::kU8, {0}, nullptr, 0), "UTF-8"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.label);
    EXPECT_EQ(c.status.code(), absl::StatusCode::kInvalidArgument) << c.status;
    EXPECT_NE(c.status.message().find(c.needle), std::string::npos) << c.status;
  }
  // Failed calls leave the writer as it was.
  auto file_bytes = writer.Serialize();
  EXPECT_NE(file_bytes.find(R"("w":)"), std::string::npos);
  EXPECT_EQ(file_bytes.find(R"("x")"), std::string::npos);
}

TEST_F(SafetensorsWriterTest, WriteFileReplacesAtomicallyAndReportsErrors) {
  SafetensorsWriter writer;
  ASSERT_TRUE(writer.Add("v", StDType::kI32, {1}, "\x01\x02\x03\x04", 4).ok());
  const std::string path = dir_ + "/out.safetensors";
  testing::WriteBytes(path, "old contents");
  ASSERT_TRUE(writer.WriteFile(path).ok());
  EXPECT_EQ(ReadBytes(path), writer.Serialize());
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());

  const std::string missing_dir = dir_ + "/no/such/dir/out.safetensors";
  absl::Status status = writer.WriteFile(missing_dir);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find(missing_dir), std::string::npos) << status;

  writer.SetMetadata({{"bad", "\xc3("}});
  status = writer.WriteFile(dir_ + "/bad_metadata.safetensors");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find("'bad'"), std::string::npos) << status;
  // Serialize cannot fail, so it substitutes U+FFFD and still yields a readable image.
  EXPECT_NE(writer.Serialize().find("\"\xef\xbf\xbd(\""), std::string::npos);
}

}  // namespace
}  // namespace relserve
