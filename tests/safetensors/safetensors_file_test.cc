#include "server/safetensors/safetensors_file.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/safetensors/header_parser.h"
#include "tests/safetensors/test_files.h"

namespace relserve {
namespace {

using ::relserve::testing::RawFile;
using ::relserve::testing::ReadBytes;
using ::relserve::testing::TestDataPath;
using ::relserve::testing::WriteBytes;

const char kReferenceModel[] = "reference/deberta_v3_like/model.safetensors";

uint32_t FirstWord(const TensorView& view) {
  uint32_t word;
  std::memcpy(&word, view.data, sizeof(word));
  return word;
}

class SafetensorsFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::ScratchDir(); }
  void TearDown() override { testing::RemoveScratchDir(dir_); }

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> OpenBytes(std::string_view bytes) {
    path_ = dir_ + "/file" + std::to_string(count_++) + ".safetensors";
    WriteBytes(path_, bytes);
    return SafetensorsFile::Open(path_);
  }

  // Opens `bytes` and expects `code` with a message naming the file and every needle.
  void ExpectError(std::string_view bytes, absl::StatusCode code,
                   const std::vector<std::string>& needles) {
    auto file = OpenBytes(bytes);
    ASSERT_FALSE(file.ok()) << "opened a " << bytes.size() << "-byte image";
    EXPECT_EQ(file.status().code(), code) << file.status();
    const std::string message(file.status().message());
    EXPECT_NE(message.find(path_), std::string::npos) << message;
    for (const std::string& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos) << "'" << needle << "' not in " << message;
    }
  }

  std::string dir_;
  std::string path_;
  int count_ = 0;
};

TEST_F(SafetensorsFileTest, OpensReferenceCheckpoint) {
  auto file = SafetensorsFile::Open(TestDataPath(kReferenceModel));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 54u);
  EXPECT_EQ((*file)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));

  const TensorView* words = (*file)->Find("embeddings.word_embeddings.weight");
  ASSERT_NE(words, nullptr);
  EXPECT_EQ(words->dtype, StDType::kF32);
  EXPECT_EQ(words->shape, (std::vector<int64_t>{1000, 32}));
  EXPECT_EQ(words->numel(), 32000);
  EXPECT_EQ(words->nbytes, 128000u);
  EXPECT_EQ(FirstWord(*words), 1026311867u);  // bit pattern of 0.04205964f

  const TensorView* rel = (*file)->Find("encoder.rel_embeddings.weight");
  ASSERT_NE(rel, nullptr);
  EXPECT_EQ(rel->dtype, StDType::kF32);
  EXPECT_EQ(rel->shape, (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(FirstWord(*rel), 3193639779u);  // -0.21394114f

  EXPECT_EQ((*file)->Find("no.such.tensor"), nullptr);
  auto missing = (*file)->Get("no.such.tensor");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no.such.tensor"), std::string::npos);
}

TEST_F(SafetensorsFileTest, KeepsHeaderOrderAndMetadata) {
  std::string header = R"({"zeta":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                       R"("__metadata__":{"format":"pt","b":"2"},)"
                       R"("alpha":{"dtype":"I16","shape":[1],"data_offsets":[2,4]}}   )";
  auto file = OpenBytes(RawFile(header, "\x01\x02\x03\x04"));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->tensors()[0].name, "zeta");
  EXPECT_EQ((*file)->tensors()[1].name, "alpha");
  EXPECT_EQ((*file)->tensors()[1].data[0], 3);
  EXPECT_EQ((*file)->metadata().at("b"), "2");
  EXPECT_EQ((*file)->path(), path_);
}

