#include "server/rpc/grpc_server.h"

#include <algorithm>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/rpc/connection_closer.h"
#include "server/rpc/encoder_service.h"
#include "server/rpc/listener_check.h"
#include "server/rpc/server_credentials.h"
#include "server/util/log.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Prepare(GrpcServerOptions options) {
  std::unique_ptr<GrpcServer> server(new GrpcServer(std::move(options)));
  ASSIGN_OR_RETURN(server->credentials_, MakeServerCredentials(server->options_.tls));
  return server;
}

GrpcServer::GrpcServer(GrpcServerOptions options) : options_(std::move(options)) {}

GrpcServer::~GrpcServer() { Shutdown(); }

absl::Status GrpcServer::Start(const EncoderServing* serving, const ModelRegistry* registry, ServerMetrics* metrics,
                              const ApiKeys* api_keys, std::function<bool()> serving_now) {
  service_ = std::make_unique<EncoderService>(serving, registry, metrics, api_keys);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.address, credentials_, &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options_.max_send_message_bytes);
  if (options_.max_connection_age_seconds > 0) {
    // gRPC spreads the age by +-10% itself, so that clients do not all reconnect at once.
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               static_cast<int>(std::max(1.0, options_.max_connection_age_seconds * 1000)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(std::clamp(options_.connection_age_grace_seconds * 1000, 1.0, 2e9)));
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.address));
  }
  ASSIGN_OR_RETURN(listener_check_, GrpcListenerCheck::Start(options_.address, port_, {}, metrics, std::move(serving_now)));
  return absl::OkStatus();
}

void GrpcServer::StartDraining() {
  if (service_ != nullptr) service_->StartDraining();
}

bool GrpcServer::WaitForIdle(absl::Time deadline) const {
  return service_ == nullptr || service_->WaitForIdle(deadline);
}

int64_t GrpcServer::in_flight() const { return service_ != nullptr ? service_->in_flight() : 0; }

absl::Status GrpcServer::listener_status() const {
  return listener_check_ != nullptr ? listener_check_->status() : absl::OkStatus();
}

void GrpcServer::SetHealth(bool serving, const std::vector<std::string>& names) {
  if (server_ == nullptr) return;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  health->SetServingStatus(serving);  // every service name, the overall "" included
  for (const std::string& name : names) health->SetServingStatus(name, serving);
}

void GrpcServer::Shutdown() {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // Every call has its answer: close the doors before gRPC's own shutdown, which would cancel
  // (CANCELLED) calls still arriving on open connections (connection_closer.h).
  const int ended = EndConnectionsOnPort(port_, absl::Milliseconds(500));
  if (ended > 0) LogInfo(absl::StrCat("closed ", ended, " client connection(s)"));
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  server_->Wait();
}

}  // namespace relserve
