#ifndef RELSERVE_SERVER_RPC_LISTENER_CHECK_H_
#define RELSERVE_SERVER_RPC_LISTENER_CHECK_H_

#include <sys/socket.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace relserve {

class ServerMetrics;

// Where the self-check connects: one socket address (IPv4, IPv6 or a Unix socket).
struct ListenerTarget {
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string text;  // for messages: "127.0.0.1:50051", "[::1]:50051", "unix:/run/x.sock"
};

// The addresses that reach a gRPC server listening on `grpc_address` (as given to
// --grpc-address) with the port it actually bound (`bound_port`, which differs when the
// address asked for port 0). A wildcard host ("0.0.0.0", "[::]", "") is reached over
// loopback: 127.0.0.1, then ::1; "localhost" likewise; a numeric address is itself; another
// name is resolved now. "unix:PATH" and "unix-abstract:NAME" are Unix sockets; the optional
// "dns:", "ipv4:" and "ipv6:" prefixes of gRPC URIs are understood. UNIMPLEMENTED for other
// schemes (vsock, ...), INVALID_ARGUMENT for an address without a port, NOT_FOUND when a
// name does not resolve.
absl::StatusOr<std::vector<ListenerTarget>> ListenerTargets(const std::string& grpc_address,
                                                            int bound_port);

// One probe: whether a new connection to the first reachable target is accepted by the
// server process, not only by the kernel.
//
// How: a TCP connect() alone proves nothing, because the kernel completes the handshake from
// the listen backlog whether or not the server ever calls accept() (gRPC 1.51 stops calling
// it for good after one accept() failed with EMFILE). So the probe sends a TLS ClientHello and
// waits for the first reply byte or an orderly close, which only a process that accepted the
// connection can produce:
// - a plaintext gRPC server sends its HTTP/2 SETTINGS frame as soon as it accepts, then drops
//   the connection when the ClientHello turns out not to be the HTTP/2 preface;
// - a TLS gRPC server (mutual TLS too) answers the ClientHello with its ServerHello.
// The ClientHello carries no server name (SNI), so a TLS server logs nothing about it; sending
// the HTTP/2 preface instead would make a TLS server log a handshake error at every probe. The
// probe closes the connection after the first reply byte, before any handshake completes, and
// makes no RPC.
// Failures (UNAVAILABLE, naming the target): no socket (e.g. descriptors exhausted), connect
// refused or timed out (the backlog is full), a reset before any reply, or no reply within
// `timeout` (accepted by the kernel, never by the server). Targets after the first are tried
// only when connecting to the earlier ones fails at once (e.g. no IPv6 loopback).
// When `cancel_fd` (an eventfd or pipe, -1 for none) becomes readable the probe returns
// CANCELLED at once.
absl::Status ProbeListener(const std::vector<ListenerTarget>& targets, absl::Duration timeout,
                           int cancel_fd = -1);

struct ListenerCheckOptions {
  absl::Duration interval = absl::Seconds(2);  // between the end of a probe and the next one
  absl::Duration timeout = absl::Seconds(3);   // for one probe, connect and reply together
};

// Probes the server's own gRPC port from an owned thread, so that /healthz and the metric
// relserve_grpc_listener_ok say whether gRPC still takes new connections (clients, and probes
// of load balancers, need new connections; existing ones keep working when the listener is
// gone).
//
// Probes run every options.interval while `enabled` returns true, the first one as soon as it
// does (relserve passes "serving": the first probe follows start-up, and no failure is reported
// while the server shuts down on purpose).
// The state changes with every probe, without hysteresis: whoever acts on /healthz counts
// failures itself (a kubelet's failureThreshold). The first failure after success is logged
// as an error with its reason, the recovery as info; repeated failures are not logged again.
// With `metrics`, each probe sets relserve_grpc_listener_ok to 1 or 0.
//
// An address the check cannot reach (see ListenerTargets) leaves it disabled: one warning is
// logged, status() stays OK and the metric is not exported.
class GrpcListenerCheck {
 public:
  // `metrics` (may be null) and whatever `enabled` reads must outlive the check.
  // INTERNAL if the thread cannot start.
  static absl::StatusOr<std::unique_ptr<GrpcListenerCheck>> Start(
      const std::string& grpc_address, int bound_port, const ListenerCheckOptions& options,
      ServerMetrics* metrics, std::function<bool()> enabled);

  ~GrpcListenerCheck();  // Stop()
  GrpcListenerCheck(const GrpcListenerCheck&) = delete;
  GrpcListenerCheck& operator=(const GrpcListenerCheck&) = delete;

  // OK while the last probe succeeded (and before the first one ends); else UNAVAILABLE:
  // "the gRPC listener does not accept new connections: <reason>". Any thread.
  absl::Status status() const;

  // Cancels a probe under way and joins the thread. Idempotent; any thread.
  void Stop();

 private:
  GrpcListenerCheck() = default;
  void Run();

  std::vector<ListenerTarget> targets_;
  ListenerCheckOptions options_;
  ServerMetrics* metrics_ = nullptr;
  std::function<bool()> enabled_;
  int cancel_fd_ = -1;  // eventfd: Stop() cuts a probe short

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;           // guarded by mu_
  absl::Status status_;         // guarded by mu_
  std::mutex stop_mu_;          // serializes Stop()
  std::thread thread_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_LISTENER_CHECK_H_
