#include "tests/checkpoint/libtorch_archive.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>

namespace relserve::testing {

void WriteTorchSaveArchive(const std::string& path, const NamedTensors& tensors, const std::string& byteorder) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor);

  std::string pickle;
  // tag_aggregates off: no torch.jit._pickle.restore_type_tag around the dict, which torch.save
  // never writes and the reader refuses.
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pickle.append(data, size); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
                              /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
                              /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();

  caffe2::serialize::PyTorchStreamWriter writer(path);
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  if (!byteorder.empty()) writer.writeRecord("byteorder", byteorder.data(), byteorder.size());
  const std::vector<at::Tensor>& storages = pickler.tensorData();
  for (size_t i = 0; i < storages.size(); ++i) {
    torch::jit::WriteableTensorData data = torch::jit::getWriteableTensorData(storages[i]);
    writer.writeRecord("data/" + std::to_string(i), data.data(), data.sizeInBytes());
  }
  writer.writeEndOfFile();
}

}  // namespace relserve::testing
