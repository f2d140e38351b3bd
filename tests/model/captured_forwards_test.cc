// Forwards replayed from device graphs (captured_forwards.h), with graphs standing in on the CPU
// (device_graph.h's testing switch): the graph path against the eager one on every reference
// model (padded positions kept in the batch, batches rounded up to a graph's batch), and the
// bookkeeping around graphs with a model that records what it is given.
#include "server/model/captured_forwards.h"

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/model/runtime/device_graph.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using testing::ReadReferenceInputs;
using testing::ReferenceDir;

// last_hidden_state[b][t] = {id, mask, number of this forward}; throws while `fail` is set.
class RecordingModel : public EncoderModel {
 public:
  EncoderOutputs Forward(const EncoderInputs& in, bool) const override {
    if (fail || (fail_from >= 0 && forwards >= fail_from)) {
      throw std::runtime_error("operation not permitted when stream is capturing");
    }
    ++forwards;
    EncoderOutputs out;
    at::Tensor n = at::full_like(in.input_ids, static_cast<double>(forwards.load()), at::kFloat);
    out.last_hidden_state = at::stack({in.input_ids.to(at::kFloat), in.attention_mask.to(at::kFloat), n}, 2);
    EXPECT_FALSE(in.pack_rows);
    return out;
  }
  std::vector<Linear*> EncoderLinears() override { return {}; }
  mutable std::atomic<int> forwards{0};
  std::atomic<bool> fail{false};
  std::atomic<int> fail_from{-1};  // >= 0: forwards from this many on throw
};

// Graphs stood in for on the CPU (DeviceGraph's cpu_stand_in), the attention as it serves.
constexpr bool kOnCpu = true;

class CapturedForwardsTest : public ::testing::Test {
 protected:
  c10::InferenceMode guard_;
};

// Graph batches are the sizes the engine rounds GPU batches to (1, 2, 3, 4, 6, 8, 12, ...), so
// that a rounded batch fills its graph: no rows are computed for nothing.
TEST_F(CapturedForwardsTest, GraphBatchesAreDeviceBatchSizesWithinTheTokenBudget) {
  RecordingModel model;
  CapturedForwards graphs(model, c10::Device(c10::kCPU), 512, 0, {}, kOnCpu);
  EXPECT_EQ(graphs.GraphBatch(1, 128), 1);
  EXPECT_EQ(graphs.GraphBatch(3, 128), 3);
  EXPECT_EQ(graphs.GraphBatch(4, 128), 4);
  EXPECT_EQ(graphs.GraphBatch(5, 128), 0);  // 6 x 128 > 512
  EXPECT_EQ(graphs.GraphBatch(5, 64), 6);
  EXPECT_EQ(graphs.GraphBatch(7, 64), 8);
  EXPECT_EQ(graphs.GraphBatch(9, 64), 0);  // 12 x 64 > 512
  EXPECT_EQ(graphs.GraphBatch(1, 513), 0);
  EXPECT_EQ(graphs.GraphBatch(0, 16), 0);
  EXPECT_FALSE(graphs.Captured(128));
  ASSERT_TRUE(graphs.CaptureLength(128).ok());
  EXPECT_TRUE(graphs.Captured(128));
  EXPECT_FALSE(graphs.Captured(64));
  EXPECT_EQ(graphs.graphs(), 4);  // 1, 2, 3 and 4 sequences
  const int forwards = model.forwards;
  ASSERT_TRUE(graphs.CaptureLength(128).ok());  // once per length
  EXPECT_EQ(model.forwards, forwards);
}

