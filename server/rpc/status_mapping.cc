#include "server/rpc/status_mapping.h"

#include "server/util/quote.h"

namespace relserve {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), CapMessage(std::string(status.message()), kMaxStatusMessageBytes));
}

}  // namespace relserve
