#ifndef RELSERVE_CLIENT_RPC_COMMANDS_H_
#define RELSERVE_CLIENT_RPC_COMMANDS_H_

#include <iosfwd>
#include <memory>

#include <grpcpp/channel.h>

#include "client/client_flags.h"

namespace relserve::client {

// Runs embed, embed-tokens, rerank, classify, tokenize or models: builds the requests from the
// arguments (one request) or from JSON lines on `in` (one request per --batch-size lines, or
// per line for rerank), prints each response as one JSON line on `out`, and stops at the
// first failure, printing ErrorJson on `err`. Returns the exit code (exit_codes.h).
int RunRpcCommand(const ClientCommand& command, const std::shared_ptr<grpc::Channel>& channel, std::istream& in,
                  std::ostream& out, std::ostream& err);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_RPC_COMMANDS_H_
