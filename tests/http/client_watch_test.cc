// ClientWatch finds a connection's socket by its addresses and sees its peer close.
#include "server/http/client_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace relserve {
namespace {

int Port(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (peer) {
    getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len);
  } else {
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  }
  return ntohs(a.sin_port);
}

TEST(ClientWatchTest, FindsTheAcceptedSocketAndSeesThePeerClose) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  addr.sin_port = htons(static_cast<uint16_t>(Port(listener, false)));
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);

  const int local_port = Port(accepted, false), remote_port = Port(accepted, true);
  EXPECT_EQ(FindConnectedSocket("127.0.0.1", remote_port, local_port), accepted);
  EXPECT_EQ(FindConnectedSocket("127.0.0.2", remote_port, local_port), -1);
  EXPECT_EQ(FindConnectedSocket("127.0.0.1", remote_port + 1, local_port), -1);

  ClientWatch watch("127.0.0.1", remote_port, local_port);
  EXPECT_FALSE(watch.Gone());
  ASSERT_EQ(write(client, "GET", 3), 3);  // unread request bytes are not a disconnect
  EXPECT_FALSE(watch.Gone());
  close(client);
  EXPECT_TRUE(watch.Gone());
  EXPECT_FALSE(ClientWatch("127.0.0.1", 1, 1).Gone());  // no such connection: not gone
  close(accepted);
  close(listener);
}

}  // namespace
}  // namespace relserve
