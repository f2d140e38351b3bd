#include "client/client_channel.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve::client {
namespace {

using ::testing::HasSubstr;

std::string PolicyFor(const std::string& target, const std::string& choice = "auto") {
  ConnectionOptions o;
  o.target = target;
  o.load_balancing = choice;
  return LoadBalancingPolicyFor(o);
}

TEST(ClientChannelTest, RoundRobinForTargetsThatNameSeveralServers) {
  EXPECT_EQ(PolicyFor("dns:///relserve-headless.default.svc.cluster.local:50051"), "round_robin");
  EXPECT_EQ(PolicyFor("dns://10.0.0.10/relserve:50051"), "round_robin");
  EXPECT_EQ(PolicyFor("ipv4:127.0.0.1:50051,127.0.0.1:50052"), "round_robin");
  EXPECT_EQ(PolicyFor("ipv6:[::1]:50051,[::1]:50052"), "round_robin");
  EXPECT_EQ(PolicyFor("127.0.0.1:50051"), "pick_first");
  EXPECT_EQ(PolicyFor("relserve:50051"), "pick_first");
  EXPECT_EQ(PolicyFor("ipv4:127.0.0.1:50051"), "pick_first");
  EXPECT_EQ(PolicyFor("unix:/run/relserve.sock"), "pick_first");
  EXPECT_EQ(PolicyFor("relserve:50051", "round_robin"), "round_robin");
  EXPECT_EQ(PolicyFor("dns:///relserve:50051", "pick_first"), "pick_first");
}

TEST(ClientChannelTest, PlaintextAndTlsChannels) {
  ConnectionOptions o;
  auto plain = CreateClientChannel(o);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(*plain, nullptr);
  o.tls = true;  // the system's roots
  auto tls = CreateClientChannel(o);
  ASSERT_TRUE(tls.ok()) << tls.status();
}

TEST(ClientChannelTest, UnreadableFilesNameTheirFlag) {
  ConnectionOptions o;
  o.tls = true;
  o.ca_cert = "/nonexistent/ca.pem";
  auto r = CreateClientChannel(o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("--ca-cert: cannot read /nonexistent/ca.pem"));
  o.ca_cert = "";
  o.client_cert = "/nonexistent/client.pem";
  o.client_key = "/nonexistent/client.key";
  EXPECT_THAT(std::string(CreateClientChannel(o).status().message()), HasSubstr("--client-cert"));
}

}  // namespace
}  // namespace relserve::client
