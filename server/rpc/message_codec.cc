#include "server/rpc/message_codec.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/str_cat.h"
#include "server/util/utf8.h"

namespace relserve {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Walks the wire form of a message that failed to parse, without UTF-8 checks, along its
// descriptor, and returns the path of the first string field whose bytes are not UTF-8.
std::optional<std::string> FindInvalidString(const Descriptor* type, const UnknownFieldSet& fields,
                                             const std::string& prefix, int depth) {
  if (depth > 32) return std::nullopt;
  std::map<int, int> seen;  // field number -> occurrences so far (the index of repeated fields)
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& f = fields.field(i);
    const int index = seen[f.number()]++;
    const FieldDescriptor* fd = type->FindFieldByNumber(f.number());
    if (fd == nullptr || f.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    std::string path = prefix.empty() ? fd->name() : absl::StrCat(prefix, ".", fd->name());
    if (fd->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    if (fd->type() == FieldDescriptor::TYPE_STRING) {
      if (auto bad = FindInvalidUtf8(f.length_delimited())) {
        return absl::StrCat(path, " is not valid UTF-8 (byte offset ", bad->offset, ": ", bad->reason, ")");
      }
    } else if (fd->type() == FieldDescriptor::TYPE_MESSAGE) {
      UnknownFieldSet nested;
      if (!nested.ParseFromString(f.length_delimited())) continue;
      if (auto found = FindInvalidString(fd->message_type(), nested, path, depth + 1)) return found;
    }
  }
  return std::nullopt;
}

std::string Flatten(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bytes.Dump(&slices).ok()) return out;
  out.reserve(bytes.Length());
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

}  // namespace

absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  const std::string wire = Flatten(bytes);
  if (message->ParseFromString(wire)) return absl::OkStatus();
  UnknownFieldSet fields;
  if (fields.ParseFromString(wire)) {
    if (auto bad = FindInvalidString(message->GetDescriptor(), fields, "", 0)) return absl::InvalidArgumentError(*bad);
  }
  return absl::InvalidArgumentError(absl::StrCat("the request is not a valid ", message->GetDescriptor()->full_name(),
                                                 " message (malformed protobuf encoding of ", wire.size(), " bytes)"));
}

absl::Status SerializeMessage(const google::protobuf::Message& message, size_t max_bytes, grpc::ByteBuffer* bytes) {
  const size_t size = message.ByteSizeLong();
  if (size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the response would be ", size, " bytes, more than the largest ",
                                                   "message of ", max_bytes, " bytes; split the request"));
  }
  std::string wire;
  message.SerializeToString(&wire);
  grpc::Slice slice(std::move(wire));
  *bytes = grpc::ByteBuffer(&slice, 1);
  return absl::OkStatus();
}

}  // namespace relserve
