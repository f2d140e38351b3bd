#include "client/bench_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

#include <grpcpp/client_context.h>

#include "client/arrival_schedule.h"
#include "client/bench_workload.h"
#include "client/connect_backoff.h"
#include "client/metrics_scrape.h"
#include "client/response_json.h"
#include "relserve/v1/encoder.grpc.pb.h"

namespace relserve::client {
namespace {

using Clock = std::chrono::steady_clock;

// One request's outcome.
struct Outcome {
  grpc::Status status;
  int64_t tokens = 0;
  int64_t sequences = 0;
};

Outcome CallOnce(v1::Encoder::Stub& stub, const BenchWorkload& workload, const std::string& rpc,
                 std::chrono::milliseconds deadline, std::mt19937_64& rng) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  Outcome o;
  auto take_usage = [&o](const v1::Usage& u) {
    o.tokens = u.tokens();
    o.sequences = u.sequences();
  };
  if (rpc == "rerank") {
    v1::RerankResponse response;
    o.status = stub.Rerank(&context, workload.MakeRerank(rng), &response);
    take_usage(response.usage());
  } else if (rpc == "classify") {
    v1::ClassifyResponse response;
    o.status = stub.Classify(&context, workload.MakeClassify(rng), &response);
    take_usage(response.usage());
  } else {
    v1::EmbedResponse response;
    o.status = stub.Embed(&context, workload.MakeEmbed(rng), &response);
    take_usage(response.usage());
  }
  return o;
}

// What the callers share; guarded by `mu` where noted.
struct Shared {
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> tickets{0};  // --requests: measured requests started
  std::atomic<int64_t> finished{0}, tokens{0}, failed{0}, unreachable{0};  // for the progress line
  std::mutex mu;
  BenchResult result;  // guarded by mu
};

// Counts one measured request.
void Record(Shared& shared, const Outcome& out, bool unreachable, double ms, bool open_loop, double lag_ms) {
  std::lock_guard<std::mutex> lock(shared.mu);
  BenchResult& r = shared.result;
  if (open_loop) {
    r.max_start_lag_ms = std::max(r.max_start_lag_ms, lag_ms);
    if (lag_ms > kLateStartMs) ++r.late_starts;
  }
  if (unreachable) {
    ++r.connection_failures;
    r.last_connection_error = out.status.error_message();
    ++shared.unreachable;
    return;
  }
  if (!out.status.ok()) {
    ++r.errors[StatusCodeName(out.status.error_code())];
    ++shared.failed;
    return;
  }
  r.latencies_ms.push_back(ms);
  r.sequences += out.sequences;
  r.tokens += out.tokens;
  if (out.sequences > 0) {
    const int64_t per_sequence = out.tokens / out.sequences;
    if (r.latencies_ms.size() == 1 || per_sequence < r.min_sequence_tokens) r.min_sequence_tokens = per_sequence;
    if (per_sequence > r.max_sequence_tokens) r.max_sequence_tokens = per_sequence;
  }
  ++shared.finished;
  shared.tokens += out.tokens;
}

// Waits out a caller's back-off on the channel rather than asleep: gRPC's synchronous client
// makes progress on a connection attempt only while some thread waits on the channel (a caller
// that slept would find it still not connected, long after the server came up), and the wait
// ends early once the channel connects or the run stops.
void BackOff(grpc::Channel& channel, std::chrono::milliseconds delay, const std::atomic<bool>& stop) {
  using std::chrono::system_clock;
  const system_clock::time_point until = system_clock::now() + delay;
  while (!stop.load()) {
    const system_clock::time_point now = system_clock::now();
    if (now >= until) return;
    if (channel.WaitForConnected(std::min(until, now + std::chrono::milliseconds(50)))) return;
  }
}

std::optional<BatchingCounters> Scrape(const std::string& url, std::ostream& progress) {
  if (url.empty()) return std::nullopt;
  auto parsed = ParseHttpUrl(url);
  absl::StatusOr<std::string> body = parsed.ok() ? HttpGet(*parsed) : parsed.status();
  if (!body.ok()) {
    progress << "bench: cannot scrape the server's metrics: " << body.status().message() << std::endl;
    return std::nullopt;
  }
  return ReadBatchingCounters(*body);
}

}  // namespace

