#ifndef RELSERVE_SERVER_TOOLS_LOCAL_SERVING_H_
#define RELSERVE_SERVER_TOOLS_LOCAL_SERVING_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/batching/model_batcher.h"
#include "server/model/engine.h"
#include "server/serving/encoder_serving.h"
#include "server/serving/model_registry.h"

namespace relserve {

// One engine behind the server's own serving layer and batcher, in process: relserve-model's
// commands that do what a server request does (zero-shot classification, long inputs,
// sparse and multi-vector outputs) go through exactly the server's code.
class LocalServing {
 public:
  // `batch_size` sequences per batch at most; one worker using `threads` compute threads.
  static absl::StatusOr<std::unique_ptr<LocalServing>> Create(LoadedModel model, int batch_size,
                                                              int threads, ServingLimits limits);
  ~LocalServing();

  const EncoderServing& serving() const { return *serving_; }
  const Engine& engine() const { return *engine_; }
  static constexpr char kModelName[] = "model";

 private:
  LocalServing() = default;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ModelBatcher> batcher_;
  ModelRegistry registry_;
  std::unique_ptr<EncoderServing> serving_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_LOCAL_SERVING_H_