TEST_F(SafetensorsFileTest, AcceptsEmptyAndScalarTensors) {
  std::string header = R"({"empty":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},)"
                       R"("scalar":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
                       R"("tail":{"dtype":"BF16","shape":[4,0],"data_offsets":[8,8]}})";
  auto file = OpenBytes(RawFile(header, std::string(8, '\x07')));
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorView* empty = (*file)->Find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->numel(), 0);
  EXPECT_EQ(empty->nbytes, 0u);
  const TensorView* scalar = (*file)->Find("scalar");
  ASSERT_NE(scalar, nullptr);
  EXPECT_EQ(scalar->numel(), 1);
  EXPECT_EQ(scalar->nbytes, 8u);
  EXPECT_EQ((*file)->Find("tail")->nbytes, 0u);
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST_F(SafetensorsFileTest, AcceptsNoTensorsNullMetadataGapsAndExtraFields) {
  EXPECT_TRUE(OpenBytes(RawFile("{}")).ok());
  EXPECT_TRUE(OpenBytes(RawFile(R"({"__metadata__":null})")).ok());
  // A gap before the tensor, trailing bytes after it, and an unknown field: harmless.
  auto file = OpenBytes(
      RawFile(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[4,6],"extra":1}})", "abcdefgh"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*file)->Find("w")->data), 2), "ef");
}

TEST_F(SafetensorsFileTest, MissingFileIsNotFound) {
  auto file = SafetensorsFile::Open(dir_ + "/absent.safetensors");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("absent.safetensors"), std::string::npos);
}

TEST_F(SafetensorsFileTest, DirectoryIsInvalidArgument) {
  auto file = SafetensorsFile::Open(dir_);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find(dir_), std::string::npos);
}

TEST_F(SafetensorsFileTest, FileShorterThanLengthPrefixIsDataLoss) {
  for (size_t size = 0; size < 8; ++size) {
    ExpectError(std::string(size, '\0'), absl::StatusCode::kDataLoss, {"too short"});
  }
}

TEST_F(SafetensorsFileTest, HeaderLengthPastEndOfFileIsDataLoss) {
  std::string bytes = RawFile("{}");
  bytes[0] = 100;  // claims a 100-byte header in a 10-byte file
  ExpectError(bytes, absl::StatusCode::kDataLoss, {"header length 100", "truncated"});
}

TEST_F(SafetensorsFileTest, HugeHeaderLengthIsInvalidArgument) {
  std::string over_limit = RawFile("{}");
  const uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) over_limit[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  ExpectError(over_limit, absl::StatusCode::kInvalidArgument, {"exceeds", "100000001"});
  ExpectError(std::string(8, '\xff') + "{}", absl::StatusCode::kInvalidArgument,
              {"18446744073709551615"});
}

struct BadHeader {
  const char* label;
  std::string header;
  absl::StatusCode code;
  std::vector<std::string> needles;
};