// A replay reads the batch it is given: rows [0, B) are its inputs and outputs; the rows past
// B keep what an earlier batch left there.
TEST_F(CapturedForwardsTest, ReplaysReadTheirOwnBatch) {
  RecordingModel model;
  CapturedForwards graphs(model, c10::Device(c10::kCPU), 64, /*pad_id=*/5, {}, kOnCpu);
  ASSERT_TRUE(graphs.CaptureLength(8).ok());
  at::Tensor ids = at::arange(24, at::kLong).view({3, 8}) + 100;
  at::Tensor mask = at::ones({3, 8}, at::kLong);
  mask[2].narrow(0, 4, 4).zero_();
  {
    std::optional<CapturedForwards::Replayed> replayed = graphs.Run(ids, mask);
    ASSERT_TRUE(replayed.has_value());
    CapturedForwards::Replayed& r = *replayed;
    ASSERT_TRUE(r.lock.owns_lock());
    ASSERT_EQ(r.out.last_hidden_state.sizes(), (std::vector<int64_t>{3, 8, 3}));
    EXPECT_TRUE(at::equal(r.out.last_hidden_state.select(2, 0), ids.to(at::kFloat)));
    EXPECT_TRUE(at::equal(r.attention_mask, mask));
  }
  at::Tensor one = at::full({1, 8}, 7, at::kLong);
  {
    std::optional<CapturedForwards::Replayed> r = graphs.Run(one, at::ones({1, 8}, at::kLong));
    ASSERT_TRUE(r.has_value());
    EXPECT_TRUE(at::equal(r->out.last_hidden_state.select(2, 0), one.to(at::kFloat)));
  }
  EXPECT_EQ(graphs.replays(), 2);
  // No graph of that length: nothing runs.
  EXPECT_FALSE(graphs.Run(at::zeros({1, 4}, at::kLong), at::ones({1, 4}, at::kLong)).has_value());
  EXPECT_EQ(graphs.replays(), 2);
}

// A capture that fails turns graphs off for the model copy, naming the shape.
TEST_F(CapturedForwardsTest, AFailedCaptureTurnsGraphsOff) {
  RecordingModel model;
  CapturedForwards graphs(model, c10::Device(c10::kCPU), 64, 0, {}, kOnCpu);
  ASSERT_TRUE(graphs.CaptureLength(16).ok());
  model.fail = true;
  absl::Status status = graphs.CaptureLength(32);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("1 x 32 tokens"), std::string::npos) << status;
  EXPECT_NE(status.message().find("operation not permitted"), std::string::npos) << status;
  EXPECT_EQ(graphs.GraphBatch(1, 16), 0);
  EXPECT_FALSE(graphs.Captured(16));
  EXPECT_EQ(graphs.graphs(), 0);
  EXPECT_FALSE(graphs.Run(at::zeros({1, 16}, at::kLong), at::ones({1, 16}, at::kLong)).has_value());
}

// The eager forward before a capture succeeds and the capture itself fails (as work that is not
// allowed while a stream captures would): graphs go off all the same, naming the shape, and
// what was captured before is dropped.
TEST_F(CapturedForwardsTest, AFailureInTheCaptureItselfTurnsGraphsOff) {
  RecordingModel model;
  CapturedForwards graphs(model, c10::Device(c10::kCPU), 64, 0, {}, kOnCpu);
  ASSERT_TRUE(graphs.CaptureLength(16).ok());
  EXPECT_EQ(graphs.graphs(), 4);  // 1, 2, 3 and 4 sequences
  const int before = model.forwards;
  model.fail_from = before + 1;  // the eager forward of 1 x 32 runs; its capture throws
  absl::Status status = graphs.CaptureLength(32);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(model.forwards, before + 1);  // the eager forward ran, so it was the capture that failed
  EXPECT_NE(status.message().find("1 x 32 tokens"), std::string::npos) << status;
  EXPECT_NE(status.message().find("operation not permitted"), std::string::npos) << status;
  EXPECT_EQ(graphs.graphs(), 0);
  EXPECT_EQ(graphs.GraphBatch(1, 16), 0);
  EXPECT_FALSE(graphs.Captured(16));
  EXPECT_FALSE(graphs.Run(at::zeros({1, 16}, at::kLong), at::ones({1, 16}, at::kLong)).has_value());
}

TEST(DeviceGraphTest, OnTheCpuOnlyAsAStandIn) {
  int runs = 0;
  auto refused = DeviceGraph::Capture(c10::Device(c10::kCPU), [&] { ++runs; }, nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runs, 0);
  auto graph = DeviceGraph::Capture(c10::Device(c10::kCPU), [&] { ++runs; }, nullptr, /*cpu_stand_in=*/true);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(runs, 1);
  (*graph)->Replay();
  (*graph)->Replay();
  EXPECT_EQ(runs, 3);
}

// Engines whose CUDA graphs are stood in for on the CPU (EngineKernels::device_graphs_on_cpu).
EngineOptions GraphsOnCpu() {
  EngineOptions options;
  options.kernels.device_graphs_on_cpu = true;
  return options;
}

class CapturedEngineTest : public ::testing::TestWithParam<std::string> {};

