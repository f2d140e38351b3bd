#include "server/checkpoint/pytorch_bin_file.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/checkpoint/zip_archive.h"
#include "tests/checkpoint/pickle_builder.h"
#include "tests/checkpoint/zip_builder.h"
#include "tests/safetensors/test_files.h"

namespace relserve {
namespace {

using ::relserve::testing::PickleBuilder;
using ::relserve::testing::ReadBytes;
using ::relserve::testing::StateDictPickle;
using ::relserve::testing::StorageBytes;
using ::relserve::testing::TestDataPath;
using ::relserve::testing::WriteBytes;
using ::relserve::testing::ZipBuilder;

absl::StatusOr<std::unique_ptr<PytorchBinTensors>> Parse(const std::string& bytes) {
  return ParsePytorchBin(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.bin");
}

void ExpectError(const std::string& bytes, absl::StatusCode code, const std::vector<std::string>& needles) {
  auto parsed = Parse(bytes);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), code) << parsed.status();
  for (const std::string& needle : needles) {
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos) << "'" << needle << "' not in "
                                                                          << parsed.status();
  }
}

std::string Fixture(const std::string& name) { return ReadBytes(TestDataPath("pytorch_bin/" + name)); }

float HalfToFloat(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  float value = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                              : std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  if (exponent == 31) value = mantissa ? NAN : INFINITY;
  return (h & 0x8000) ? -value : value;
}

