// The server end to end on CUDA devices (--device cuda, and a device list): embeddings and logits over gRPC equal
// the CPU engine's, under many concurrent callers with mixed lengths. Skips where the engine
// cannot run on CUDA (no device, or a build without CUDA).
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/main/relserve_server.h"
#include "server/model/engine.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/server/server_test_env.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using testing::Connect;
using testing::TestModels;
using testing::TestServerConfig;

bool CudaUsable() {
  EngineOptions options;
  options.device = "cuda";
  return Engine::Load(TestModels::Get().dir("embedder"), options).ok();
}

std::string Text(int i) {
  std::string s = "relative attention on a graphics processor";
  for (int k = 0; k < i % 23; ++k) s += " token" + std::to_string(k * 7 + i);
  return s;
}

// The server on `device` (--device) against the CPU engine, 16 callers x 10 calls. The CPU's
// answers are computed first, one at a time: sixteen callers each running the CPU engine beside
// the server (every one with LibTorch's whole thread pool) made the test itself the bottleneck.
// Every call has a deadline, so a server that never answers fails the test instead of hanging it.
void ServeAndCompareWithTheCpu(const std::string& device) {
  constexpr int kCallers = 16, kCalls = 10, kTexts = kCallers * kCalls + 5;
  auto embedder = LoadModel(TestModels::Get().dir("embedder"), EngineOptions{});
  auto classifier = LoadModel(TestModels::Get().dir("classifier"), EngineOptions{});
  ASSERT_TRUE(embedder.ok() && classifier.ok());
  std::vector<std::vector<float>> want_embedding(kTexts), want_logits(kTexts);
  for (int i = 0; i < kTexts; ++i) {
    auto enc = embedder->tokenizer->Encode(Text(i));
    ASSERT_TRUE(enc.ok()) << enc.status();
    auto want = embedder->engine->Run({{enc->input_ids, enc->token_type_ids}}, kOutputPooled);
    ASSERT_TRUE(want.ok()) << want.status();
    want_embedding[i] = (*want)[0].pooled;
    auto cenc = classifier->tokenizer->Encode(Text(i));
    ASSERT_TRUE(cenc.ok()) << cenc.status();
    auto cwant = classifier->engine->Run({{cenc->input_ids, cenc->token_type_ids}}, kOutputLogits);
    ASSERT_TRUE(cwant.ok()) << cwant.status();
    want_logits[i] = (*cwant)[0].logits;
  }

  ServerConfig config = TestServerConfig();
  config.device = device;
  config.workers_per_device = 0;  // the GPU default
  config.warmup = true;
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();

  std::atomic<int> failures{0}, mismatches{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      auto stub = Connect((*server)->grpc_port());
      for (int n = 0; n < kCalls; ++n) {
        const int i = c * kCalls + n;
        v1::EmbedRequest req;
        req.set_model("embedder");
        req.add_inputs()->set_text(Text(i));
        req.add_inputs()->set_text(Text(i + 5));
        v1::EmbedResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        if (!stub->Embed(&ctx, req, &resp).ok() || resp.embeddings_size() != 2) {
          ++failures;
          continue;
        }
        for (int k = 0; k < 2; ++k) {
          if (MaxAbsDiff(want_embedding[i + 5 * k], resp.embeddings(k).values()) > 1e-4) ++mismatches;
        }
        v1::ClassifyRequest creq;
        creq.set_model("classifier");
        creq.add_inputs()->set_text(Text(i));
        v1::ClassifyResponse cresp;
        grpc::ClientContext cctx;
        cctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        if (!stub->Classify(&cctx, creq, &cresp).ok() || cresp.results_size() != 1) {
          ++failures;
          continue;
        }
        if (MaxAbsDiff(want_logits[i], cresp.results(0).logits()) > 1e-4) ++mismatches;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(GpuServerTest, EmbedAndClassifyMatchTheCpuEngineUnderLoad) {
  if (!CudaUsable()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  ServeAndCompareWithTheCpu("cuda");
}

// Several devices (--device cuda:0,cuda:0: the first GPU listed twice, where there is one):
// a copy of each model on each, one queue feeding every copy's workers.
TEST(GpuServerTest, ACopyPerListedDeviceMatchesTheCpuEngine) {
  if (!CudaUsable()) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
  ServeAndCompareWithTheCpu("cuda:0,cuda:0");
}

}  // namespace
}  // namespace relserve