// Every family through the graph path: the same outputs as the eager engine, for the whole
// batch (captured by its first run, replayed by the second) and for a smaller batch of the
// same length (its own graph; a batch inside a larger graph: ASmallerBatchInALargerGraph...).
TEST_P(CapturedEngineTest, ReplaysMatchTheEagerEngine) {
  const std::string dir = ReferenceDir(GetParam());
  auto eager = Engine::Load(dir, EngineOptions{});
  ASSERT_TRUE(eager.ok()) << eager.status();
  auto captured = Engine::Load(dir, GraphsOnCpu());
  ASSERT_TRUE(captured.ok()) << captured.status();
  const uint32_t outputs = kOutputTokenStates | kOutputPooled |
                           ((*eager)->info().labels.empty() ? 0u : static_cast<uint32_t>(kOutputLogits));
  PaddedBatch padded = ReadReferenceInputs(dir + "/inputs.json");
  std::vector<SequenceInput> seqs(padded.batch);
  for (int64_t r = 0; r < padded.batch; ++r) {
    for (int64_t t = 0; t < padded.length; ++t) {
      if (padded.attention_mask[r * padded.length + t]) {
        seqs[r].input_ids.push_back(static_cast<int32_t>(padded.input_ids[r * padded.length + t]));
      }
    }
  }
  // The smaller batch keeps the longest sequence, so that it runs at the same length.
  size_t longest = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i].input_ids.size() > seqs[longest].input_ids.size()) longest = i;
  }
  std::vector<SequenceInput> fewer{seqs[longest], seqs[(longest + 1) % seqs.size()]};
  for (const std::vector<SequenceInput>* batch : {&seqs, &seqs, &fewer}) {
    auto want = (*eager)->Run(*batch, outputs);
    auto got = (*captured)->Run(*batch, outputs);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    for (size_t i = 0; i < batch->size(); ++i) {
      EXPECT_EQ((*got)[i].num_tokens, (*want)[i].num_tokens);
      EXPECT_LE(MaxAbsDiff((*got)[i].token_states, (*want)[i].token_states), 1e-5) << "sequence " << i;
      EXPECT_LE(MaxAbsDiff((*got)[i].pooled, (*want)[i].pooled), 1e-5) << "sequence " << i;
      EXPECT_LE(MaxAbsDiff((*got)[i].logits, (*want)[i].logits), 1e-5) << "sequence " << i;
    }
  }
  EXPECT_GT((*captured)->captured_graphs(), 0);
  EXPECT_EQ((*captured)->graph_replays(), 2);  // the first run captured, the next two replayed
  EXPECT_EQ((*eager)->captured_graphs(), 0);
  // With graphs off by option, nothing is captured.
  EngineOptions off = GraphsOnCpu();
  off.cuda_graph_tokens = 0;
  auto eager_again = Engine::Load(dir, off);
  ASSERT_TRUE(eager_again.ok());
  ASSERT_TRUE((*eager_again)->Run(seqs, outputs).ok());
  EXPECT_EQ((*eager_again)->captured_graphs(), 0);
}

std::vector<SequenceInput> Sequences(int n, int length, int salt) {
  std::vector<SequenceInput> batch(n);
  for (int i = 0; i < n; ++i) {
    for (int t = 0; t < length - i; ++t) batch[i].input_ids.push_back(5 + (7 * t + 11 * i + 13 * salt) % 90);
  }
  return batch;
}

// At engine level, a batch of five replayed in the graph of six, whose last row still holds
// the batch before (the CPU does not round batch sizes as a GPU does, so five stays five): every output is the eager engine's (nothing of the stale row leaks into the
// pooled vectors, the logits or the token states), and the stale row's input is not read back.
TEST_F(CapturedEngineTest, ASmallerBatchInALargerGraphReadsOnlyItsRows) {
  const std::string dir = ReferenceDir("deberta_v3_cls");
  auto eager = Engine::Load(dir, EngineOptions{});
  ASSERT_TRUE(eager.ok()) << eager.status();
  EngineOptions options = GraphsOnCpu();
  options.cuda_graph_tokens = 256;  // graphs of 1, 2, 3, 4, 6, 8 and 12 sequences of 20 tokens
  auto captured = Engine::Load(dir, options);
  ASSERT_TRUE(captured.ok()) << captured.status();
  const uint32_t outputs = kOutputTokenStates | kOutputPooled | kOutputLogits;
  const std::vector<SequenceInput> six = Sequences(6, 20, 1), five = Sequences(5, 20, 2);
  ASSERT_TRUE((*captured)->Run(six, outputs).ok());  // captures every graph of length 20
  ASSERT_TRUE((*captured)->Run(six, outputs).ok());  // fills the graph of six
  EXPECT_EQ((*captured)->graph_replays(), 1);
  auto got = (*captured)->Run(five, outputs);
  auto want = (*eager)->Run(five, outputs);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ((*captured)->graph_replays(), 2);  // the five ran in the graph of six
  ASSERT_EQ(got->size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*got)[i].num_tokens, (*want)[i].num_tokens);
    EXPECT_LE(MaxAbsDiff((*got)[i].token_states, (*want)[i].token_states), 1e-5) << "sequence " << i;
    EXPECT_LE(MaxAbsDiff((*got)[i].pooled, (*want)[i].pooled), 1e-5) << "sequence " << i;
    EXPECT_LE(MaxAbsDiff((*got)[i].logits, (*want)[i].logits), 1e-5) << "sequence " << i;
  }
  // The batch of six's last row differs from anything in the five: had it leaked (a row read
  // past the batch, a pooled mean over the graph's rows), the answers above would differ.
  auto last = (*eager)->Run({six[5]}, kOutputPooled);
  ASSERT_TRUE(last.ok());
  for (size_t i = 0; i < 5; ++i) EXPECT_GT(MaxAbsDiff((*got)[i].pooled, (*last)[0].pooled), 1e-3);
}

