#ifndef RELSERVE_SERVER_SAFETENSORS_SAFETENSORS_FILE_H_
#define RELSERVE_SERVER_SAFETENSORS_SAFETENSORS_FILE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/safetensors/dtype.h"
#include "server/safetensors/mapped_file.h"
#include "server/safetensors/tensor_view.h"

namespace relserve {

// One .safetensors file, validated at Open and memory-mapped read-only; the tensor views point
// into the mapping and stay valid for this object's lifetime.
class SafetensorsFile {
 public:
  // NOT_FOUND for a missing file, DATA_LOSS for a truncated one, INVALID_ARGUMENT for a
  // malformed header. Messages start with the path and name the offending tensor.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return file_->path(); }
  // In header order.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr if absent.
  const TensorView* Find(std::string_view name) const;
  // Like Find, but NOT_FOUND naming the file and the tensor.
  absl::StatusOr<const TensorView*> Get(std::string_view name) const;
  // The "__metadata__" map; empty if the file has none.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  explicit SafetensorsFile(std::unique_ptr<MappedFile> file) : file_(std::move(file)) {}

  std::unique_ptr<MappedFile> file_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_SAFETENSORS_SAFETENSORS_FILE_H_
