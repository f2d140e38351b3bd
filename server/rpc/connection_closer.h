#ifndef RELSERVE_SERVER_RPC_CONNECTION_CLOSER_H_
#define RELSERVE_SERVER_RPC_CONNECTION_CLOSER_H_

#include "absl/time/time.h"

namespace relserve {

// The last step of a drain, before grpc::Server::Shutdown.
//
// Once Shutdown has begun, gRPC's core drops every call that arrives on a connection that is
// still open (its "zombie" calls: a client that sent one before it saw the server's GOAWAY)
// and the client receives CANCELLED, not the UNAVAILABLE of every other call refused during
// the drain. So the server first stops accepting connections on `port` (the listening
// sockets are closed, see below) and ends every accepted connection on it (the write side is
// shut down: a FIN after whatever was already sent). Clients then fail calls still in transit as
// they fail on any lost connection, with UNAVAILABLE, and reconnect elsewhere. Waits until
// gRPC has closed those connections or `wait` has passed, and returns how many it ended.
//
// The sockets are gRPC's: they are found in /proc/self/fd by their local port. Connections are
// only shut down, never closed, so gRPC still owns and closes each descriptor itself. A
// listening socket is closed under a descriptor gRPC keeps: the descriptor is made a
// placeholder listening socket that nobody connects to (connection_closer.cc), so that gRPC's
// accept loop neither sees an error it would log ("Failed accept4: Invalid argument", what
// shutting the listening socket down made it log at every stop) nor a descriptor reused by
// anything else; gRPC's own shutdown then closes the placeholder.
int EndConnectionsOnPort(int port, absl::Duration wait);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_CONNECTION_CLOSER_H_
