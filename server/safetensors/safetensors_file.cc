#include "server/safetensors/safetensors_file.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/safetensors/header_parser.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> mapped, MappedFile::Open(path));
  ASSIGN_OR_RETURN(SafetensorsLayout layout,
                   ParseSafetensorsLayout(mapped->data(), mapped->size(), path));

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(std::move(mapped)));
  const uint8_t* data_buffer = file->file_->data() + layout.data_start;
  file->tensors_.reserve(layout.tensors.size());
  for (SafetensorsEntry& entry : layout.tensors) {
    file->index_.emplace(entry.name, file->tensors_.size());
    file->tensors_.push_back(TensorView{std::move(entry.name), entry.dtype, std::move(entry.shape),
                                        data_buffer + entry.begin,
                                        static_cast<size_t>(entry.end - entry.begin)});
  }
  file->metadata_ = std::move(layout.metadata);
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const TensorView*> SafetensorsFile::Get(std::string_view name) const {
  const TensorView* view = Find(name);
  if (view == nullptr) {
    return absl::NotFoundError(absl::StrCat(path(), ": no tensor named '", std::string(name), "'"));
  }
  return view;
}

}  // namespace relserve
