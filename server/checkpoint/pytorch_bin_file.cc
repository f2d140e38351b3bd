#include "server/checkpoint/pytorch_bin_file.h"

#include <cstring>
#include <map>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/checkpoint/state_dict_pickle.h"
#include "server/checkpoint/zip_archive.h"
#include "server/safetensors/dtype.h"
#include "server/util/quote.h"
#include "server/util/status_macros.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint readers hand out little-endian bytes as they are stored"
#endif

namespace relserve {
namespace {

constexpr char kLegacyHelp[] =
    "re-save it where PyTorch runs (torch.save(torch.load(path), path), any version since 1.6) or convert "
    "it to safetensors there (model.save_pretrained(dir, safe_serialization=True))";

bool StartsWith(const uint8_t* data, size_t size, std::string_view prefix) {
  return size >= prefix.size() && std::memcmp(data, prefix.data(), prefix.size()) == 0;
}

// Files that are not a torch.save zip archive, each with what to do about it.
absl::Status NotAnArchive(const uint8_t* data, size_t size, const std::string& label) {
  if (size == 0) return absl::DataLossError(absl::StrCat(label, ": the file is empty"));
  if (StartsWith(data, size, "version https://git-lfs")) {
    return absl::InvalidArgumentError(absl::StrCat(
        label, ": is a Git LFS pointer, not the weights: fetch them (git lfs pull) or download the file itself"));
  }
  // torch.save before 1.6 (or with _use_new_zipfile_serialization=False) writes pickles one
  // after another, the first a protocol-2 magic number; before 0.4, a tar archive.
  const bool legacy_pickle = size >= 2 && data[0] == 0x80 && data[1] >= 2 && data[1] <= 5;
  const bool legacy_tar = size > 262 && std::memcmp(data + 257, "ustar", 5) == 0;
  if (legacy_pickle || legacy_tar) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": is in PyTorch's legacy serialization format (torch.save before 1.6, or with "
                            "_use_new_zipfile_serialization=False), which is read only by running its pickles in "
                            "Python: relserve does not read it; ",
                     kLegacyHelp));
  }
  std::string head;
  for (size_t i = 0; i < size && i < 4; ++i) absl::StrAppend(&head, i ? " " : "", absl::Hex(data[i], absl::kZeroPad2));
  return absl::InvalidArgumentError(absl::StrCat(label, ": is not a PyTorch checkpoint: torch.save writes a zip archive "
                                                        "(starting with 50 4b 03 04), this file starts with ",
                                                 head));
}

// The directory all entries live under ("archive", or the file's stem for older writers): the
// one holding data.pkl.
absl::StatusOr<std::string> FindPrefix(const ZipArchive& zip, const std::string& label) {
  std::string prefix;
  bool torchscript = false;
  for (const ZipArchive::Entry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    const absl::string_view rest = absl::string_view(e.name).substr(slash + 1);
    torchscript = torchscript || rest == "constants.pkl" || absl::StartsWith(rest, "code/");
    if (rest != "data.pkl") continue;
    if (!prefix.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(label, ": holds several pickles (", Quote(prefix + "/data.pkl"),
                                                     " and ", Quote(e.name), "); torch.save writes one"));
    }
    prefix = e.name.substr(0, slash);
  }
  if (torchscript) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": is a TorchScript archive (torch.jit.save), not a state dict: save the weights with "
                            "torch.save(model.state_dict(), path) or model.save_pretrained(dir)"));
  }
  if (prefix.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, ": is a zip archive without a <name>/data.pkl entry, so not one that torch.save wrote"));
  }
  return prefix;
}

