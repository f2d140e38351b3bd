#include "server/rpc/message_codec.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/support/slice.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/util/log.h"
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

// The handler FilterProtobufLog replaced (protobuf's default one, unless someone replaced that).
google::protobuf::LogHandler* previous_log_handler = nullptr;

// InstallProtobufLogFilter's handler.

void FilterProtobufLog(google::protobuf::LogLevel level, const char* filename, int line, const std::string& message) {
  // wire_format_lite.cc's PrintUTF8ErrorLog, for a proto3 string field that fails its check.
  if (!absl::StrContains(message, "contains invalid UTF-8 data when parsing a protocol buffer")) {
    if (previous_log_handler != nullptr) previous_log_handler(level, filename, line, message);
    return;
  }
  static std::mutex mu;
  static absl::Time last_report = absl::InfinitePast();
  static int64_t unreported = 0;
  const absl::Time now = absl::Now();
  int64_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    ++unreported;
    if (now - last_report < absl::Minutes(1)) return;
    last_report = now;
    count = unreported;
    unreported = 0;
  }
  LogWarning(absl::StrCat(count, count == 1 ? " gRPC request" : " gRPC requests",
                          " held a string that is not valid UTF-8 (answered INVALID_ARGUMENT naming the field); ",
                          "such requests are reported here at most once a minute"));
}

}  // namespace

void InstallProtobufLogFilter() {
  static std::once_flag once;
  std::call_once(once, [] { previous_log_handler = google::protobuf::SetLogHandler(&FilterProtobufLog); });
}

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
