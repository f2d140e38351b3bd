#include "server/model/captured_forwards.h"

#include <limits>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "server/backend/device_shapes.h"

namespace relserve {
namespace {

// The graph that holds a batch of this many sequences: its size rounded up to a device batch
// size (device_shapes.h: 1, 2, 3, 4, 6, 8, 12, ...), as the engine rounds GPU batches, so that a
// rounded batch fills its graph and wastes no rows.
int64_t RoundedBatch(int64_t batch) {
  return DeviceBatchSize(static_cast<int>(batch), std::numeric_limits<int>::max());
}

}  // namespace

struct CapturedForwards::Graph {
  at::Tensor input_ids, attention_mask;       // the graph's inputs, [graph batch, L] on the device
  std::shared_ptr<EncoderOutputs> outputs;    // written by the capture, rewritten by each replay
  std::unique_ptr<DeviceGraph> graph;
};

CapturedForwards::CapturedForwards(const EncoderModel& model, const c10::Device& device, int64_t max_tokens,
                                   int64_t pad_id, const AttentionKernels& attention, bool cpu_stand_in)
    : model_(model),
      device_(device),
      max_tokens_(max_tokens),
      pad_id_(pad_id),
      attention_(attention),
      cpu_stand_in_(cpu_stand_in) {}

CapturedForwards::~CapturedForwards() = default;

int64_t CapturedForwards::GraphBatch(int64_t batch, int64_t length) const {
  if (batch <= 0 || length <= 0) return 0;
  const int64_t graph_batch = RoundedBatch(batch);
  if (graph_batch * length > max_tokens_) return 0;
  std::lock_guard<std::mutex> lock(state_mu_);
  return enabled_ ? graph_batch : 0;
}

bool CapturedForwards::Captured(int64_t length) const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return enabled_ && captured_lengths_.count(length) > 0;
}

absl::Status CapturedForwards::CaptureLength(int64_t length) {
  std::lock_guard<std::mutex> replay_lock(replay_mu_);
  DeviceGraph* pool_owner = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    if (!enabled_ || captured_lengths_.count(length) > 0) return absl::OkStatus();
    pool_owner = pool_owner_;
  }
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Graph>> captured;
  for (int64_t graph_batch = 1; graph_batch * length <= max_tokens_; graph_batch = RoundedBatch(graph_batch + 1)) {
    auto g = std::make_unique<Graph>();
    const auto options = at::TensorOptions().dtype(at::kLong).device(device_);
    g->input_ids = at::full({graph_batch, length}, pad_id_, options);
    // Until a batch fills them, rows hold one real token each (a row without any would be a
    // softmax over nothing).
    g->attention_mask = at::zeros({graph_batch, length}, options);
    g->attention_mask.select(1, 0).fill_(1);
    EncoderInputs in;
    in.input_ids = g->input_ids;
    in.attention_mask = g->attention_mask;
    in.has_padding = true;
    in.pack_rows = false;
    in.attention = attention_;
    g->outputs = std::make_shared<EncoderOutputs>();
    absl::StatusOr<std::unique_ptr<DeviceGraph>> graph;
    try {
      // Eagerly first: what initialises lazily (library handles, kernel choices, per-length
      // caches) must not happen inside a capture.
      model_.Forward(in, /*all_hidden_states=*/false);
      const EncoderModel& model = model_;
      std::shared_ptr<EncoderOutputs> outputs = g->outputs;
      graph = DeviceGraph::Capture(
          device_, [&model, in, outputs] { *outputs = model.Forward(in, /*all_hidden_states=*/false); }, pool_owner,
          cpu_stand_in_);
    } catch (const std::exception& e) {
      graph = absl::InternalError(e.what());
    }
    if (!graph.ok()) {
      std::lock_guard<std::mutex> lock(state_mu_);
      enabled_ = false;
      graphs_.clear();  // no replay runs: this thread holds replay_mu_
      pool_owner_ = nullptr;
      captured_lengths_.clear();
      return absl::Status(graph.status().code(), absl::StrCat("capturing the forward of ", graph_batch, " x ", length,
                                                              " tokens: ", graph.status().message(),
                                                              "; graphs are off for this model copy"));
    }
    g->graph = std::move(*graph);
    if (pool_owner == nullptr) pool_owner = g->graph.get();
    captured[{graph_batch, length}] = std::move(g);
  }
  std::lock_guard<std::mutex> lock(state_mu_);
  if (pool_owner_ == nullptr) pool_owner_ = pool_owner;
  for (auto& [shape, g] : captured) graphs_[shape] = std::move(g);
  captured_lengths_.insert(length);
  return absl::OkStatus();
}

std::optional<CapturedForwards::Replayed> CapturedForwards::Run(const at::Tensor& input_ids,
                                                                const at::Tensor& attention_mask) {
  const int64_t B = input_ids.size(0), L = input_ids.size(1);
  const int64_t graph_batch = RoundedBatch(B);
  Replayed r;
  r.lock = std::unique_lock<std::mutex>(replay_mu_);
  Graph* found = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto it = graphs_.find({graph_batch, L});
    if (it == graphs_.end()) return std::nullopt;
    found = it->second.get();
    ++replays_;
  }
  Graph& g = *found;
  g.input_ids.narrow(0, 0, B).copy_(input_ids, /*non_blocking=*/true);
  g.attention_mask.narrow(0, 0, B).copy_(attention_mask, /*non_blocking=*/true);
  g.graph->Replay();
  const EncoderOutputs& out = *g.outputs;
  r.out.last_hidden_state = out.last_hidden_state.narrow(0, 0, B);
  if (out.logits.defined()) r.out.logits = out.logits.narrow(0, 0, B);
  r.attention_mask = g.attention_mask.narrow(0, 0, B);
  return r;
}

int64_t CapturedForwards::graphs() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return static_cast<int64_t>(graphs_.size());
}

int64_t CapturedForwards::replays() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return replays_;
}

}  // namespace relserve
