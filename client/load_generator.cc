// relserve-loadgen: a closed-loop load generator for relserve's Embed RPC. Each of
// --concurrency workers sends one request at a time for --duration seconds; sequence lengths
// (in tokens, special tokens included) are drawn log-uniformly from [--min-len, --max-len] or
// fixed. Prints one JSON line: throughput, latency percentiles, errors by status, and the
// server's padding ratio over the run (from its /metrics counters).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "relserve/v1/encoder.grpc.pb.h"

namespace {

struct Options {
  std::string target = "127.0.0.1:50051";
  std::string model;
  int concurrency = 8;
  double duration = 20;
  double warmup = 2;
  int min_len = 8, max_len = 512;
  int inputs_per_request = 1;
  int vocab = 1000;
  int metrics_port = 9090;
  uint64_t seed = 1;
};

double Sum(const std::string& metrics, const std::string& name) {
  // Adds every sample of a counter family: name{...} value
  double total = 0;
  std::regex line("^" + name + "(\\{[^}]*\\})? ([0-9.eE+-]+)$");
  std::istringstream in(metrics);
  std::string l;
  std::smatch m;
  while (std::getline(in, l)) {
    if (std::regex_match(l, m, line)) total += std::stod(m[2]);
  }
  return total;
}

std::string Scrape(int port) {
  if (port <= 0) return "";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string resp;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) > 0) {
      char buf[65536];
      ssize_t n;
      while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const auto body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--target") o.target = v;
    else if (k == "--model") o.model = v;
    else if (k == "--concurrency") o.concurrency = std::stoi(v);
    else if (k == "--duration") o.duration = std::stod(v);
    else if (k == "--warmup") o.warmup = std::stod(v);
    else if (k == "--min-len") o.min_len = std::stoi(v);
    else if (k == "--max-len") o.max_len = std::stoi(v);
    else if (k == "--inputs-per-request") o.inputs_per_request = std::stoi(v);
    else if (k == "--vocab") o.vocab = std::stoi(v);
    else if (k == "--metrics-port") o.metrics_port = std::stoi(v);
    else if (k == "--seed") o.seed = std::stoull(v);
    else {
      std::cerr << "relserve-loadgen: unknown option " << k << "\n";
      return 2;
    }
  }
  if (o.min_len < 3 || o.max_len < o.min_len || o.concurrency < 1) {
    std::cerr << "relserve-loadgen: need 3 <= --min-len <= --max-len and --concurrency >= 1\n";
    return 2;
  }
  auto channel = grpc::CreateChannel(o.target, grpc::InsecureChannelCredentials());
  using Clock = std::chrono::steady_clock;
  std::mutex mu;
  std::vector<double> latencies;
  std::map<std::string, int> errors;
  std::atomic<int64_t> sequences{0}, tokens{0};
  std::atomic<bool> measuring{false}, stop{false};

  auto worker = [&](int id) {
    auto stub = relserve::v1::Encoder::NewStub(channel);
    std::mt19937_64 rng(o.seed * 7919 + id);
    std::uniform_real_distribution<double> u(std::log(o.min_len), std::log(o.max_len + 1.0));
    std::uniform_int_distribution<int> tok(5, o.vocab - 1);
    while (!stop.load()) {
      relserve::v1::EmbedRequest req;
      req.set_model(o.model);
      int64_t req_tokens = 0;
      for (int k = 0; k < o.inputs_per_request; ++k) {
        const int len = std::min(o.max_len, static_cast<int>(std::exp(u(rng))));
        auto* ids = req.add_inputs()->mutable_tokens();
        ids->add_ids(1);  // [CLS]
        for (int t = 0; t < len - 2; ++t) ids->add_ids(tok(rng));
        ids->add_ids(2);  // [SEP]
        req_tokens += len;
      }
      relserve::v1::EmbedResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      const auto t0 = Clock::now();
      grpc::Status s = stub->Embed(&ctx, req, &resp);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!measuring.load()) continue;
      std::lock_guard<std::mutex> lock(mu);
      if (s.ok()) {
        latencies.push_back(ms);
        sequences += o.inputs_per_request;
        tokens += req_tokens;
      } else {
        ++errors[std::to_string(s.error_code())];
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < o.concurrency; ++i) threads.emplace_back(worker, i);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));
  const std::string before = Scrape(o.metrics_port);
  measuring = true;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(o.duration);
  while (Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    std::cerr << "\r" << static_cast<int>(t) << "s: " << sequences.load() << " sequences, "
              << static_cast<int64_t>(tokens.load() / std::max(t, 1e-9)) << " tokens/s" << std::flush;
  }
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string after = Scrape(o.metrics_port);
  stop = true;
  for (auto& t : threads) t.join();
  std::cerr << "\n";

  const double real = Sum(after, "relserve_tokens_total") - Sum(before, "relserve_tokens_total");
  const double padded = Sum(after, "relserve_padded_tokens_total") - Sum(before, "relserve_padded_tokens_total");
  const double batches = Sum(after, "relserve_batches_total") - Sum(before, "relserve_batches_total");
  std::cout << "{\"concurrency\":" << o.concurrency << ",\"duration_s\":" << elapsed
            << ",\"requests\":" << latencies.size() << ",\"sequences_per_second\":" << sequences / elapsed
            << ",\"tokens_per_second\":" << tokens / elapsed << ",\"p50_ms\":" << Percentile(latencies, 0.5)
            << ",\"p90_ms\":" << Percentile(latencies, 0.9) << ",\"p99_ms\":" << Percentile(latencies, 0.99)
            << ",\"max_ms\":" << Percentile(latencies, 1.0) << ",\"padding_ratio\":" << (real > 0 ? padded / real : 0)
            << ",\"mean_batch_size\":" << (batches > 0 ? (Sum(after, "relserve_batch_size_count") - Sum(before, "relserve_batch_size_count") > 0 ? (Sum(after, "relserve_batch_size_sum") - Sum(before, "relserve_batch_size_sum")) / (Sum(after, "relserve_batch_size_count") - Sum(before, "relserve_batch_size_count")) : 0) : 0)
            << ",\"errors\":{";
  bool first = true;
  for (const auto& [code, n] : errors) {
    std::cout << (first ? "" : ",") << "\"" << code << "\":" << n;
    first = false;
  }
  std::cout << "}}" << std::endl;
  return 0;
}
