#include "server/serving/sequence_submitter.h"

#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "server/batching/sequence_task.h"

namespace relserve {
namespace {

// Shared by the tasks of one request; the last task to finish completes the request.
struct PendingRequest {
  std::mutex mu;
  RequestResults results;
  absl::Status first_error;
  std::atomic<size_t> remaining{0};
  std::function<void(absl::StatusOr<RequestResults>)> done;
};

}  // namespace

bool AllFinite(const SequenceOutput& out) {
  for (const std::vector<float>* v :
       {&out.token_states, &out.pooled, &out.logits, &out.pooled_unnormalized, &out.multi_vector, &out.token_logits}) {
    for (float x : *v) {
      if (!std::isfinite(x)) return false;
    }
  }
  for (const auto& [id, weight] : out.sparse) {
    if (!std::isfinite(weight)) return false;
  }
  return true;
}

void SubmitSequences(const ServedModel& model, std::vector<SequenceInput> sequences, uint32_t outputs,
                     absl::Time deadline, std::shared_ptr<const std::atomic<bool>> cancelled,
                     ServerMetrics* metrics, std::function<void(absl::StatusOr<RequestResults>)> done) {
  auto pending = std::make_shared<PendingRequest>();
  pending->results.outputs.resize(sequences.size());
  pending->remaining = sequences.size();
  pending->done = std::move(done);
  std::vector<SequenceTask> tasks;
  tasks.reserve(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i) {
    SequenceTask task;
    task.input = std::move(sequences[i]);
    task.outputs = outputs;
    task.deadline = deadline;
    task.cancelled = cancelled;
    task.done = [pending, i, metrics, name = model.name](absl::StatusOr<SequenceOutput> out,
                                                         const TaskTiming& timing) {
      if (out.ok() && !AllFinite(*out)) {
        if (metrics != nullptr) metrics->RecordNonFiniteOutput(name);
        out = absl::InternalError(absl::StrCat("model ", name, " produced non-finite values (NaN or infinity) for ",
                                               "sequence ", i, " of the request; its weights or its dtype cannot ",
                                               "represent this input"));
      }
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        if (out.ok()) {
          pending->results.outputs[i] = std::move(*out);
        } else if (pending->first_error.ok()) {
          pending->first_error = out.status();
        }
        pending->results.max_queue = std::max(pending->results.max_queue, timing.queue);
        pending->results.max_inference = std::max(pending->results.max_inference, timing.inference);
      }
      if (pending->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // Every task has written its slot under the mutex; the last one completes.
        if (!pending->first_error.ok()) {
          pending->done(pending->first_error);
        } else {
          pending->done(std::move(pending->results));
        }
      }
    };
    tasks.push_back(std::move(task));
  }
  absl::Status submitted = model.batcher->Submit(std::move(tasks));
  if (!submitted.ok()) pending->done(submitted);  // nothing was accepted: no task callback will run
}

}  // namespace relserve
