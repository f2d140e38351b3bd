#ifndef RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_
#define RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"

#include "relserve/v1/encoder.grpc.pb.h"
#include "server/auth/api_keys.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/call_tracker.h"
#include "server/serving/encoder_serving.h"
#include "server/serving/model_registry.h"

namespace relserve {

// The generated service with every method raw: requests arrive and responses leave as bytes,
// so that the service parses and sizes them itself (message_codec.h says why).
using RawEncoderService = v1::Encoder::WithRawCallbackMethod_Embed<
    v1::Encoder::WithRawCallbackMethod_EmbedTokens<v1::Encoder::WithRawCallbackMethod_Rerank<
        v1::Encoder::WithRawCallbackMethod_Classify<v1::Encoder::WithRawCallbackMethod_Tokenize<
            v1::Encoder::WithRawCallbackMethod_ListModels<v1::Encoder::WithRawCallbackMethod_EmbedStream<
                v1::Encoder::WithRawCallbackMethod_ZeroShotClassify<
                    v1::Encoder::WithRawCallbackMethod_ClassifyTokens<v1::Encoder::Service>>>>>>>>>;

// relserve.v1.Encoder over gRPC's callback API: an adapter between the wire and the serving
// layer (EncoderServing), which tokenizes on the gRPC thread, hands each sequence to the
// model's batcher and answers when the last one is back; nothing blocks a gRPC thread on the
// model. The service owns what is gRPC's: parsing and sizing messages, the status codes, the
// per-call metrics, cancellation, API keys and the drain.
//
// With `api_keys`, every method (EmbedStream included) first checks the call's "authorization"
// metadata ("Bearer KEY"): a missing or wrong key is answered UNAUTHENTICATED before the
// request is read, and counted in relserve_unauthenticated_requests_total{transport="grpc"}
// and relserve_requests_total (model "unknown"). Health and reflection are other services and
// stay open.
class EncoderService final : public RawEncoderService {
 public:
  // `serving`, `registry`, `metrics` (may be null) and `api_keys` (may be null: no key needed)
  // outlive the service.
  EncoderService(const EncoderServing* serving, const ModelRegistry* registry, ServerMetrics* metrics,
                 const ApiKeys* api_keys = nullptr);

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
  grpc::ServerUnaryReactor* ZeroShotClassify(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                             grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ClassifyTokens(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;

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
  // OK, or UNAUTHENTICATED (counted) when the call does not carry one of the API keys.
  absl::Status Authenticate(const grpc::CallbackServerContext* ctx) const;

  const EncoderServing* serving_;
  ServerMetrics* metrics_;
  const ApiKeys* api_keys_;
  CallTracker tracker_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_