// Element i of a view, widened to double, for comparing with the JSON that PyTorch wrote.
double Element(const TensorView& view, size_t i) {
  const uint8_t* p = view.data + i * StDTypeSize(view.dtype);
  switch (view.dtype) {
    case StDType::kF32: { float v; std::memcpy(&v, p, 4); return v; }
    case StDType::kF64: { double v; std::memcpy(&v, p, 8); return v; }
    case StDType::kF16: { uint16_t v; std::memcpy(&v, p, 2); return HalfToFloat(v); }
    case StDType::kBF16: {
      uint32_t bits = static_cast<uint32_t>(p[0] | (p[1] << 8)) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
    case StDType::kI64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case StDType::kI32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case StDType::kU8: return *p;
    case StDType::kBool: return *p;
    default: break;
  }
  ADD_FAILURE() << "unexpected dtype";
  return 0;
}

const TensorView* FindView(const PytorchBinTensors& t, const std::string& name) {
  for (const TensorView& v : t.tensors) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// The state dict Python's torch.save wrote (tests/data/pytorch_bin/make_fixtures.py), against
// the dtypes, shapes and values PyTorch listed beside it.
TEST(PytorchBinFileTest, ReadsEveryTensorTorchSaveWrote) {
  const std::string bytes = Fixture("state_dict.bin");
  auto parsed = Parse(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const nlohmann::ordered_json expected = nlohmann::ordered_json::parse(Fixture("state_dict.json"));
  ASSERT_EQ((*parsed)->tensors.size(), expected.size());
  size_t i = 0;
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    const TensorView& view = (*parsed)->tensors[i++];
    EXPECT_EQ(view.name, name) << "the pickle's order";
    EXPECT_EQ(std::string(StDTypeName(view.dtype)), want["dtype"].get<std::string>());
    EXPECT_EQ(view.shape, want["shape"].get<std::vector<int64_t>>());
    std::vector<double> values;
    for (const auto& v : want["values"]) values.push_back(v.is_boolean() ? v.get<bool>() : v.get<double>());
    ASSERT_EQ(static_cast<size_t>(view.numel()), values.size());
    ASSERT_EQ(view.nbytes, values.size() * StDTypeSize(view.dtype));
    for (size_t k = 0; k < values.size(); ++k) EXPECT_EQ(Element(view, k), values[k]) << "element " << k;
  }
  // Contiguous views of one storage share its bytes in the file; the others are copies.
  const TensorView* all = FindView(**parsed, "shared.all");
  const TensorView* slice = FindView(**parsed, "shared.slice");
  const TensorView* transposed = FindView(**parsed, "shared.transposed");
  ASSERT_TRUE(all && slice && transposed);
  EXPECT_EQ(slice->data, all->data + 2 * 4);
  const auto* begin = reinterpret_cast<const uint8_t*>(bytes.data());
  EXPECT_TRUE(all->data >= begin && all->data < begin + bytes.size());
  EXPECT_FALSE(transposed->data >= begin && transposed->data < begin + bytes.size());
}

TEST(PytorchBinFileTest, ReadsProtocol4) {
  auto parsed = Parse(Fixture("protocol4.bin"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const TensorView* b = FindView(**parsed, "b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(Element(*b, 1), 4.0);
}

// The payloads of these files would create this file if anything ran them.
constexpr char kPayloadMarker[] = "/tmp/relserve_pickle_payload_ran";

TEST(PytorchBinFileTest, RefusesWhatTorchSaveWroteBeyondAStateDict) {
  unlink(kPayloadMarker);
  ExpectError(Fixture("malicious_system.bin"), absl::StatusCode::kInvalidArgument,
              {"test.bin", "refused global \"posix.system\"", "never runs code"});
  ExpectError(Fixture("malicious_eval_protocol4.bin"), absl::StatusCode::kInvalidArgument,
              {"refused global \"builtins.eval\""});
  EXPECT_NE(access(kPayloadMarker, F_OK), 0) << "a payload ran";
  ExpectError(Fixture("whole_module.bin"), absl::StatusCode::kInvalidArgument,
              {"refused global \"torch.nn.modules.linear.Linear\"", "a pickled model"});
  ExpectError(Fixture("nested_dict.bin"), absl::StatusCode::kInvalidArgument, {"entry \"model\" is a dict, not a tensor"});
  ExpectError(Fixture("expanded.bin"), absl::StatusCode::kInvalidArgument,
              {"tensor \"e\" is a view of 6 elements over a storage of 3", ".contiguous()"});
  ExpectError(Fixture("torchscript.pt"), absl::StatusCode::kInvalidArgument, {"TorchScript archive (torch.jit.save)"});
}

TEST(PytorchBinFileTest, LegacyFormatSaysHowToConvert) {
  ExpectError(Fixture("legacy.bin"), absl::StatusCode::kInvalidArgument,
              {"legacy serialization format", "_use_new_zipfile_serialization=False", "torch.save(torch.load(path), path)",
               "safe_serialization=True"});
  std::string tar(1024, '\0');
  std::memcpy(&tar[257], "ustar", 5);
  ExpectError(tar, absl::StatusCode::kInvalidArgument, {"legacy serialization format"});
}

TEST(PytorchBinFileTest, NamesFilesThatAreNotCheckpoints) {
  ExpectError("", absl::StatusCode::kDataLoss, {"test.bin: the file is empty"});
  ExpectError("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 12\n", absl::StatusCode::kInvalidArgument,
              {"Git LFS pointer", "git lfs pull"});
  ExpectError("{\"a\": 1}", absl::StatusCode::kInvalidArgument, {"not a PyTorch checkpoint", "starts with 7b 22 61 22"});
  ExpectError(ZipBuilder().Add("a/readme", "hi").Build(), absl::StatusCode::kInvalidArgument,
              {"without a <name>/data.pkl entry"});
  ExpectError(ZipBuilder().Add("a/data.pkl", "x").Add("b/data.pkl", "x").Build(), absl::StatusCode::kInvalidArgument,
              {"several pickles"});
  ZipBuilder rezipped;  // what `zip -r` of an extracted archive gives
  rezipped.Add("a/data.pkl", StateDictPickle({})).last().method = 8;
  ExpectError(rezipped.Build(), absl::StatusCode::kInvalidArgument,
              {"\"a/data.pkl\" is compressed (zip method 8)", "re-save the file with torch.save"});
}

// An archive of the state dict `pickle` under "a/", with `storages` as data/<key>.
std::string Archive(const std::string& pickle, const std::vector<std::pair<std::string, std::string>>& storages,
                    const std::string& byteorder = "", bool zip64 = false) {
  ZipBuilder zip(zip64);
  zip.Add("a/data.pkl", pickle);
  if (!byteorder.empty()) zip.Add("a/byteorder", byteorder);
  for (const auto& [key, bytes] : storages) zip.Add("a/data/" + key, bytes);
  zip.Add("a/version", "3\n");
  return zip.Build();
}

const std::string kFourFloats = StorageBytes(std::vector<float>{1, 2, 3, 4});

TEST(PytorchBinFileTest, ReadsZip64AndByteorderLittle) {
  const std::string pickle = StateDictPickle({{"w", "0", "FloatStorage", 4, 0, {2, 2}, {1, 2}}});
  for (bool zip64 : {false, true}) {
    auto parsed = Parse(Archive(pickle, {{"0", kFourFloats}}, "little", zip64));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    const TensorView& w = (*parsed)->tensors[0];
    // Transposed: [[1, 3], [2, 4]] row-major.
    EXPECT_EQ(Element(w, 0), 1);
    EXPECT_EQ(Element(w, 1), 3);
    EXPECT_EQ(Element(w, 2), 2);
    EXPECT_EQ(Element(w, 3), 4);
  }
}

TEST(PytorchBinFileTest, RefusesBigEndianAndUnknownByteorder) {
  const std::string pickle = StateDictPickle({{"w", "0", "FloatStorage", 4, 0, {4}, {1}}});
  ExpectError(Archive(pickle, {{"0", kFourFloats}}, "big"), absl::StatusCode::kInvalidArgument,
              {"big-endian (byteorder \"big\")"});
  ExpectError(Archive(pickle, {{"0", kFourFloats}}, "middle"), absl::StatusCode::kInvalidArgument,
              {"unknown byteorder \"middle\""});
}

TEST(PytorchBinFileTest, StorageEntriesMustBeThereWithTheirSize) {
  const std::string pickle = StateDictPickle({{"w", "0", "FloatStorage", 4, 0, {4}, {1}},
                                              {"v", "1", "FloatStorage", 3, 0, {3}, {1}}});
  ExpectError(Archive(pickle, {{"0", kFourFloats}}), absl::StatusCode::kDataLoss,
              {"storage \"1\" of tensor \"v\" is missing", "no entry \"a/data/1\""});
  ExpectError(Archive(pickle, {{"0", kFourFloats}, {"1", std::string(8, '\0')}}), absl::StatusCode::kDataLoss,
              {"storage \"1\" of tensor \"v\" holds 8 bytes; 3 elements of F32 need 12"});
  // A storage no tensor uses may be absent.
  EXPECT_TRUE(Parse(Archive(StateDictPickle({{"w", "0", "FloatStorage", 4, 0, {4}, {1}}}), {{"0", kFourFloats}})).ok());
}

TEST(PytorchBinFileTest, CorruptStorageIsDataLoss) {
  ZipBuilder zip;
  zip.Add("a/data.pkl", StateDictPickle({{"w", "0", "FloatStorage", 4, 0, {4}, {1}}}));
  zip.Add("a/data/0", kFourFloats).last().corrupt_crc = true;
  ExpectError(zip.Build(), absl::StatusCode::kDataLoss, {"entry \"a/data/0\" is corrupt"});
  // A flipped bit in the weights of a real file.
  std::string bytes = Fixture("protocol4.bin");
  auto archive = ZipArchive::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "protocol4.bin");
  ASSERT_TRUE(archive.ok()) << archive.status();
  const ZipArchive::Entry* storage = archive->Find("protocol4/data/1");
  ASSERT_NE(storage, nullptr);
  const size_t data = static_cast<size_t>(storage->data - reinterpret_cast<const uint8_t*>(bytes.data()));
  bytes[data] = static_cast<char>(bytes[data] ^ 1);
  ExpectError(bytes, absl::StatusCode::kDataLoss, {"\"protocol4/data/1\" is corrupt"});
}

// The hostile probe of issue 20: a flipped byte in the weights of a real file, with every CRC
// field of that entry zeroed (the central directory's and the data descriptor's; torch leaves
// the local header's at 0), used to load.
TEST(PytorchBinFileTest, ZeroedCrcsDoNotHideCorruption) {
  std::string bytes = Fixture("protocol4.bin");
  auto archive = ZipArchive::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "protocol4.bin");
  ASSERT_TRUE(archive.ok()) << archive.status();
  const ZipArchive::Entry* storage = archive->Find("protocol4/data/1");
  ASSERT_NE(storage, nullptr);
  const size_t data = static_cast<size_t>(storage->data - reinterpret_cast<const uint8_t*>(bytes.data()));
  ASSERT_EQ(bytes.compare(data + storage->size, 4, "PK\x07\x08"), 0);
  bytes.replace(data + storage->size + 4, 4, std::string(4, '\0'));
  size_t central = bytes.find("PK\x01\x02");
  while (central != std::string::npos && bytes.compare(central + 46, 16, "protocol4/data/1") != 0) {
    central = bytes.find("PK\x01\x02", central + 1);
  }
  ASSERT_NE(central, std::string::npos);
  bytes.replace(central + 16, 4, std::string(4, '\0'));
  // Zeroed alone, the CRC no longer matches the (intact) data.
  ExpectError(bytes, absl::StatusCode::kDataLoss, {"\"protocol4/data/1\" is corrupt", "records 00000000"});
  bytes[data] = static_cast<char>(bytes[data] ^ 1);
  ExpectError(bytes, absl::StatusCode::kDataLoss, {"\"protocol4/data/1\" is corrupt", "records 00000000"});
}

// The hostile probe of issue 20: 400 storages whose zip entries all share one 8.5 MB copy of
// their bytes, which cost 3.4 GB of CRC work. Refused while the archive is read, before any.
TEST(PytorchBinFileTest, OverlappingStoragesAreRefusedBeforeAnyCrc) {
  constexpr int kStorages = 400;
  constexpr int64_t kFloats = 8'500'000 / 4;
  std::vector<testing::TensorSpec> tensors;
  std::vector<std::string> names;
  for (int i = 0; i < kStorages; ++i) {
    const std::string key = std::to_string(i);
    tensors.push_back({"w" + key, key, "FloatStorage", kFloats, 0, {kFloats}, {1}});
    names.push_back("a/data/" + key);
  }
  const std::string bytes = ZipBuilder::Overlapping({{"a/data.pkl", StateDictPickle(tensors)}}, names,
                                                    std::string(kFloats * 4, '\x01'));
  ASSERT_LT(bytes.size(), 9'000'000u);
  const auto start = std::chrono::steady_clock::now();
  auto parsed = Parse(bytes);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "refusing " << bytes.size() << " bytes of " << kStorages << " overlapping entries took " << ms
            << " ms\n";
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
  EXPECT_NE(parsed.status().message().find("entries \"a/data/0\" (bytes"), std::string::npos) << parsed.status();
  EXPECT_NE(parsed.status().message().find("overlap"), std::string::npos) << parsed.status();
  EXPECT_LT(ms, 1000.0) << "no CRC work: one 8.5 MB CRC alone takes milliseconds";
}

// Views that copy: each may not hold more elements than its storage, and together they may not
// exceed what the storages hold, so a small file cannot ask for a large allocation.
TEST(PytorchBinFileTest, BoundsTheCopiesOfNonContiguousViews) {
  const std::string two = StateDictPickle({{"a", "0", "FloatStorage", 4, 0, {2, 2}, {1, 2}},
                                           {"b", "0", "FloatStorage", 4, 0, {2, 2}, {1, 2}}});
  ExpectError(Archive(two, {{"0", kFourFloats}}), absl::StatusCode::kInvalidArgument,
              {"non-contiguous views add up to more bytes (32) than its storages hold (16)"});
  const std::string expanded = StateDictPickle({{"e", "0", "FloatStorage", 4, 0, {1000, 4}, {0, 1}}});
  ExpectError(Archive(expanded, {{"0", kFourFloats}}), absl::StatusCode::kInvalidArgument,
              {"a view of 4000 elements over a storage of 4"});
  // Size-1 dimensions with any stride, and empty tensors, are contiguous: no copy.
  auto parsed = Parse(Archive(StateDictPickle({{"p", "0", "FloatStorage", 4, 0, {1, 4}, {0, 1}},
                                               {"z", "0", "FloatStorage", 4, 4, {0, 3}, {7, 9}}}),
                              {{"0", kFourFloats}}));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE((*parsed)->copies.empty());
}

TEST(PytorchBinFileTest, EveryTruncationIsAnError) {
  const std::string bytes = Fixture("state_dict.bin");
  for (size_t n = 0; n < bytes.size(); n += (n < 64 || n + 64 > bytes.size()) ? 1 : 7) {
    SCOPED_TRACE(n);
    auto parsed = Parse(bytes.substr(0, n));
    ASSERT_FALSE(parsed.ok());
    if (n >= 4) {
      EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss) << parsed.status();
    }
  }
}

// Flipped bytes anywhere in a real file: an error, or tensors whose bytes lie in the file or in
// the copies; never a crash (the sanitizer builds run this too).
TEST(PytorchBinFileTest, SurvivesByteFlips) {
  const std::string bytes = Fixture("state_dict.bin");
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t flip : {0x01, 0x10, 0xFF}) {
      std::string mutated = bytes;
      mutated[i] = static_cast<char>(mutated[i] ^ flip);
      auto parsed = Parse(mutated);
      if (!parsed.ok()) {
        const absl::StatusCode code = parsed.status().code();
        ASSERT_TRUE(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kDataLoss)
            << parsed.status();
        continue;
      }
      const auto* begin = reinterpret_cast<const uint8_t*>(mutated.data());
      for (const TensorView& v : (*parsed)->tensors) {
        bool in_copy = false;
        for (const auto& c : (*parsed)->copies) {
          in_copy = in_copy || (v.data >= c.data() && v.data + v.nbytes <= c.data() + c.size());
        }
        ASSERT_TRUE(in_copy || (v.data >= begin && v.data + v.nbytes <= begin + mutated.size())) << "byte " << i;
      }
    }
  }
}

TEST(PytorchBinFileTest, OpenNamesThePath) {
  const std::string dir = ::relserve::testing::ScratchDir();
  auto missing = PytorchBinFile::Open(dir + "/pytorch_model.bin");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  auto directory = PytorchBinFile::Open(dir);
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument) << directory.status();
  WriteBytes(dir + "/pytorch_model.bin", Fixture("protocol4.bin"));
  auto file = PytorchBinFile::Open(dir + "/pytorch_model.bin");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->path(), dir + "/pytorch_model.bin");
  WriteBytes(dir + "/legacy.bin", Fixture("legacy.bin"));
  auto legacy = PytorchBinFile::Open(dir + "/legacy.bin");
  EXPECT_NE(legacy.status().message().find(dir + "/legacy.bin: is in PyTorch's legacy"), std::string::npos)
      << legacy.status();
  ::relserve::testing::RemoveScratchDir(dir);
}

}  // namespace
}  // namespace relserve
