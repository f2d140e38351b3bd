#include "server/rpc/status_mapping.h"

namespace relserve {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

}  // namespace relserve
