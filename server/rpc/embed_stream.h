#ifndef RELSERVE_SERVER_RPC_EMBED_STREAM_H_
#define RELSERVE_SERVER_RPC_EMBED_STREAM_H_

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/call_tracker.h"

namespace relserve {

class EncoderService;

// EmbedStream: each request is answered by one response, in order, one at a time. A message
// that cannot be read ends the stream with INVALID_ARGUMENT; a failed request ends it with its
// status. During a drain a stream waiting for the client's next message ends at once with
// UNAVAILABLE, and one at work ends with UNAVAILABLE right after its answer is written, so
// open streams never hold a shutdown. A stream whose `auth` is not OK (a missing or wrong API
// key) ends at once with that status, before any message is read. Deleted by gRPC's OnDone.
grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewEmbedStream(EncoderService* service,
                                                                            CallTracker* tracker,
                                                                            ServerMetrics* metrics,
                                                                            absl::Time deadline,
                                                                            const absl::Status& auth);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_EMBED_STREAM_H_
