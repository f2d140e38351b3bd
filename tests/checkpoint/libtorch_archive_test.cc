// pytorch_model.bin files that LibTorch's own pickler and zip writer produce (the writer
// Python's torch.save goes through), read back by relserve's reader: every dtype, and views with
// offsets, strides and shared storages, byte for byte against LibTorch's own view of them.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <ATen/ATen.h>

#include "gtest/gtest.h"
#include "server/checkpoint/pytorch_bin_file.h"
#include "server/util/file_util.h"
#include "tests/checkpoint/libtorch_archive.h"

namespace relserve {
namespace {

using ::relserve::testing::NamedTensors;
using ::relserve::testing::WriteTorchSaveArchive;

StDType Expected(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return StDType::kF32;
    case at::kHalf: return StDType::kF16;
    case at::kBFloat16: return StDType::kBF16;
    case at::kDouble: return StDType::kF64;
    case at::kLong: return StDType::kI64;
    case at::kInt: return StDType::kI32;
    case at::kShort: return StDType::kI16;
    case at::kChar: return StDType::kI8;
    case at::kByte: return StDType::kU8;
    case at::kBool: return StDType::kBool;
    default: break;
  }
  ADD_FAILURE() << "unexpected type";
  return StDType::kF32;
}

class LibTorchArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/relserve-libtorch-archive-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string dir_;
};

TEST_F(LibTorchArchiveTest, ReadsEveryDtypeAndViewAsLibTorchSeesIt) {
  at::manual_seed(3);
  const at::Tensor base = at::arange(24, at::kFloat) * 0.25 - 2;
  const at::Tensor half = at::randn({4, 6}).to(at::kHalf);
  NamedTensors tensors = {
      {"all", base},
      {"slice", base.narrow(0, 5, 6).view({2, 3})},
      {"transposed", base.view({4, 6}).t()},
      {"column", base.view({4, 6}).select(1, 2)},
      {"every_fifth", base.slice(0, 1, 24, 5)},
      {"permuted", base.view({2, 3, 4}).permute({2, 0, 1})},
      {"half", half},
      {"half_transposed", half.t()},
      {"bfloat16", at::randn({3, 5}).to(at::kBFloat16)},
      {"double", at::randn({2, 2}, at::kDouble)},
      {"long", at::arange(-3, 3, at::kLong) * (int64_t{1} << 40)},
      {"int", at::arange(-3, 3, at::kInt)},
      {"short", at::arange(-3, 3, at::kShort)},
      {"char", at::arange(-3, 3, at::kChar)},
      {"byte", at::arange(250, 256, at::kLong).to(at::kByte)},
      {"bool", at::rand({7}) > 0.5},
      {"scalar", at::scalar_tensor(2.5)},
      {"empty", at::zeros({0, 3})},
  };
  const std::string path = dir_ + "/pytorch_model.bin";
  WriteTorchSaveArchive(path, tensors);
  auto file = PytorchBinFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), tensors.size());
  std::map<std::string, const TensorView*> by_name;
  for (const TensorView& v : (*file)->tensors()) by_name[v.name] = &v;
  for (const auto& [name, tensor] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_EQ(by_name.count(name), 1u);
    const TensorView& view = *by_name[name];
    EXPECT_EQ(view.dtype, Expected(tensor.scalar_type()));
    EXPECT_EQ(view.shape, tensor.sizes().vec());
    const at::Tensor contiguous = tensor.contiguous();
    ASSERT_EQ(view.nbytes, contiguous.nbytes());
    if (view.nbytes > 0) {
      EXPECT_EQ(std::memcmp(view.data, contiguous.data_ptr(), view.nbytes), 0);
    }
  }
  // One storage, written once: the contiguous views point into it.
  EXPECT_EQ(by_name["slice"]->data, by_name["all"]->data + 5 * sizeof(float));
}

TEST_F(LibTorchArchiveTest, ByteorderRecord) {
  const NamedTensors tensors = {{"w", at::ones({2})}};
  WriteTorchSaveArchive(dir_ + "/little.bin", tensors, "little");
  EXPECT_TRUE(PytorchBinFile::Open(dir_ + "/little.bin").ok());
  WriteTorchSaveArchive(dir_ + "/big.bin", tensors, "big");
  auto big = PytorchBinFile::Open(dir_ + "/big.bin");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("big-endian"), std::string::npos) << big.status();
}

TEST_F(LibTorchArchiveTest, RefusesExpandedViews) {
  WriteTorchSaveArchive(dir_ + "/expanded.bin", {{"e", at::arange(3, at::kFloat).expand({4, 3})}});
  auto file = PytorchBinFile::Open(dir_ + "/expanded.bin");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(file.status().message().find("a view of 12 elements over a storage of 3"), std::string::npos)
      << file.status();
}

}  // namespace
}  // namespace relserve
