#include "client/health_check.h"

#include <chrono>
#include <ostream>

#include <grpcpp/client_context.h>

#include "client/exit_codes.h"
#include "client/response_json.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace relserve::client {

int RunHealthCheck(const ClientCommand& c, const std::shared_ptr<grpc::Channel>& channel, std::ostream& out,
                   std::ostream& err) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  const int64_t deadline_ms = c.connection.deadline_ms > 0 ? c.connection.deadline_ms : DefaultDeadlineMs(c.name);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(c.health.service);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    if (!c.quiet) err << ErrorJson(StatusCodeName(status.error_code()), status.error_message()).dump() << std::endl;
    return kExitRpcError;
  }
  const bool serving = response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  if (!c.quiet) {
    out << nlohmann::ordered_json{{"service", c.health.service},
                          {"status", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status())}}
               .dump()
        << std::endl;
  }
  return serving ? kExitOk : kExitRpcError;
}

}  // namespace relserve::client
