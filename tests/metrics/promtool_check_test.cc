// Lints a real scrape of every relserve series with `promtool check metrics` (the Prometheus
// project's own linter: naming, units, _total suffixes, help text). Skipped when promtool is not
// installed (Debian package "prometheus").

#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "server/metrics/http_endpoint.h"
#include "server/metrics/server_metrics.h"
#include "tests/metrics/metrics_test_util.h"

namespace relserve {
namespace {

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Fills every series, including odd label values, the way the server would.
void RecordEverything(ServerMetrics& m) {
  for (const std::string model : {"deberta-v3-small", "t5-encoder"}) {
    m.SetModelInfo(model, {{"architecture", "DebertaV2Model"},
                           {"dtype", "float32"},
                           {"device", "cpu"},
                           {"max_length", "512"}});
    m.SetServing(model, true);
    m.RecordRequest(model, "Encode", "OK", 0.012);
    m.RecordRequest(model, "Encode", "INVALID_ARGUMENT", 0.0004);
    m.RecordRequest(model, "Tokenize", "OK", 0.0008);
    m.RecordTokenize(model, 0.0003);
    m.RecordRejection(model, "queue_full");
    m.RecordRejection(model, "deadline_exceeded");
    m.AddInFlightSequences(model, 3);
    m.SetQueueDepth(model, 2);
    m.RecordQueueTime(model, 0.0015);
    m.RecordBatch(model, 8, 900, 1024, 0.003, 0.08, true);
    m.RecordBatch(model, 2, 10, 16, 0.001, 0.002, false);
  }
  m.RecordRejection("we\"ird\\name\n", "shutdown");
  m.RecordUnauthenticated("http");
}

TEST(PromtoolCheckTest, ScrapePassesPromtoolLint) {
  const std::string promtool = FindOnPath("promtool");
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not on PATH (Debian package 'prometheus'); lint check skipped";
  }
  ServerMetrics metrics;
  RecordEverything(metrics);
  HttpEndpointConfig config;
  config.address = "127.0.0.1";
  config.port = 0;
  auto endpoint =
      MetricsHttpEndpoint::Start(config, [&] { return metrics.Render(); }, nullptr);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const metrics_test::HttpResponse scrape = metrics_test::HttpGet((*endpoint)->port(), "/metrics");
  ASSERT_EQ(scrape.status, 200) << scrape.raw;
  ASSERT_NE(scrape.body.find("relserve_model_info{"), std::string::npos);

  std::string path = (std::filesystem::temp_directory_path() / "relserve_scrape_XXXXXX").string();
  const int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    out << scrape.body;
  }
  const std::string command = "'" + promtool + "' check metrics < '" + path + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = ::pclose(pipe);
  ::unlink(path.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "promtool complained:\n" << output;
  EXPECT_EQ(output, "") << "promtool lint problems:\n" << output;
}

}  // namespace
}  // namespace relserve