// On the graph path too, each stage holds its own work: the replay (the whole encoder) is the
// forward stage, longer than preparing the inputs or reading the results; a replay runs no eager
// attention call (the captured graph's kernels run instead).
TEST_F(CapturedEngineTest, StageTimesHoldTheirWorkOnTheGraphPath) {
  EngineOptions options = GraphsOnCpu();
  options.cuda_graph_tokens = 4096;
  auto engine = Engine::Load(ReferenceDir("deberta_v3_cls"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const std::vector<SequenceInput> batch = Sequences(8, 256, 3);
  ASSERT_TRUE((*engine)->Run(batch, kOutputPooled).ok());  // captured
  const Engine::AttentionCounts before = (*engine)->attention_counts();
  RunTimings t;
  ASSERT_TRUE((*engine)->RunTimed(batch, kOutputPooled, &t).ok());
  EXPECT_EQ((*engine)->graph_replays(), 1);
  const Engine::AttentionCounts after = (*engine)->attention_counts();
  EXPECT_EQ(after.cpu + after.bias + after.tables, before.cpu + before.bias + before.tables);
  EXPECT_GT(t.forward, t.prepare);
  EXPECT_GT(t.forward, t.results);
}

// Threads at once, some batches through graphs (one at a time) and some eagerly beside them:
// every answer equals the one computed alone.
TEST_F(CapturedEngineTest, ConcurrentReplaysAndEagerBatchesAgree) {
  EngineOptions options = GraphsOnCpu();
  options.cuda_graph_tokens = 48;  // one or two short sequences go through graphs, the rest eagerly
  auto engine = Engine::Load(ReferenceDir("deberta_v3_cls"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::vector<SequenceInput>> batches;
  for (int n : {1, 2, 3, 1}) {
    std::vector<SequenceInput> batch(n);
    for (int i = 0; i < n; ++i) {
      for (int t = 0; t < 20; ++t) batch[i].input_ids.push_back(5 + (7 * t + 11 * i + n) % 90);
    }
    batches.push_back(batch);
  }
  std::vector<std::vector<SequenceOutput>> expected;
  for (const auto& batch : batches) {
    auto r = (*engine)->Run(batch, kOutputPooled | kOutputLogits);
    ASSERT_TRUE(r.ok()) << r.status();
    expected.push_back(*r);
  }
  std::vector<double> worst(batches.size(), 0);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < batches.size(); ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 10; ++round) {
        auto r = (*engine)->Run(batches[w], kOutputPooled | kOutputLogits);
        if (!r.ok()) {
          worst[w] = INFINITY;
          return;
        }
        for (size_t i = 0; i < r->size(); ++i) {
          worst[w] = std::max(worst[w], MaxAbsDiff((*r)[i].pooled, expected[w][i].pooled));
          worst[w] = std::max(worst[w], MaxAbsDiff((*r)[i].logits, expected[w][i].logits));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t w = 0; w < batches.size(); ++w) EXPECT_LE(worst[w], 1e-5) << "batch " << w;
  EXPECT_GE((*engine)->graph_replays(), 30);  // the three batches of one or two sequences
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, CapturedEngineTest,
                         ::testing::Values("deberta_v3_like", "deberta_v3_cls", "t5_v1_0", "bert_absolute",
                                           "bert_relative_key", "mpnet_like", "xlnet_like"));

}  // namespace
}  // namespace relserve
