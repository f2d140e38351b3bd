#ifndef RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_
#define RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"

#include "relserve/v1/encoder.grpc.pb.h"
#include "server/metrics/server_metrics.h"
#include "server/rpc/call_tracker.h"
#include "server/serving/encoder_serving.h"
#include "server/serving/model_registry.h"

namespace relserve {

// The generated service with every method raw: requests arrive and responses leave as bytes,
// so that the service parses and sizes them itself (message_codec.h says why).
using RawEncoderService = v1::Encoder::WithRawCallbackMethod_Embed<
    v1::Encoder::WithRawCallbackMethod_EmbedTokens<v1::Encoder::WithRawCallbackMethod_Rerank<
        v1::Encoder::WithRawCallbackMethod_Classify<v1::Encoder::WithRawCallbackMethod_Tokenize<
            v1::Encoder::WithRawCallbackMethod_ListModels<v1::Encoder::WithRawCallbackMethod_EmbedStream<
                v1::Encoder::Service>>>>>>>;

// relserve.v1.Encoder over gRPC's callback API: an adapter between the wire and the serving
// layer (EncoderServing), which tokenizes on the gRPC thread, hands each sequence to the
// model's batcher and answers when the last one is back; nothing blocks a gRPC thread on the
// model. The service owns what is gRPC's: parsing and sizing messages, the status codes, the
// per-call metrics, cancellation and the drain.
class EncoderService final : public RawEncoderService {
 public:
  // `serving`, `registry` and `metrics` (may be null) outlive the service.
  EncoderService(const EncoderServing* serving, const ModelRegistry* registry, ServerMetrics* metrics);

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* EmbedTokens(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* EmbedStream(grpc::CallbackServerContext* ctx) override;

  // Graceful shutdown: from now on new calls are refused with UNAVAILABLE and idle streams
  // end; calls already running carry on. WaitForIdle returns true once none is left, false at
  // `deadline`.
  void StartDraining() { tracker_.StartDraining(); }
  bool WaitForIdle(absl::Time deadline) const { return tracker_.WaitForIdle(deadline); }
  // Calls (and open streams) currently running.
  int64_t in_flight() const { return tracker_.in_flight(); }

  // Shared by Embed and EmbedStream: answers `request` into `response`, then calls `reply`
  // with the status and the model the request named.
  using Reply = std::function<void(const absl::Status&, const std::string& model)>;
  void HandleEmbed(absl::Time deadline, std::shared_ptr<const std::atomic<bool>> cancelled,
                   const v1::EmbedRequest& request, v1::EmbedResponse* response, Reply reply) const;

 private:
  const EncoderServing* serving_;
  ServerMetrics* metrics_;
  CallTracker tracker_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_
