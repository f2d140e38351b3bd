#include "server/rpc/embed_stream.h"

#include <atomic>
#include <memory>
#include <mutex>

#include "absl/time/clock.h"
#include "relserve/v1/encoder.pb.h"
#include "server/rpc/encoder_service.h"
#include "server/rpc/message_codec.h"
#include "server/rpc/reaction_order.h"
#include "server/rpc/status_mapping.h"

namespace relserve {
namespace {

class EmbedStreamReactor : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                           public DrainableStream {
 public:
  EmbedStreamReactor(EncoderService* service, CallTracker* tracker, ServerMetrics* metrics, absl::Time deadline,
                     const absl::Status& auth)
      : service_(service), tracker_(tracker), metrics_(metrics), deadline_(deadline) {
    tracker_->CallStarted();
    std::lock_guard<std::mutex> lock(mu_);
    if (!auth.ok()) {
      Record(auth, kUnknownModelLabel, absl::Now());
      FinishLocked(auth);
      return;
    }
    registered_ = tracker_->AddStream(this);
    if (!registered_) {
      FinishLocked(absl::UnavailableError("the server is shutting down"));
      return;
    }
    ReadLocked();
  }

  void OnReadDone(bool ok) override {
    ReactionScope reaction(this);
    std::unique_lock<std::mutex> lock(mu_);
    if (state_ == State::kFinished) return;  // ended by the drain while the read was out
    if (!ok) {  // the client half-closed (or went away): done once the last write is out
      FinishLocked(absl::OkStatus());
      return;
    }
    if (tracker_->draining()) {
      FinishLocked(absl::UnavailableError("the server is shutting down"));
      return;
    }
    const absl::Time start = absl::Now();
    request_.Clear();
    if (absl::Status s = ParseMessage(in_, &request_); !s.ok()) {
      Record(s, kUnknownModelLabel, start);
      FinishLocked(s);
      return;
    }
    state_ = State::kWorking;
    response_.Clear();
    lock.unlock();
    // The reply runs on a batcher thread, outside gRPC's reactions: once it has called Finish,
    // gRPC may run OnDone on another thread while the reply still holds mu_. Its own reference
    // keeps the reactor (and mu_) alive until it has let go.
    Ref();
    service_->HandleEmbed(deadline_, cancelled_, request_, &response_,
                          [this, start](const absl::Status& status, const std::string& model) {
                            {
                              std::lock_guard<std::mutex> lock(mu_);
                              ReplyLocked(status, model, start);
                            }
                            Unref();
                          });
  }

  void OnWriteDone(bool ok) override {
    ReactionScope reaction(this);
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      FinishLocked(absl::UnavailableError("the client stopped reading"));
    } else if (tracker_->draining()) {
      FinishLocked(absl::UnavailableError("the server is shutting down"));
    } else {
      ReadLocked();
    }
  }

  void EndIfIdle() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == State::kReading) FinishLocked(absl::UnavailableError("the server is shutting down"));
  }

  void OnCancel() override {
    ReactionScope reaction(this);
    cancelled_->store(true);
  }
  void OnDone() override {
    AfterAllReactions(this);
    if (registered_) tracker_->RemoveStream(this);
    tracker_->CallDone();
    Unref();
  }
  void Ref() override { refs_.fetch_add(1); }
  void Unref() override {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

 private:
  enum class State { kReading, kWorking, kWriting, kFinished };

  void ReplyLocked(const absl::Status& status, const std::string& model, absl::Time start) {
    absl::Status s = status;
    if (s.ok()) s = SerializeMessage(response_, tracker_->max_response_bytes(), &out_);
    Record(s, tracker_->MetricsModelLabel(model), start);
    if (!s.ok()) {
      FinishLocked(s);
      return;
    }
    state_ = State::kWriting;
    StartWrite(&out_);
  }
  void ReadLocked() {
    state_ = State::kReading;
    StartRead(&in_);
  }
  void FinishLocked(const absl::Status& status) {
    state_ = State::kFinished;
    Finish(ToGrpcStatus(status));
  }
  void Record(const absl::Status& status, const std::string& label, absl::Time start) {
    if (metrics_ == nullptr) return;
    metrics_->RecordRequest(label, "EmbedStream", CodeName(status.code()), absl::ToDoubleSeconds(absl::Now() - start));
  }

  EncoderService* service_;
  CallTracker* tracker_;
  ServerMetrics* metrics_;
  absl::Time deadline_;
  std::shared_ptr<std::atomic<bool>> cancelled_ = std::make_shared<std::atomic<bool>>(false);
  std::atomic<int> refs_{1};  // gRPC's (until OnDone), the drain's while it ends the stream, a reply's while it runs
  bool registered_ = false;
  std::mutex mu_;
  State state_ = State::kReading;  // guarded by mu_
  grpc::ByteBuffer in_;
  grpc::ByteBuffer out_;
  v1::EmbedRequest request_;
  v1::EmbedResponse response_;
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewEmbedStream(EncoderService* service,
                                                                            CallTracker* tracker,
                                                                            ServerMetrics* metrics,
                                                                            absl::Time deadline,
                                                                            const absl::Status& auth) {
  return new EmbedStreamReactor(service, tracker, metrics, deadline, auth);
}

}  // namespace relserve
