#ifndef RELSERVE_SERVER_MAIN_RELSERVE_SERVER_H_
#define RELSERVE_SERVER_MAIN_RELSERVE_SERVER_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/main/server_config.h"
#include "server/util/environment_reader.h"

namespace relserve {

// The whole service: models, batchers, the gRPC server (Encoder, health, reflection) and the
// metrics endpoint. Start() returns once every model is loaded and warmed up and health
// reports SERVING.
class RelserveServer {
 public:
  // `stop_requested` (may be empty) is polled between loading steps (each model, each warm-up
  // length): once it returns true, Start stops what it started and returns CANCELLED.
  // `environment`: the process's, as main() reads it, for Hub models (HostOptions::environment;
  // empty: no variable is set).
  static absl::StatusOr<std::unique_ptr<RelserveServer>> Start(const ServerConfig& config,
                                                               std::function<bool()> stop_requested = nullptr,
                                                               GetEnv environment = nullptr);
  ~RelserveServer();

  int grpc_port() const;
  int metrics_port() const;  // -1 without an endpoint
  int http_port() const;     // -1 without the HTTP API

  // Health NOT_SERVING, new calls refused (UNAVAILABLE), idle streams ended, in-flight calls
  // given `grace` to finish, then batchers and endpoints stopped. Once `end_grace` (may be
  // empty; polled) returns true the grace ends at once: what is still running is answered
  // UNAVAILABLE. Every call gets an answer either way. Safe to call twice.
  void Shutdown(absl::Duration grace, std::function<bool()> end_grace = nullptr);

 private:
  struct State;
  explicit RelserveServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MAIN_RELSERVE_SERVER_H_
