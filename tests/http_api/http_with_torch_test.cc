// The HTTP server must start and serve inside a process that has LibTorch (and with it
// OpenBLAS and glog) loaded and running: their static thread-local storage is what made
// prometheus-cpp's civetweb server fail there (PLATFORM.md). cpp-httplib's threads are plain
// std::threads with the default 8 MB stack. Its own executable, so only it compiles ATen.
#include <ATen/ATen.h>
#include <httplib.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "server/http_api/http_server.h"
#include "server/serving/encoder_serving.h"

namespace relserve {
namespace {

bool MappedInProcess(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(library) != std::string::npos) return true;
  }
  return false;
}

TEST(HttpWithTorchTest, ServesInAProcessWithLibTorchAndOpenBlas) {
  // Real ops, so the BLAS and OpenMP runtimes are initialized, not just mapped.
  ASSERT_EQ(at::mm(at::ones({64, 64}), at::ones({64, 64})).sum().item<float>(), 64.0f * 64 * 64);
  EXPECT_TRUE(MappedInProcess("libtorch_cpu") || MappedInProcess("libtorch.so"));
  RecordProperty("openblas_loaded", MappedInProcess("libopenblas") ? "yes" : "no");

  ModelRegistry registry;
  ServerMetrics metrics;
  EncoderServing serving(&registry, &metrics, ServingLimits{});
  RouteContext routes;
  routes.serving = &serving;
  routes.healthy = [] { return true; };
  HttpServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.threads = 8;
  auto server = HttpServer::Start(config, routes, &registry, &metrics);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  // More requests than threads, so that every pool thread runs (and has its TLS set up).
  for (int i = 0; i < 32; ++i) {
    auto health = client.Get("/health");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    auto models = client.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(models->body, R"({"data":[],"object":"list"})");
  }
  // Torch still works beside the server's threads.
  EXPECT_EQ(at::ones({3}).sum().item<float>(), 3.0f);
  (*server)->Stop();
}

}  // namespace
}  // namespace relserve
