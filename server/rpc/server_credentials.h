#ifndef RELSERVE_SERVER_RPC_SERVER_CREDENTIALS_H_
#define RELSERVE_SERVER_RPC_SERVER_CREDENTIALS_H_

#include <memory>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "server/rpc/tls_files.h"

namespace relserve {

// The gRPC port's credentials: plaintext without a certificate; TLS with the certificate and its
// key; mutual TLS (client certificates required and verified) with a client CA too. Reads the
// PEM files now, so that a missing, unreadable or non-PEM file fails at startup with an
// INVALID_ARGUMENT naming its flag, before any model is loaded.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_SERVER_CREDENTIALS_H_