absl::StatusOr<BenchResult> RunBench(const ClientCommand& c, const std::shared_ptr<grpc::Channel>& channel,
                                     std::ostream& progress) {
  const BenchOptions& o = c.bench;
  auto workload = BenchWorkload::Create(o, c.request);
  if (!workload.ok()) return workload.status();
  const auto deadline = std::chrono::milliseconds(c.connection.deadline_ms > 0 ? c.connection.deadline_ms
                                                                                : DefaultDeadlineMs(c.name));
  Shared shared;
  shared.result.rpc = o.rpc;
  shared.result.lengths = o.lengths;
  shared.result.concurrency = o.concurrency;
  shared.result.inputs_per_request = o.inputs_per_request;

  shared.result.rate = o.rate;
  shared.result.arrivals = o.arrivals;
  const bool open_loop = o.rate > 0;
  std::mutex schedule_mu;
  ArrivalSchedule schedule(open_loop ? o.rate : 1, o.arrivals, o.seed * 104729 + 17);  // guarded by schedule_mu
  const Clock::time_point origin = Clock::now();

  auto caller = [&](int id) {
    auto stub = v1::Encoder::NewStub(channel);
    std::mt19937_64 rng(o.seed * 7919 + static_cast<uint64_t>(id));
    ConnectBackoff backoff(o.seed * 6271 + static_cast<uint64_t>(id));
    while (!shared.stop.load()) {
      // Open loop: the next free caller takes the next slot of the schedule and starts its
      // request then; when every caller is busy, the slot waits and the wait counts as latency
      // (a load generator that skipped it would hide exactly the queueing it should show).
      Clock::time_point scheduled;
      if (open_loop) {
        double at;
        {
          std::lock_guard<std::mutex> lock(schedule_mu);
          at = schedule.Next();
        }
        scheduled = origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at));
        while (!shared.stop.load() && Clock::now() < scheduled) {
          std::this_thread::sleep_for(std::min<Clock::duration>(scheduled - Clock::now(), std::chrono::milliseconds(50)));
        }
        if (shared.stop.load()) break;
      }
      bool ticketed = false;
      if (o.requests > 0 && shared.measuring.load()) {
        if (shared.tickets.fetch_add(1) >= o.requests) break;
        ticketed = true;
      }
      const auto t0 = open_loop ? scheduled : Clock::now();
      const double lag_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const Outcome out = CallOnce(*stub, *workload, o.rpc, deadline, rng);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      const bool unreachable =
          !out.status.ok() && IsConnectionFailure(out.status.error_code(), channel->GetState(false));
      // --requests counts the requests it started; --duration those finished in the window.
      if (o.requests > 0 ? ticketed : shared.measuring.load()) Record(shared, out, unreachable, ms, open_loop, lag_ms);
      if (unreachable) {
        BackOff(*channel, backoff.NextDelay(), shared.stop);
      } else {
        backoff.Reset();
      }
    }
  };

  std::optional<BatchingCounters> before;
  Clock::time_point start;
  auto start_measuring = [&] {
    before = Scrape(o.metrics_url, progress);
    start = Clock::now();
    shared.measuring = true;
  };
  // Without a warm-up, measuring starts before the first request, so that none goes uncounted.
  if (o.warmup_s <= 0) start_measuring();
  std::vector<std::thread> callers;
  for (int i = 0; i < o.concurrency; ++i) callers.emplace_back(caller, i);
  if (o.warmup_s > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup_s));
    start_measuring();
  }
  const auto end = o.duration_s > 0 ? start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(o.duration_s))
                                    : Clock::time_point::max();
  auto next_progress = start + std::chrono::seconds(1);
  auto requests_done = [&] {
    return o.requests > 0 &&
           shared.finished.load() + shared.failed.load() + shared.unreachable.load() >= o.requests;
  };
  while (Clock::now() < end && !requests_done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (Clock::now() >= next_progress) {
      next_progress += std::chrono::seconds(1);
      if (!c.quiet) {
        const double t = std::chrono::duration<double>(Clock::now() - start).count();
        progress << ProgressLine(t, shared.finished.load(), shared.tokens.load(), shared.failed.load(),
                                 shared.unreachable.load())
                 << std::endl;
      }
    }
  }
  // With --requests every caller has stopped by now (no tickets are left); with --duration the
  // load goes on while the server is scraped, as it was during the window.
  shared.measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  auto after = Scrape(o.metrics_url, progress);
  shared.stop = true;
  for (auto& t : callers) t.join();

  std::lock_guard<std::mutex> lock(shared.mu);
  BenchResult result = std::move(shared.result);
  result.duration_s = elapsed;
  if (before && after) {
    result.server_before = before;
    result.server_after = after;
  }
  return result;
}

}  // namespace relserve::client
