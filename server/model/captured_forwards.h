#ifndef RELSERVE_SERVER_MODEL_CAPTURED_FORWARDS_H_
#define RELSERVE_SERVER_MODEL_CAPTURED_FORWARDS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "server/model/layers/encoder_model.h"
#include "server/model/runtime/device_graph.h"

namespace relserve {

// The encoder's forward for small batches on a GPU, replayed from CUDA graphs (device_graph.h):
// one launch instead of one per kernel, for batches whose forward is bound by launching them.
// A graph per (graph batch, length): graph batches are the device batch sizes (1, 2, 3, 4, 6, 8,
// 12, ...: DeviceBatchSize in device_shapes.h, as the engine rounds GPU batches) whose graph batch
// × length is at most max_tokens, and a batch of B sequences runs in the graph of B rounded up
// (the rows past B hold earlier inputs, whose outputs are not read; a batch the engine rounded
// fills its graph). Graphs are captured per
// length, the first time a batch of that length could use one (the warm-up runs every length a
// GPU batch can have), after an eager forward of each shape, and share one memory pool: replays
// run one at a time, each holding the lock until its outputs are read.
//
// Inside a graph the padded positions stay in the batch (EncoderInputs::pack_rows false), so
// shapes do not depend on the data. Token types are not captured: batches with them run eagerly.
class CapturedForwards {
 public:
  // `attention`: how every captured forward's attention runs (EngineOptions::gpu_attention and
  // ::kernels); `cpu_stand_in`: graphs on the CPU are their work, run again (device_graph.h;
  // EngineKernels::device_graphs_on_cpu).
  CapturedForwards(const EncoderModel& model, const c10::Device& device, int64_t max_tokens, int64_t pad_id,
                   const AttentionKernels& attention = {}, bool cpu_stand_in = false);
  ~CapturedForwards();

  // The graph batch of B sequences at length L, or 0 when no graph is meant for that shape (or
  // graphs were turned off by a failed capture).
  int64_t GraphBatch(int64_t batch, int64_t length) const;
  // Whether the graphs of `length` are captured.
  bool Captured(int64_t length) const;
  // Captures every graph of `length`. A failure turns graphs off for good (what was captured
  // is dropped) and is returned, naming the shape.
  absl::Status CaptureLength(int64_t length);

  // One replay's outputs (rows [0, B) of the graph's), readable while `lock` is held (the engine
  // lets it go once it has copied them to the host, before it builds the replies).
  struct Replayed {
    std::unique_lock<std::mutex> lock;
    EncoderOutputs out;
    at::Tensor attention_mask;  // the batch's mask, on the device
  };
  // Copies ids and mask ([B, L] int64 on the host, page-locked for a GPU) into the graph of
  // (GraphBatch(B, L), L) and replays it; nothing when that graph is not there (never captured,
  // or dropped by a failed capture).
  std::optional<Replayed> Run(const at::Tensor& input_ids, const at::Tensor& attention_mask);

  int64_t graphs() const;    // captured so far
  int64_t replays() const;   // batches run through a graph so far

 private:
  struct Graph;
  const EncoderModel& model_;
  const c10::Device device_;
  const int64_t max_tokens_;
  const int64_t pad_id_;
  const AttentionKernels attention_;
  const bool cpu_stand_in_;
  // Held by a capture, and by each replay until its outputs are read (the graphs share one
  // memory pool). Taken before state_mu_.
  std::mutex replay_mu_;
  // Guards the fields below, held briefly: a batch that runs eagerly asks GraphBatch and
  // Captured without waiting for a replay.
  mutable std::mutex state_mu_;
  bool enabled_ = true;
  std::set<int64_t> captured_lengths_;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Graph>> graphs_;  // (graph batch, length)
  DeviceGraph* pool_owner_ = nullptr;  // the first graph: every other shares its memory pool
  int64_t replays_ = 0;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CAPTURED_FORWARDS_H_
