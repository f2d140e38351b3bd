// Batches side by side on one engine, as a model's workers run them (--workers-per-device): in
// float32 and int8 (its quantized products and its bfloat16 attention products in oneDNN), each
// batch's answer is the one it gets alone, bit for bit. bfloat16 is not run here: it passes this
// check, yet a server with two bfloat16 workers died of a segmentation fault under 8 callers, so
// bfloat16 keeps one worker (server/batching/worker_count.h).
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/model/kernels/amx_gemm.h"
#include "server/model/layers/int8_linear.h"
#include "tests/model/reference_fixture.h"

namespace relserve {
namespace {

// Batches of mixed sizes and lengths (up to 300 tokens: past DeBERTa's and T5's exact-distance
// windows), random ids below `vocab`.
std::vector<std::vector<SequenceInput>> MixedBatches(int vocab) {
  std::mt19937 rng(7);
  std::vector<std::vector<SequenceInput>> out;
  const int shapes[][2] = {{1, 128}, {4, 64}, {2, 300}, {8, 32}, {3, 200}, {1, 17}, {6, 100}, {2, 250}};
  for (const auto& shape : shapes) {
    std::vector<SequenceInput> batch(shape[0]);
    for (SequenceInput& s : batch) {
      const int length = shape[1] - static_cast<int>(rng() % 5);  // padding inside the batch
      for (int t = 0; t < length; ++t) s.input_ids.push_back(static_cast<int32_t>(5 + rng() % (vocab - 5)));
    }
    out.push_back(std::move(batch));
  }
  return out;
}

struct Case {
  const char* model;
  const char* dtype;
};

class ConcurrentBatchesTest : public ::testing::TestWithParam<Case> {};

TEST_P(ConcurrentBatchesTest, SideBySideGiveTheAnswersOfOneAtATime) {
  const Case c = GetParam();
  EngineOptions options;
  options.dtype = ParseDType(c.dtype).value();
  // bfloat16 runs side by side only on relserve's AMX GEMM (worker_count.h).
  if (options.dtype == DType::kBFloat16 && !PackedBFloat16Weights::Supported()) {
    GTEST_SKIP() << "neither AMX-BF16 nor AVX512-BF16 on this CPU: bfloat16 runs one batch at a time";
  }
  auto engine = Engine::Load(testing::ReferenceDir(c.model), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto batches = MixedBatches(1000);
  SetComputeThreads(1);  // each worker is single-threaded here, as with --threads-per-worker 1
  std::vector<std::vector<SequenceOutput>> alone;
  for (const auto& batch : batches) {
    auto r = (*engine)->Run(batch, kOutputPooled | kOutputTokenStates);
    ASSERT_TRUE(r.ok()) << r.status();
    alone.push_back(std::move(*r));
  }
  constexpr int kWorkers = 3, kRounds = 8;
  std::atomic<int> failed{0}, differed{0};
  auto worker = [&](int w) {
    SetComputeThreads(1);  // LibTorch's thread count is the calling thread's own
    for (int i = 0; i < kRounds; ++i) {
      const size_t b = static_cast<size_t>(i * kWorkers + w) % batches.size();
      auto r = (*engine)->Run(batches[b], kOutputPooled | kOutputTokenStates);
      if (!r.ok()) {
        ++failed;
        continue;
      }
      for (size_t s = 0; s < r->size(); ++s) {
        if ((*r)[s].pooled != alone[b][s].pooled || (*r)[s].token_states != alone[b][s].token_states) ++differed;
      }
    }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back(worker, w);
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(differed.load(), 0) << "sequences whose answer changed when batches ran side by side";
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, ConcurrentBatchesTest,
    ::testing::Values(Case{"deberta_v3_like", "float32"}, Case{"xlnet_like", "float32"}, Case{"deberta_v3_like", "int8"},
                      Case{"t5_v1_0", "int8"}, Case{"xlnet_like", "int8"}, Case{"bert_relative_key", "int8"}, Case{"mpnet_like", "int8"},
                      Case{"deberta_v3_like", "bfloat16"}, Case{"t5_v1_0", "bfloat16"}, Case{"xlnet_like", "bfloat16"},
                      Case{"bert_relative_key", "bfloat16"}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.model) + "_" + info.param.dtype;
    });

// A text's answer does not depend on what the engine ran before it: a short batch on a fresh engine,
// then after longer ones (which grow whatever a model keeps per length), bit for bit. (XLNet's
// position keys, grown with the batches' lengths, once changed the last bits of shorter texts.)
class HistoryTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HistoryTest, AnswersDoNotDependOnTheBatchesBefore) {
  auto engine = Engine::Load(testing::ReferenceDir(GetParam()), EngineOptions{});
  ASSERT_TRUE(engine.ok()) << engine.status();
  const auto batches = MixedBatches(1000);
  const std::vector<SequenceInput>& first = batches[0];  // 1 x 128
  auto before = (*engine)->Run(first, kOutputPooled | kOutputTokenStates);
  ASSERT_TRUE(before.ok()) << before.status();
  for (size_t b : {2, 4, 7}) ASSERT_TRUE((*engine)->Run(batches[b], kOutputPooled).ok());  // 300, 200, 250 tokens
  auto after = (*engine)->Run(first, kOutputPooled | kOutputTokenStates);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)[0].token_states, (*before)[0].token_states);
  EXPECT_EQ((*after)[0].pooled, (*before)[0].pooled);
}

INSTANTIATE_TEST_SUITE_P(Families, HistoryTest,
                         ::testing::Values("deberta_v3_like", "t5_v1_0", "xlnet_like", "bert_relative_key", "mpnet_like",
                                           "bert_absolute"));

}  // namespace
}  // namespace relserve
