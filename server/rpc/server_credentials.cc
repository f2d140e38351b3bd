#include "server/rpc/server_credentials.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

// The contents of a PEM file given to `flag`, which must hold a block whose label contains
// `label` ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPem(const char* flag, const std::string& path, const char* label) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path, ": ", std::strerror(errno)));
  std::ostringstream contents;
  contents << in.rdbuf();
  std::string pem = contents.str();
  const bool has_block = pem.find("-----BEGIN ") != std::string::npos &&
                         pem.find(label) != std::string::npos;
  if (!has_block) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " holds no PEM ", label));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls) {
  if (tls.cert.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadPem("tls-cert", tls.cert, "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls-key", tls.key, "PRIVATE KEY");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tls.client_ca.empty()) {
    auto ca = ReadPem("tls-client-ca", tls.client_ca, "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *ca;
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace relserve