bool IsContiguous(const PickledTensor& t) {
  for (int64_t d : t.shape) {
    if (d == 0) return true;
  }
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.stride[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

// Copies a strided view out, row-major. The pickle reader checked that every element lies
// inside the storage.
void Gather(const uint8_t* base, const PickledTensor& t, size_t element, uint8_t* out) {
  const size_t dims = t.shape.size();
  std::vector<int64_t> index(dims, 0);
  int64_t numel = 1;
  for (int64_t d : t.shape) numel *= d;
  int64_t source = t.offset;
  for (int64_t n = 0; n < numel; ++n) {
    std::memcpy(out + n * element, base + source * element, element);
    for (size_t i = dims; i-- > 0;) {  // odometer: the last dimension moves fastest
      source += t.stride[i];
      if (++index[i] < t.shape[i]) break;
      source -= t.stride[i] * t.shape[i];
      index[i] = 0;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<PytorchBinTensors>> ParsePytorchBin(const uint8_t* data, size_t size,
                                                                   const std::string& label) {
  if (!StartsWith(data, size, "PK\x03\x04")) return NotAnArchive(data, size, label);
  ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::Parse(data, size, label));
  ASSIGN_OR_RETURN(const std::string prefix, FindPrefix(zip, label));

  if (const ZipArchive::Entry* order = zip.Find(prefix + "/byteorder")) {
    RETURN_IF_ERROR(zip.Verify(*order));
    const std::string_view value(reinterpret_cast<const char*>(order->data), order->size);
    if (value == "big") {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": its storages are big-endian (byteorder \"big\"), which relserve does not read: re-save it on a "
                 "little-endian machine, or convert it to safetensors there"));
    }
    if (value != "little") {
      return absl::InvalidArgumentError(absl::StrCat(label, ": unknown byteorder ", Quote(value),
                                                     " (torch.save writes \"little\" or \"big\")"));
    }
  }  // absent: written before PyTorch recorded it, and little-endian like every machine it ran on

  const ZipArchive::Entry* pickle = zip.Find(prefix + "/data.pkl");
  RETURN_IF_ERROR(zip.Verify(*pickle));
  ASSIGN_OR_RETURN(
      PickledStateDict dict,
      ReadStateDictPickle(std::string_view(reinterpret_cast<const char*>(pickle->data), pickle->size), label));

  // Each storage's bytes, checked once: data/<key>, exactly numel elements of its type.
  std::vector<const uint8_t*> bases(dict.storages.size(), nullptr);
  std::vector<std::string> first_user(dict.storages.size());
  for (const PickledTensor& t : dict.tensors) {
    if (first_user[t.storage].empty()) first_user[t.storage] = t.name;
  }
  uint64_t storage_bytes = 0;
  for (size_t i = 0; i < dict.storages.size(); ++i) {
    const PickledStorage& s = dict.storages[i];
    if (first_user[i].empty()) continue;  // named by the pickle but used by no tensor of the dict
    const std::string entry_name = absl::StrCat(prefix, "/data/", s.key);
    const ZipArchive::Entry* entry = zip.Find(entry_name);
    if (entry == nullptr) {
      return absl::DataLossError(absl::StrCat(label, ": storage ", Quote(s.key), " of tensor ", Quote(first_user[i]),
                                              " is missing: the archive has no entry ", Quote(entry_name)));
    }
    RETURN_IF_ERROR(zip.Verify(*entry));
    const size_t element = StDTypeSize(s.dtype);
    uint64_t expected = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(s.numel), element, &expected) || entry->size != expected) {
      return absl::DataLossError(absl::StrCat(label, ": storage ", Quote(s.key), " of tensor ", Quote(first_user[i]),
                                              " holds ", entry->size, " bytes; ", s.numel, " elements of ",
                                              std::string(StDTypeName(s.dtype)), " need ", expected));
    }
    bases[i] = entry->data;
    storage_bytes += entry->size;
  }

  auto out = std::make_unique<PytorchBinTensors>();
  out->tensors.reserve(dict.tensors.size());
  uint64_t copied_bytes = 0;
  for (const PickledTensor& t : dict.tensors) {
    const PickledStorage& s = dict.storages[t.storage];
    const size_t element = StDTypeSize(s.dtype);
    TensorView view{t.name, s.dtype, t.shape, nullptr, 0};
    const int64_t numel = view.numel();  // no overflow: ReadStateDictPickle checked it
    view.nbytes = static_cast<size_t>(numel) * element;
    if (IsContiguous(t)) {
      view.data = bases[t.storage] + static_cast<size_t>(t.offset) * element;
    } else {
      if (numel > s.numel) {
        return absl::InvalidArgumentError(absl::StrCat(
            label, ": tensor ", Quote(t.name), " is a view of ", numel, " elements over a storage of ", s.numel,
            " (an expanded tensor); save it with .contiguous() or .clone()"));
      }
      copied_bytes += view.nbytes;
      if (copied_bytes > storage_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            label, ": its non-contiguous views add up to more bytes (", copied_bytes, ") than its storages hold (",
            storage_bytes, "); save the tensors with .contiguous() or .clone()"));
      }
      std::vector<uint8_t>& copy = out->copies.emplace_back(view.nbytes);
      Gather(bases[t.storage], t, element, copy.data());
      view.data = copy.data();
    }
    out->tensors.push_back(std::move(view));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PytorchBinFile>> PytorchBinFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(std::unique_ptr<PytorchBinTensors> contents, ParsePytorchBin(file->data(), file->size(), path));
  return std::unique_ptr<PytorchBinFile>(new PytorchBinFile(std::move(file), std::move(contents)));
}

}  // namespace relserve
