#ifndef RELSERVE_SERVER_RPC_MESSAGE_CODEC_H_
#define RELSERVE_SERVER_RPC_MESSAGE_CODEC_H_

#include <cstddef>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"

namespace google::protobuf {
class Message;
}

namespace relserve {

// The service reads its requests and writes its responses as bytes (gRPC's raw callback
// methods) instead of letting gRPC's generated code do it: when gRPC's own parsing fails it
// answers UNIMPLEMENTED with an empty message, before the service sees the call or counts it.

// Parses `bytes` into `message`. INVALID_ARGUMENT naming the problem: a string field that is
// not valid UTF-8 (proto3 refuses those) is named by its path in the request, e.g.
// "inputs[2].text is not valid UTF-8 (byte offset 0: invalid byte)"; anything else is
// "the request is not a valid relserve.v1.EmbedRequest message".
// protobuf itself logs "[libprotobuf ERROR ...] String field '...' contains invalid UTF-8 data when
// parsing a protocol buffer ..." for each such string, i.e. at least one ERROR line per request a
// client chooses to send; call InstallProtobufLogFilter() first to keep those out of the log.
absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);

// Installs (once per process; later calls do nothing) a protobuf log handler that drops
// protobuf's line about invalid UTF-8 met while parsing: the client's answer (INVALID_ARGUMENT
// naming the field) already says it, and the server has nothing to fix. Instead relserve's log
// gets at most one line a minute, when such requests arrive, saying how many there were since
// the last one. Every other protobuf message (invalid UTF-8 met while serializing, included)
// goes on to the handler installed before, protobuf's default one unless someone replaced it.
// Call it before the server starts: protobuf's handler must not change while it logs.
void InstallProtobufLogFilter();

// Serializes `message` into `bytes`. INVALID_ARGUMENT when it would be larger than
// `max_bytes`, the largest message the server sends: the request asked for more than one
// response can carry and should be split.
absl::Status SerializeMessage(const google::protobuf::Message& message, size_t max_bytes, grpc::ByteBuffer* bytes);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_MESSAGE_CODEC_H_
