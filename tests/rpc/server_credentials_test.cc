#include "server/rpc/server_credentials.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

// PEM files for MakeServerCredentials: only their framing is read here (gRPC parses them).
class ServerCredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "relserve-credentials-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Write("cert.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    Write("key.pem", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
    Write("empty.pem", "");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(path(name)) << text; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  TlsFiles Config(const std::string& cert, const std::string& key, const std::string& ca = "") {
    TlsFiles c;
    c.cert = cert.empty() ? "" : path(cert);
    c.key = key.empty() ? "" : path(key);
    c.client_ca = ca.empty() ? "" : path(ca);
    return c;
  }

  std::string dir_;
};

TEST_F(ServerCredentialsTest, PlaintextWithoutCertificate) {
  auto c = MakeServerCredentials(TlsFiles{});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(*c, nullptr);
}

TEST_F(ServerCredentialsTest, ReadablePemFilesGiveCredentials) {
  auto tls = MakeServerCredentials(Config("cert.pem", "key.pem"));
  ASSERT_TRUE(tls.ok()) << tls.status();
  EXPECT_NE(*tls, nullptr);
  auto mutual = MakeServerCredentials(Config("cert.pem", "key.pem", "cert.pem"));
  ASSERT_TRUE(mutual.ok()) << mutual.status();
}

TEST_F(ServerCredentialsTest, BadFilesNameTheirFlag) {
  struct Case {
    TlsFiles config;
    const char* message;
  };
  const std::vector<Case> cases = {
      {Config("missing.pem", "key.pem"), "--tls-cert: cannot read"},
      {Config("cert.pem", "missing.pem"), "--tls-key: cannot read"},
      {Config("cert.pem", "key.pem", "missing.pem"), "--tls-client-ca: cannot read"},
      {Config("empty.pem", "key.pem"), "--tls-cert: "},
      {Config("cert.pem", "cert.pem"), "--tls-key: "},  // a certificate where the key belongs
      {Config("cert.pem", "key.pem", "key.pem"), "--tls-client-ca: "},
  };
  for (const Case& c : cases) {
    auto r = MakeServerCredentials(c.config);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace relserve
