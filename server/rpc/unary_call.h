#ifndef RELSERVE_SERVER_RPC_UNARY_CALL_H_
#define RELSERVE_SERVER_RPC_UNARY_CALL_H_

#include <atomic>
#include <memory>
#include <string>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/metrics/server_metrics.h"
#include "server/serving/call_tracker.h"
#include "server/rpc/reaction_order.h"
#include "server/rpc/message_codec.h"
#include "server/rpc/status_mapping.h"

namespace relserve {

// The model a request names ("" for requests that name none: the default model).
template <typename Request>
auto ModelOfRequest(const Request& r, int) -> decltype(std::string(r.model())) {
  return r.model();
}
template <typename Request>
std::string ModelOfRequest(const Request&, long) {
  return "";
}
template <typename Request>
std::string ModelOf(const Request& r) {
  return ModelOfRequest(r, 0);
}

// One unary call of the Encoder service: owns its parsed request and its response, answers
// once, and counts its outcome with the code the client really gets (a response too large to
// send included). Created by the handler, deleted by gRPC's OnDone.
template <typename Request, typename Response>
class UnaryCall : public grpc::ServerUnaryReactor {
 public:
  UnaryCall(CallTracker* tracker, ServerMetrics* metrics, const char* rpc, grpc::ByteBuffer* out)
      : tracker_(tracker), metrics_(metrics), rpc_(rpc), out_(out), start_(absl::Now()) {
    tracker_->CallStarted();
  }

  // Parses the request, or answers: `auth` when it is not OK (a missing or wrong API key; the
  // request is not read), INVALID_ARGUMENT for bytes that are not a valid Request,
  // UNAVAILABLE while the server drains. True when the handler should go on.
  bool Begin(const grpc::ByteBuffer& in, const absl::Status& auth = absl::OkStatus()) {
    if (!auth.ok()) {
      Answer(auth, kUnknownModelLabel);
      return false;
    }
    if (absl::Status s = ParseMessage(in, &request); !s.ok()) {
      Answer(s, kUnknownModelLabel);
      return false;
    }
    if (tracker_->draining()) {
      Reply(absl::UnavailableError("the server is shutting down"), ModelOf(request));
      return false;
    }
    return true;
  }

  // Answers with `status`, or with the response when it is OK. `model` is what the request
  // named (the metrics label resolves it).
  void Reply(const absl::Status& status, const std::string& model) {
    Answer(status, tracker_->MetricsModelLabel(model));
  }

  void OnCancel() override {
    ReactionScope reaction(this);
    cancelled_->store(true);
  }
  void OnDone() override {
    AfterAllReactions(this);
    tracker_->CallDone();
    delete this;
  }

  std::shared_ptr<std::atomic<bool>> cancelled() const { return cancelled_; }
  absl::Time start() const { return start_; }

  Request request;
  Response response;

 private:
  void Answer(absl::Status status, const std::string& label) {
    if (status.ok()) status = SerializeMessage(response, tracker_->max_response_bytes(), out_);
    if (metrics_ != nullptr) {
      metrics_->RecordRequest(label, rpc_, CodeName(status.code()), absl::ToDoubleSeconds(absl::Now() - start_));
    }
    Finish(ToGrpcStatus(status));
  }

  CallTracker* tracker_;
  ServerMetrics* metrics_;
  const char* rpc_;
  grpc::ByteBuffer* out_;
  absl::Time start_;
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_UNARY_CALL_H_