// Each header sits in front of a 16-byte data buffer.
std::vector<BadHeader> BadHeaders() {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  auto entry = [](const std::string& body) { return R"({"w":)" + body + "}"; };
  auto tensor = [&](const std::string& dtype, const std::string& shape,
                    const std::string& offsets) {
    return entry(R"({"dtype":)" + dtype + R"(,"shape":)" + shape + R"(,"data_offsets":)" + offsets +
                 "}");
  };
  return {
      {"empty", "", kInvalid, {"not valid JSON"}},
      {"unterminated", R"({"w":)", kInvalid, {"not valid JSON"}},
      {"trailing_garbage", R"({} x)", kInvalid, {"not valid JSON"}},
      {"nul_padding", std::string("{}\0\0", 4), kInvalid, {"not valid JSON"}},
      {"bad_utf8", "{\"w\xff\":1}", kInvalid, {"not valid JSON"}},
      // A number beyond double range is the parser's out_of_range, not a parse_error: the
      // reason is given without the library's exception tag.
      {"dim_beyond_double", tensor(R"("F32")", "[1e400]", "[0,16]"), kInvalid, {"not valid JSON: number overflow", "1e400"}},
      {"offset_beyond_double", tensor(R"("F32")", "[4]", "[0,-1e400]"), kInvalid, {"64-bit float"}},
      {"array_root", "[1,2]", kInvalid, {"array", "not an object"}},
      {"string_root", R"("w")", kInvalid, {"not an object"}},
      {"too_deep", std::string(1000, '[') + std::string(1000, ']'), kInvalid, {"deeper"}},
      {"duplicate_name",
       R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
       R"("w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
       kInvalid,
       {"'w'", "more than once"}},
      {"entry_not_object", entry("[0,4]"), kInvalid, {"'w'", "not an object"}},
      {"missing_dtype",
       entry(R"({"shape":[1],"data_offsets":[0,4]})"),
       kInvalid,
       {"'w'", "missing 'dtype'"}},
      {"missing_shape",
       entry(R"({"dtype":"F32","data_offsets":[0,4]})"),
       kInvalid,
       {"'w'", "missing 'shape'"}},
      {"missing_offsets",
       entry(R"({"dtype":"F32","shape":[1]})"),
       kInvalid,
       {"'w'", "missing 'data_offsets'"}},
      {"unknown_dtype", tensor(R"("F8_E4M3")", "[1]", "[0,1]"), kInvalid, {"'w'", "'F8_E4M3'"}},
      {"lowercase_dtype", tensor(R"("f32")", "[1]", "[0,4]"), kInvalid, {"'w'", "'f32'"}},
      {"dtype_not_string", tensor("4", "[1]", "[0,4]"), kInvalid, {"'w'", "dtype 4"}},
      {"shape_not_list", tensor(R"("F32")", "4", "[0,16]"), kInvalid, {"'w'", "not a list"}},
      {"negative_dim",
       tensor(R"("F32")", "[2,-2]", "[0,16]"),
       kInvalid,
       {"'w'", "shape[1]", "negative"}},
      {"float_dim",
       tensor(R"("F32")", "[2.5]", "[0,16]"),
       kInvalid,
       {"'w'", "shape[0]", "not an integer"}},
      {"integral_float_dim",
       tensor(R"("F32")", "[4.0]", "[0,16]"),
       kInvalid,
       {"'w'", "not an integer"}},
      {"string_dim", tensor(R"("F32")", R"(["4"])", "[0,16]"), kInvalid, {"'w'", "not an integer"}},
      {"bool_dim", tensor(R"("F32")", "[true]", "[0,16]"), kInvalid, {"'w'", "not an integer"}},
      {"dim_past_int64",
       tensor(R"("U8")", "[9223372036854775808]", "[0,16]"),
       kInvalid,
       {"'w'", "too large"}},
      {"dim_past_uint64",
       tensor(R"("U8")", "[18446744073709551616]", "[0,16]"),
       kInvalid,
       {"'w'", "not an integer"}},
      {"numel_overflow",
       tensor(R"("U8")", "[4294967296,4294967296,4]", "[0,16]"),
       kInvalid,
       {"'w'", "overflows"}},
      {"numel_overflow_before_zero",
       tensor(R"("U8")", "[4294967296,4294967296,0]", "[0,0]"),
       kInvalid,
       {"'w'", "overflows"}},
      {"nbytes_overflow",
       tensor(R"("F64")", "[2305843009213693952]", "[0,16]"),
       kInvalid,
       {"'w'", "overflows"}},
      {"offsets_not_list",
       tensor(R"("F32")", "[4]", "16"),
       kInvalid,
       {"'w'", "data_offsets 16", "two non-negative integers"}},
      {"offsets_one", tensor(R"("F32")", "[4]", "[16]"), kInvalid, {"'w'", "data_offsets"}},
      {"offsets_three", tensor(R"("F32")", "[4]", "[0,16,16]"), kInvalid, {"'w'", "data_offsets"}},
      {"offsets_negative", tensor(R"("F32")", "[1]", "[-4,0]"), kInvalid, {"'w'", "non-negative"}},
      {"offsets_float", tensor(R"("F32")", "[1]", "[0,4.0]"), kInvalid, {"'w'", "non-negative"}},
      {"offsets_strings", tensor(R"("F32")", "[1]", R"(["0","4"])"), kInvalid, {"'w'"}},
      {"offsets_reversed",
       tensor(R"("F32")", "[0]", "[8,4]"),
       kInvalid,
       {"'w'", "end before begin"}},
      {"size_mismatch",
       tensor(R"("F32")", "[2]", "[0,4]"),
       kInvalid,
       {"'w'", "span 4 bytes", "F32 [2] needs 8"}},
      {"end_past_buffer",
       tensor(R"("F32")", "[8]", "[0,32]"),
       absl::StatusCode::kDataLoss,
       {"'w'", "32", "16 bytes", "truncated"}},
      {"begin_past_buffer",
       tensor(R"("F32")", "[0]", "[17,17]"),
       absl::StatusCode::kDataLoss,
       {"'w'", "truncated"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       kInvalid,
       {"'a'", "'b'", "overlap"}},
      {"overlap_contained",
       R"({"big":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},)"
       R"("c":{"dtype":"U8","shape":[2],"data_offsets":[10,12]},)"
       R"("d":{"dtype":"U8","shape":[2],"data_offsets":[14,16]}})",
       kInvalid,
       {"'big'", "overlap"}},
      {"metadata_array", R"({"__metadata__":["pt"]})", kInvalid, {"__metadata__", "array"}},
      {"metadata_number_value",
       R"({"__metadata__":{"format":"pt","n":1}})",
       kInvalid,
       {"__metadata__", "'n'", "not a string"}},
      {"metadata_nested", R"({"__metadata__":{"o":{"x":"y"}}})", kInvalid, {"__metadata__", "'o'"}},
  };
}

TEST_F(SafetensorsFileTest, RejectsMalformedHeaders) {
  for (const BadHeader& bad : BadHeaders()) {
    SCOPED_TRACE(bad.label);
    ExpectError(RawFile(bad.header, std::string(16, '\0')), bad.code, bad.needles);
  }
}

TEST_F(SafetensorsFileTest, TruncatedReferenceCopyIsDataLoss) {
  const std::string bytes = ReadBytes(TestDataPath(kReferenceModel));
  ASSERT_GT(bytes.size(), 8000u);
  const size_t data_start = 8 + 5712;  // the reference file's header length
  for (size_t size : {size_t{0}, size_t{5}, size_t{8}, size_t{100}, data_start - 1, data_start,
                      data_start + 1000, bytes.size() - 1}) {
    SCOPED_TRACE(size);
    ExpectError(std::string_view(bytes).substr(0, size), absl::StatusCode::kDataLoss, {});
  }
}

// Random corruption of a valid image must yield either an error or views that stay inside the
// image with consistent sizes; run under a sanitizer this is the no-UB check.
TEST(SafetensorsLayoutFuzzTest, CorruptedImagesNeverEscapeTheBuffer) {
  const std::string valid = RawFile(
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"I8","shape":[3],"data_offsets":[16,19]},)"
      R"("c":{"dtype":"BOOL","shape":[0],"data_offsets":[19,19]}})",
      std::string(19, '\x05'));
  std::mt19937 rng(1234);
  const std::string alphabet = "{}[]\",:0123456789-.e \x00\xff\x7f";
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string image = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % image.size();
      switch (rng() % 4) {
        case 0:
          image[pos] = static_cast<char>(rng());
          break;
        case 1:
          image[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 2:
          image.erase(pos, 1 + rng() % 4);
          break;
        default:
          image.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
      if (image.empty()) image = "x";
    }
    // A heap copy of exactly the image's size, so that any over-read is visible to ASan.
    std::vector<uint8_t> buffer(image.begin(), image.end());
    auto layout = ParseSafetensorsLayout(buffer.data(), buffer.size(), "fuzz");
    if (!layout.ok()) {
      EXPECT_NE(layout.status().message().find("fuzz"), std::string::npos);
      continue;
    }
    ++accepted;
    for (const SafetensorsEntry& t : layout->tensors) {
      ASSERT_LE(t.begin, t.end);
      ASSERT_LE(layout->data_start + t.end, buffer.size());
      int64_t numel = 1;
      for (int64_t d : t.shape) numel *= d;
      ASSERT_EQ(t.end - t.begin, static_cast<uint64_t>(numel) * StDTypeSize(t.dtype));
    }
  }
  // The mutations must not all be fatal, or the test proves little.
  EXPECT_GT(accepted, 100) << accepted;
}

}  // namespace
}  // namespace relserve
