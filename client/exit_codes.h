#ifndef RELSERVE_CLIENT_EXIT_CODES_H_
#define RELSERVE_CLIENT_EXIT_CODES_H_

namespace relserve::client {

// relserve-client's exit status, so that scripts can tell a server's answer from their own
// mistake.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;  // an RPC failed (a gRPC status), or health is not SERVING
inline constexpr int kExitUsage = 2;     // bad flags, unreadable files, malformed input lines

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_EXIT_CODES_H_
