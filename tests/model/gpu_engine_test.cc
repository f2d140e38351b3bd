// The engine on a CUDA device against the same engine on the CPU, in float32 and in the
// half-precision types, with several workers' streams at once and past the device's memory.
// Every test but the device-name checks skips where no CUDA device is visible.
#include <cmath>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/runtime/device.h"
#include "server/model/engine.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::Cosine;

using testing::MaxAbsDiff;

using ::testing::HasSubstr;
using testing::ReadReferenceInputs;
using testing::ReferenceDir;

bool HaveGpu() { return CudaCompiledIn() && CudaDeviceCount() > 0; }

#define SKIP_WITHOUT_GPU()                                             \
  if (!HaveGpu()) {                                                    \
    GTEST_SKIP() << "no CUDA device (or a build without CUDA)";        \
  }

std::unique_ptr<Engine> Load(const std::string& name, const std::string& device, const std::string& dtype) {
  EngineOptions options;
  options.device = device;
  options.dtype = ParseDType(dtype).value();
  auto engine = Engine::Load(ReferenceDir(name), options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Sequences of many lengths (so batches are padded), ids drawn from the vocabulary.
std::vector<SequenceInput> MixedSequences(int vocab, int count, int max_len, int seed) {
  std::vector<SequenceInput> out(count);
  uint64_t x = 88172645463325252ull + seed;
  auto next = [&] { x ^= x << 13, x ^= x >> 7, x ^= x << 17; return x; };
  for (int i = 0; i < count; ++i) {
    const int n = 1 + static_cast<int>(next() % max_len);
    for (int t = 0; t < n; ++t) out[i].input_ids.push_back(3 + static_cast<int>(next() % (vocab - 3)));
  }
  return out;
}

uint32_t AllOutputs(const Engine& e) {
  return kOutputTokenStates | kOutputPooled | (e.info().labels.empty() ? 0u : static_cast<uint32_t>(kOutputLogits));
}

const char* const kModels[] = {"deberta_v3_like", "deberta_v3_cls", "t5_v1_0", "mpnet_like"};

TEST(GpuDeviceNameTest, PreciseErrors) {
  EngineOptions options;
  options.device = "gpu";
  auto bad = Engine::Load(ReferenceDir("deberta_v3_like"), options);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("cpu, cuda, cuda:N"));
  options.device = "cuda:99";
  auto absent = Engine::Load(ReferenceDir("deberta_v3_like"), options);
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(absent.status().message(), HasSubstr(CudaCompiledIn() ? "visible" : "no CUDA support"));
}

// Float32 on the GPU is the CPU's float32 (no TF32): every output within 1e-4 on batches with
// padding.
TEST(GpuEngineTest, Float32MatchesTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  for (const char* name : kModels) {
    auto cpu = Load(name, "cpu", "float32");
    auto gpu = Load(name, "cuda", "float32");
    ASSERT_TRUE(cpu && gpu);
    EXPECT_EQ(gpu->info().device, "cuda:0");
    const auto seqs = MixedSequences(cpu->info().vocab_size, 12, std::min(cpu->info().max_length, 200), 1);
    auto want = cpu->Run(seqs, AllOutputs(*cpu));
    auto got = gpu->Run(seqs, AllOutputs(*gpu));
    ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
    for (size_t i = 0; i < seqs.size(); ++i) {
      EXPECT_LE(MaxAbsDiff((*got)[i].token_states, (*want)[i].token_states), 1e-4) << name << " sequence " << i;
      EXPECT_LE(MaxAbsDiff((*got)[i].pooled, (*want)[i].pooled), 1e-4) << name << " sequence " << i;
      EXPECT_LE(MaxAbsDiff((*got)[i].logits, (*want)[i].logits), 1e-4) << name << " sequence " << i;
    }
  }
}

// bfloat16 and float16 against float32 on the GPU: pooled cosine >= 0.999; the largest logit
// difference is reported.
TEST(GpuEngineTest, HalfPrecisionCloseToFloat32) {
  SKIP_WITHOUT_GPU();
  for (const char* name : kModels) {
    auto full = Load(name, "cuda", "float32");
    ASSERT_TRUE(full);
    const auto seqs = MixedSequences(full->info().vocab_size, 16, std::min(full->info().max_length, 128), 2);
    auto want = full->Run(seqs, AllOutputs(*full));
    ASSERT_TRUE(want.ok()) << want.status();
    for (const char* dtype : {"bfloat16", "float16"}) {
      auto half = Load(name, "cuda", dtype);
      ASSERT_TRUE(half);
      auto got = half->Run(seqs, AllOutputs(*half));
      ASSERT_TRUE(got.ok()) << got.status();
      double worst_cosine = 1, worst_logit = 0;
      for (size_t i = 0; i < seqs.size(); ++i) {
        worst_cosine = std::min(worst_cosine, Cosine((*got)[i].pooled, (*want)[i].pooled));
        worst_logit = std::max(worst_logit, MaxAbsDiff((*got)[i].logits, (*want)[i].logits));
      }
      EXPECT_GE(worst_cosine, 0.999) << name << " " << dtype;
      std::printf("[ gpu ] %s %s: min pooled cosine %.6f, max |logit diff| %.5f\n", name, dtype, worst_cosine,
                  worst_logit);
      RecordProperty(std::string(name) + "_" + dtype + "_min_cosine", std::to_string(worst_cosine));
      RecordProperty(std::string(name) + "_" + dtype + "_max_logit_diff", std::to_string(worst_logit));
    }
  }
}

// A sequence's outputs do not depend on the batch it is in, on the GPU either.
TEST(GpuEngineTest, PaddingInvariance) {
  SKIP_WITHOUT_GPU();
  for (const char* name : kModels) {
    for (const char* dtype : {"float32", "bfloat16"}) {
      auto gpu = Load(name, "cuda", dtype);
      ASSERT_TRUE(gpu);
      const auto seqs = MixedSequences(gpu->info().vocab_size, 9, std::min(gpu->info().max_length, 100), 3);
      auto together = gpu->Run(seqs, AllOutputs(*gpu));
      ASSERT_TRUE(together.ok()) << together.status();
      const double tolerance = std::string(dtype) == "float32" ? 1e-5 : 2e-2;
      for (size_t i = 0; i < seqs.size(); ++i) {
        auto alone = gpu->Run({seqs[i]}, AllOutputs(*gpu));
        ASSERT_TRUE(alone.ok());
        EXPECT_LE(MaxAbsDiff((*alone)[0].pooled, (*together)[i].pooled), tolerance) << name << " " << dtype << " " << i;
        EXPECT_LE(MaxAbsDiff((*alone)[0].token_states, (*together)[i].token_states), 10 * tolerance)
            << name << " " << dtype << " " << i;
      }
    }
  }
}

// Workers share one engine, each on its own stream: results equal the ones of one caller.
TEST(GpuEngineTest, ConcurrentWorkersAgree) {
  SKIP_WITHOUT_GPU();
  auto gpu = Load("deberta_v3_cls", "cuda", "float32");
  ASSERT_TRUE(gpu);
  std::vector<std::vector<SequenceInput>> batches;
  std::vector<std::vector<SequenceOutput>> expected;
  for (int w = 0; w < 4; ++w) {
    batches.push_back(MixedSequences(gpu->info().vocab_size, 8, 120, 10 + w));
    auto r = gpu->Run(batches.back(), AllOutputs(*gpu));
    ASSERT_TRUE(r.ok());
    expected.push_back(*r);
  }
  std::vector<double> worst(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 20; ++round) {
        auto r = gpu->Run(batches[w], AllOutputs(*gpu));
        if (!r.ok()) {
          worst[w] = INFINITY;
          return;
        }
        for (size_t i = 0; i < r->size(); ++i) {
          worst[w] = std::max(worst[w], MaxAbsDiff((*r)[i].token_states, expected[w][i].token_states));
          worst[w] = std::max(worst[w], MaxAbsDiff((*r)[i].logits, expected[w][i].logits));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int w = 0; w < 4; ++w) EXPECT_LE(worst[w], 1e-5) << "worker " << w;
}

// CUDA graphs (captured_forwards.h): the first batch of a length captures, the next ones replay,
// with the same outputs as the eager engine (whose GEMMs run on the packed real tokens, the
// graphs' on every position: float32 within 1e-4, half precision within its rounding), for a
// full graph batch and for fewer sequences in a larger graph.
TEST(GpuEngineTest, CudaGraphsMatchTheEagerEngine) {
  SKIP_WITHOUT_GPU();
  for (const char* name : kModels) {
    for (const char* dtype : {"float32", "bfloat16"}) {
      EngineOptions options;
      options.device = "cuda";
      options.dtype = ParseDType(dtype).value();
      auto graphs = Engine::Load(ReferenceDir(name), options);
      options.cuda_graph_tokens = 0;
      auto eager = Engine::Load(ReferenceDir(name), options);
      ASSERT_TRUE(graphs.ok() && eager.ok()) << graphs.status() << eager.status();
      const auto seqs = MixedSequences((*eager)->info().vocab_size, 8, 100, 3);
      const std::vector<SequenceInput> fewer(seqs.begin(), seqs.begin() + 3);
      const bool half = std::string(dtype) != "float32";
      for (const std::vector<SequenceInput>* batch : {&seqs, &seqs, &seqs, &fewer}) {
        auto want = (*eager)->Run(*batch, AllOutputs(**eager));
        auto got = (*graphs)->Run(*batch, AllOutputs(**graphs));
        ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
        for (size_t i = 0; i < batch->size(); ++i) {
          const std::string what = std::string(name) + " " + dtype + " sequence " + std::to_string(i);
          if (half) {
            EXPECT_GE(Cosine((*got)[i].pooled, (*want)[i].pooled), 0.999) << what;
            EXPECT_LE(MaxAbsDiff((*got)[i].logits, (*want)[i].logits), 0.1) << what;
          } else {
            EXPECT_LE(MaxAbsDiff((*got)[i].token_states, (*want)[i].token_states), 1e-4) << what;
            EXPECT_LE(MaxAbsDiff((*got)[i].pooled, (*want)[i].pooled), 1e-4) << what;
            EXPECT_LE(MaxAbsDiff((*got)[i].logits, (*want)[i].logits), 1e-4) << what;
          }
        }
      }
      EXPECT_GT((*graphs)->captured_graphs(), 0) << name << " " << dtype;
      EXPECT_GE((*graphs)->graph_replays(), 2) << name << " " << dtype;  // fewer may have its own length
      EXPECT_EQ((*eager)->captured_graphs(), 0);
    }
  }
}

// A batch larger than the device's memory is RESOURCE_EXHAUSTED (which the batcher answers by
// splitting the batch), and the engine serves the next batch.
TEST(GpuEngineTest, OutOfMemoryIsResourceExhausted) {
  SKIP_WITHOUT_GPU();
  EngineOptions options;
  options.device = "cuda";
  options.max_length = 32768;
  auto engine = Engine::Load(ReferenceDir("deberta_v3_like"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // 16 x 32768 tokens: the attention bias alone is 16 x heads x 32768^2 floats, far above the
  // memory of any current GPU.
  std::vector<SequenceInput> huge = MixedSequences((*engine)->info().vocab_size, 16, 1, 4);
  for (SequenceInput& s : huge) s.input_ids.assign(32768, 7);
  auto r = (*engine)->Run(huge, kOutputPooled);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  auto small = (*engine)->Run(MixedSequences((*engine)->info().vocab_size, 4, 50, 5), kOutputPooled);
  EXPECT_TRUE(small.ok()) << small.status();
}

}  // namespace
}  // namespace relserve
