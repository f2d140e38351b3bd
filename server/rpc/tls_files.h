#ifndef RELSERVE_SERVER_RPC_TLS_FILES_H_
#define RELSERVE_SERVER_RPC_TLS_FILES_H_

#include <string>

namespace relserve {

// The gRPC port's PEM files (--tls-cert, --tls-key, --tls-client-ca); empty: none.
struct TlsFiles {
  std::string cert;       // certificate chain: TLS only
  std::string key;        // its private key
  std::string client_ca;  // CA certificates: client certificates required (mutual TLS)
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_TLS_FILES_H_
