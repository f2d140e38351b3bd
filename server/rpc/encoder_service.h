#ifndef RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_
#define RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_

#include <atomic>
#include <string>

#include "absl/time/time.h"

#include "relserve/v1/encoder.grpc.pb.h"
#include "server/metrics/server_metrics.h"
#include "server/rpc/model_registry.h"

namespace relserve {

struct ServiceLimits {
  int max_inputs_per_request = 256;  // inputs of Embed/EmbedTokens/Classify/Tokenize, documents of Rerank
};

// relserve.v1.Encoder over gRPC's callback API. Handlers tokenize on the gRPC thread, hand
// each sequence to the model's batcher, and answer when the last one is back; nothing blocks
// a gRPC thread on the model.
class EncoderService final : public v1::Encoder::CallbackService {
 public:
  EncoderService(const ModelRegistry* registry, ServerMetrics* metrics, ServiceLimits limits);

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* ctx, const v1::EmbedRequest* request,
                                  v1::EmbedResponse* response) override;
  grpc::ServerUnaryReactor* EmbedTokens(grpc::CallbackServerContext* ctx, const v1::EmbedTokensRequest* request,
                                        v1::EmbedTokensResponse* response) override;
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* ctx, const v1::RerankRequest* request,
                                   v1::RerankResponse* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* ctx, const v1::ClassifyRequest* request,
                                     v1::ClassifyResponse* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerBidiReactor<v1::EmbedRequest, v1::EmbedResponse>* EmbedStream(grpc::CallbackServerContext* ctx) override;

  // Graceful shutdown: from now on new calls are refused with UNAVAILABLE; calls already
  // running carry on. WaitForIdle returns true once none is left, false at `deadline`.
  void StartDraining();
  bool WaitForIdle(absl::Time deadline);
  // Calls (and open streams) currently running.
  int64_t in_flight() const { return in_flight_.load(); }
  // For the call objects: +1 when a call starts, -1 when it is done.
  void CallStarted() { in_flight_.fetch_add(1); }
  void CallDone() { in_flight_.fetch_sub(1); }
  bool draining() const { return draining_.load(); }
  // The `model` label of a finished call's metrics: the served model's name, or "unknown" when
  // the request named no served model (so clients cannot create label values at will).
  std::string MetricsModelLabel(const std::string& requested) const;

  // Shared by Embed and EmbedStream: answers `request` into `response`, then calls `reply`.
  using Reply = std::function<void(const absl::Status&, const std::string& model)>;
  void HandleEmbed(absl::Time deadline, std::shared_ptr<const std::atomic<bool>> cancelled,
                   const v1::EmbedRequest& request, v1::EmbedResponse* response, Reply reply);

 private:
  const ModelRegistry* registry_;
  ServerMetrics* metrics_;
  ServiceLimits limits_;
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> draining_{false};
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_ENCODER_SERVICE_H_
