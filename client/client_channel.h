#ifndef RELSERVE_CLIENT_CLIENT_CHANNEL_H_
#define RELSERVE_CLIENT_CLIENT_CHANNEL_H_

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "client/client_flags.h"

namespace relserve::client {

// The load-balancing policy a target gets under --load-balancing auto: round_robin for
// targets that can name several servers (dns:///, and lists such as ipv4:A:P,B:P), so that
// calls spread over every address instead of staying on the first connection; pick_first
// for a single address.
std::string LoadBalancingPolicyFor(const ConnectionOptions& options);

// A channel with the options' credentials (plaintext, TLS, or mutual TLS; the PEM files are
// read here, a missing one is INVALID_ARGUMENT naming its flag) and load-balancing policy. The
// channel reconnects at least once a second while its server cannot be reached. With an API
// key, every call on it carries "authorization: Bearer KEY" (metadata, not gRPC call
// credentials: those are refused on a plaintext channel).
absl::StatusOr<std::shared_ptr<grpc::Channel>> CreateClientChannel(const ConnectionOptions& options);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_CLIENT_CHANNEL_H_
