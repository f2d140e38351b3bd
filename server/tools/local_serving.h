#ifndef RELSERVE_SERVER_TOOLS_LOCAL_SERVING_H_
#define RELSERVE_SERVER_TOOLS_LOCAL_SERVING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/hosting/model_host.h"
#include "server/model/engine.h"
#include "server/serving/encoder_serving.h"

namespace relserve {

// One engine behind the server's own model host, batcher and serving layer, in process:
// relserve-model's commands that do what a server request does (zero-shot classification, long
// inputs, sparse and multi-vector outputs) go through exactly the server's code.
class LocalServing {
 public:
  // `batch_size` sequences per batch at most; one worker using `threads` compute threads on
  // `device` (where `model` was loaded); no warm-up.
  static absl::StatusOr<std::unique_ptr<LocalServing>> Create(LoadedModel model, const std::string& device,
                                                              int batch_size, int threads, ServingLimits limits);
  ~LocalServing();

  const EncoderServing& serving() const { return *serving_; }
  static constexpr char kModelName[] = "model";

 private:
  LocalServing() = default;
  std::unique_ptr<ModelHost> host_;
  std::unique_ptr<EncoderServing> serving_;
};

// The host options of LocalServing::Create: the server's, but one worker of `threads` threads on
// `device`, batches of at most `batch_size` sequences of any length up to the model's
// `max_length`, a 1 ms queue delay, no queue limit to speak of, no warm-up and no start-up log.
HostOptions LocalHostOptions(const std::string& device, int batch_size, int threads, int max_length);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_LOCAL_SERVING_H_
