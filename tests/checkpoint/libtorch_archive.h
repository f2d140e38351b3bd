#ifndef RELSERVE_TESTS_CHECKPOINT_LIBTORCH_ARCHIVE_H_
#define RELSERVE_TESTS_CHECKPOINT_LIBTORCH_ARCHIVE_H_

// pytorch_model.bin files written by LibTorch itself, for tests that need real checkpoints of
// any content without Python: the pickle by torch::jit::Pickler (whose tensors are written in
// torch.save's format: _rebuild_tensor_v2 over storages by persistent id, one storage per
// StorageImpl, so views, offsets and shared storages come out as PyTorch wrote them), the zip by
// caffe2::serialize::PyTorchStreamWriter, the class Python's torch.save writes through.

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace relserve::testing {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A state dict {name: tensor} as a plain dict (as transformers' save_pretrained pickles it)
// into `path`; the archive's directory is the file's stem, as torch.save names it. With
// `byteorder`, a <stem>/byteorder record as PyTorch 2.x writes. Throws on failure.
void WriteTorchSaveArchive(const std::string& path, const NamedTensors& tensors, const std::string& byteorder = "");

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_CHECKPOINT_LIBTORCH_ARCHIVE_H_
