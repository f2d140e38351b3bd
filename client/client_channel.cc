#include "client/client_channel.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/str_cat.h"

namespace relserve::client {
namespace {

// Adds "authorization: Bearer KEY" to the initial metadata of every call on the channel.
class ApiKeyInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ApiKeyInterceptor(const std::string& authorization) : authorization_(authorization) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace("authorization", authorization_);
    }
    methods->Proceed();
  }

 private:
  const std::string authorization_;
};

class ApiKeyInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ApiKeyInterceptorFactory(const std::string& key) : authorization_("Bearer " + key) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new ApiKeyInterceptor(authorization_);
  }

 private:
  const std::string authorization_;
};

absl::StatusOr<std::string> ReadFile(const char* flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read ", path, ": ", std::strerror(errno)));
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

}  // namespace

std::string LoadBalancingPolicyFor(const ConnectionOptions& options) {
  if (options.load_balancing != "auto") return options.load_balancing;
  const std::string& t = options.target;
  const bool dns = t.rfind("dns:", 0) == 0;
  const bool several_addresses = t.find(',') != std::string::npos;
  return dns || several_addresses ? "round_robin" : "pick_first";
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateClientChannel(const ConnectionOptions& options) {
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName(LoadBalancingPolicyFor(options));
  // gRPC's reconnect back-off grows to 2 minutes; a bench left running while its server
  // restarts should resume within about a second, as its callers' own back-off does.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (!options.tls) {
    credentials = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    if (!options.ca_cert.empty()) {
      auto ca = ReadFile("ca-cert", options.ca_cert);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!options.client_cert.empty()) {
      auto cert = ReadFile("client-cert", options.client_cert);
      if (!cert.ok()) return cert.status();
      auto key = ReadFile("client-key", options.client_key);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    if (!options.tls_server_name.empty()) args.SetSslTargetNameOverride(options.tls_server_name);
    credentials = grpc::SslCredentials(ssl);
  }
  if (options.api_key.empty()) return grpc::CreateCustomChannel(options.target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<ApiKeyInterceptorFactory>(options.api_key));
  return grpc::experimental::CreateCustomChannelWithInterceptors(options.target, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace relserve::client
