#ifndef RELSERVE_CLIENT_CONNECT_BACKOFF_H_
#define RELSERVE_CLIENT_CONNECT_BACKOFF_H_

#include <chrono>
#include <cstdint>
#include <random>

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

namespace relserve::client {

// Whether a failed call never got an answer from a server: UNAVAILABLE while the channel is
// not connected (no server listening, unreachable, connection lost mid-call). A server that
// answers UNAVAILABLE itself (shutting down) does so over a READY channel, and counts as a
// server error. `state` is the channel's state right after the call failed.
bool IsConnectionFailure(grpc::StatusCode code, grpc_connectivity_state state);

// The wait of one bench caller between attempts while the server cannot be reached: a gRPC
// channel without a connection fails calls at once, so a caller that retried immediately would
// spin (hundreds of thousands of failures in seconds) and measure nothing. After the n-th
// consecutive connection failure the caller waits initial x multiplier^(n-1), capped at max,
// times a random factor in [1 - jitter, 1 + jitter] (still capped at max), so that the callers
// of one run do not retry in lockstep. Any answer from a server resets the schedule.
class ConnectBackoff {
 public:
  struct Policy {
    std::chrono::milliseconds initial{50};
    double multiplier = 2;
    std::chrono::milliseconds max{1000};
    double jitter = 0.2;
  };

  explicit ConnectBackoff(uint64_t seed) : ConnectBackoff(seed, Policy()) {}
  ConnectBackoff(uint64_t seed, Policy policy) : policy_(policy), rng_(seed) {}

  // The wait after one more consecutive connection failure.
  std::chrono::milliseconds NextDelay();
  // A server answered (successfully or not): the next failure starts the schedule again.
  void Reset() { failures_ = 0; }

  int consecutive_failures() const { return failures_; }
  const Policy& policy() const { return policy_; }

 private:
  Policy policy_;
  std::mt19937_64 rng_;
  int failures_ = 0;
};

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_CONNECT_BACKOFF_H_
