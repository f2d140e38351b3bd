// The metrics endpoint must work inside a process that has LibTorch (and with it OpenBLAS and
// glog) loaded: that is where prometheus-cpp's civetweb exposer cannot start, because their
// static TLS does not fit in civetweb's 100 KB thread stacks. This test forces LibTorch to load
// and initialize before starting the endpoint, then scrapes it over loopback. It lives in its own
// executable so only it pays for compiling ATen headers.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <string>

#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "tests/metrics/metrics_test_util.h"

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

TEST(EndpointWithTorchTest, ServesMetricsInAProcessWithLibTorch) {
  // A real op, so the BLAS/OpenMP runtimes are initialized, not just mapped.
  ASSERT_EQ(at::ones({1}).sum().item<float>(), 1.0f);
  ASSERT_EQ(at::mm(at::ones({64, 64}), at::ones({64, 64})).sum().item<float>(), 64.0f * 64 * 64);
  EXPECT_TRUE(MappedInProcess("libtorch_cpu") || MappedInProcess("libtorch.so"));
  const bool openblas = MappedInProcess("libopenblas");
  RecordProperty("openblas_loaded", openblas ? "yes" : "no");
  std::cout << "OpenBLAS mapped in this process: " << (openblas ? "yes" : "no") << "\n";

  ServerMetrics metrics;
  metrics.SetModelInfo("m", {{"architecture", "T5EncoderModel"}, {"device", "cpu"}});
  metrics.RecordRequest("m", "Encode", "OK", 0.02);
  HttpEndpointConfig config;
  config.address = "127.0.0.1";
  config.port = 0;
  auto endpoint = MetricsHttpEndpoint::Start(config, [&] { return metrics.Render(); },
                                             [] { return absl::OkStatus(); });
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  for (int i = 0; i < 3; ++i) {
    const metrics_test::HttpResponse r = metrics_test::HttpGet((*endpoint)->port(), "/metrics");
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.body, metrics.Render());
    EXPECT_NE(r.body.find("relserve_requests_total{code=\"OK\",model=\"m\",rpc=\"Encode\"} 1"),
              std::string::npos)
        << r.body;
  }
  EXPECT_EQ(metrics_test::HttpGet((*endpoint)->port(), "/healthz").status, 200);
  (*endpoint)->Stop();
}

}  // namespace
}  // namespace relserve
