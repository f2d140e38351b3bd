#ifndef RELSERVE_SERVER_RPC_GRPC_SERVER_H_
#define RELSERVE_SERVER_RPC_GRPC_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/rpc/tls_files.h"

namespace grpc {
class Server;
class ServerCredentials;
}  // namespace grpc

namespace relserve {

class ApiKeys;
class EncoderService;
class EncoderServing;
class GrpcListenerCheck;
class ModelRegistry;
class ServerMetrics;

struct GrpcServerOptions {
  std::string address = "0.0.0.0:50051";  // --grpc-address
  TlsFiles tls;                           // none: plaintext
  int max_receive_message_bytes = 4 << 20;
  int max_send_message_bytes = 4 << 20;
  // > 0: each client connection is closed after about this long (gRPC's max connection age, with
  // GOAWAY; gRPC spreads it by +-10% itself), and calls under way on it get
  // connection_age_grace_seconds to finish.
  double max_connection_age_seconds = 0;
  double connection_age_grace_seconds = 30;
};

// relserve's gRPC port: the Encoder service (encoder_service.h), gRPC's health service (the overall "" and one
// name per model), server reflection, the listener self-check (listener_check.h), and a drain
// that ends with the doors closed before gRPC's own shutdown (connection_closer.h). Everything
// of gRPC the server binary needs is here, so that only rpc/ sees gRPC.
class GrpcServer {
 public:
  // Reads the TLS files now (MakeServerCredentials: INVALID_ARGUMENT naming the flag), so that a
  // bad file fails before any model loads. Listens on nothing yet.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Prepare(GrpcServerOptions options);
  ~GrpcServer();  // Shutdown()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Serves the Encoder over `serving` and `registry` (EncoderService: `metrics` and `api_keys` may
  // be null; all four must outlive this) on the address, and starts the listener check, which
  // probes while `serving_now` returns true and sets relserve_grpc_listener_ok in `metrics`.
  // UNAVAILABLE naming the address when it cannot listen.
  absl::Status Start(const EncoderServing* serving, const ModelRegistry* registry, ServerMetrics* metrics,
                     const ApiKeys* api_keys, std::function<bool()> serving_now);

  // The drain (EncoderService's): new calls refused with UNAVAILABLE from StartDraining on;
  // WaitForIdle true once no call is left, false at `deadline`; the calls running now.
  void StartDraining();
  bool WaitForIdle(absl::Time deadline) const;
  int64_t in_flight() const;

  int port() const { return port_; }  // the port bound (0 before Start)
  // OK while the port takes new connections (GrpcListenerCheck::status); OK before Start.
  absl::Status listener_status() const;
  // The health service's answer for "" and for each of `names`: SERVING or NOT_SERVING.
  void SetHealth(bool serving, const std::vector<std::string>& names);
  // Once every call has its answer: ends the connections on the port (EndConnectionsOnPort,
  // logged), then gRPC's shutdown (a second for what is left) and its wait. Safe to call twice.
  void Shutdown();

 private:
  explicit GrpcServer(GrpcServerOptions options);

  GrpcServerOptions options_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::unique_ptr<EncoderService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  bool shut_down_ = false;
  std::unique_ptr<GrpcListenerCheck> listener_check_;  // last: its thread stops first
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_GRPC_SERVER_H_
