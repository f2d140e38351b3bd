#include "server/safetensors/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/safetensors/header_parser.h"
#include "server/safetensors/json_string.h"
#include "server/util/utf8.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

void AppendIntList(const char* key, const std::vector<uint64_t>& values, std::string* out) {
  absl::StrAppend(out, "\"", key, "\":[");
  for (size_t i = 0; i < values.size(); ++i) absl::StrAppend(out, i ? "," : "", values[i]);
  out->push_back(']');
}

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat(path, ": write failed"));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SafetensorsWriter::Add(const std::string& name, StDType dtype,
                                    std::vector<int64_t> shape, const void* data, size_t nbytes) {
  auto invalid = [&](absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "': ", problem));
  };
  if (name == "__metadata__") return invalid("name is reserved for the metadata map");
  if (FindInvalidUtf8(name).has_value()) return invalid("name is not valid UTF-8");
  if (names_.count(name) != 0) return invalid("added twice");
  uint64_t expected = StDTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return invalid(absl::StrCat("negative dimension ", d));
    if (__builtin_mul_overflow(expected, static_cast<uint64_t>(d), &expected)) {
      return invalid("element count overflows 64 bits");
    }
  }
  if (nbytes != expected) {
    return invalid(absl::StrCat("got ", nbytes, " bytes but ", std::string(StDTypeName(dtype)),
                                " with this shape needs ", expected));
  }
  if (data == nullptr && nbytes != 0) return invalid("data is null");
  Entry entry{name, dtype, std::move(shape), std::string()};
  if (nbytes != 0) entry.bytes.assign(static_cast<const char*>(data), nbytes);
  names_.insert(name);
  entries_.push_back(std::move(entry));
  return absl::OkStatus();
}

void SafetensorsWriter::SetMetadata(std::map<std::string, std::string> metadata) {
  metadata_ = std::move(metadata);
}

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::LayoutOrder() const {
  std::vector<const Entry*> order;
  for (const Entry& e : entries_) order.push_back(&e);
  // Widest alignment first keeps every tensor aligned to its element size, given the 8-byte
  // padded header; names break ties so the output is deterministic.
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    int ra = StDTypeLayoutRank(a->dtype), rb = StDTypeLayoutRank(b->dtype);
    if (ra != rb) return ra > rb;
    return a->name < b->name;
  });
  return order;
}

std::string SafetensorsWriter::SerializeHeader(const std::vector<const Entry*>& order) const {
  std::string json = "{";
  if (metadata_) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : *metadata_) {
      if (!first) json.push_back(',');
      first = false;
      AppendJsonString(key, &json);
      json.push_back(':');
      AppendJsonString(value, &json);
    }
    json.push_back('}');
  }
  uint64_t offset = 0;
  for (const Entry* e : order) {
    if (json.size() > 1) json.push_back(',');
    AppendJsonString(e->name, &json);
    absl::StrAppend(&json, ":{\"dtype\":\"", std::string(StDTypeName(e->dtype)), "\",");
    AppendIntList("shape", std::vector<uint64_t>(e->shape.begin(), e->shape.end()), &json);
    json.push_back(',');
    AppendIntList("data_offsets", {offset, offset + e->bytes.size()}, &json);
    json.push_back('}');
    offset += e->bytes.size();
  }
  json.push_back('}');
  // The data buffer must start 8-byte aligned so that mapped tensors are aligned too.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string out(8, '\0');
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return out + json;
}

std::string SafetensorsWriter::Serialize() const {
  std::vector<const Entry*> order = LayoutOrder();
  std::string out = SerializeHeader(order);
  for (const Entry* e : order) out += e->bytes;
  return out;
}

absl::Status SafetensorsWriter::CheckWritable() const {
  if (metadata_) {
    for (const auto& [key, value] : *metadata_) {
      if (FindInvalidUtf8(key).has_value() || FindInvalidUtf8(value).has_value()) {
        return absl::InvalidArgumentError(
            absl::StrCat("metadata entry '", key, "' is not valid UTF-8"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::WriteFile(const std::string& path) const {
  RETURN_IF_ERROR(CheckWritable());
  std::vector<const Entry*> order = LayoutOrder();
  const std::string header = SerializeHeader(order);
  if (header.size() - 8 > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header of ", header.size() - 8,
                                                   " bytes exceeds what readers accept"));
  }

  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": cannot create"));
  absl::Status status = WriteAll(fd, header, tmp);
  for (const Entry* e : order) {
    if (!status.ok()) break;
    status = WriteAll(fd, e->bytes, tmp);
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at empty data.
  if (status.ok() && fsync(fd) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": fsync failed"));
  }
  if (close(fd) != 0 && status.ok()) {
    status = absl::ErrnoToStatus(errno, absl::StrCat(tmp, ": close failed"));
  }
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  if (!status.ok()) unlink(tmp.c_str());
  return status;
}

}  // namespace relserve
