#include "server/hub/hub_settings.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<HubSettings> FromMap(const std::map<std::string, std::string>& env) {
  return HubSettingsFromEnvironment([&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(HubSettingsTest, DefaultsAreHuggingFaceHubs) {
  absl::StatusOr<HubSettings> s = FromMap({{"HOME", "/home/u"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->endpoint, "https://huggingface.co");
  EXPECT_EQ(s->cache_dir, "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(s->token, "");
  EXPECT_FALSE(s->offline);
  EXPECT_EQ(s->metadata_timeout, absl::Seconds(10));
}

TEST(HubSettingsTest, CacheDirectoryPrecedence) {
  EXPECT_EQ(FromMap({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/xdg"}})->cache_dir, "/xdg/huggingface/hub");
  EXPECT_EQ(FromMap({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/xdg"}, {"HF_HOME", "~/hf"}})->cache_dir, "/h/hf/hub");
  EXPECT_EQ(FromMap({{"HF_HOME", "/hf"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}})->cache_dir, "/legacy");
  EXPECT_EQ(FromMap({{"HF_HOME", "/hf"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}, {"HF_HUB_CACHE", "/cache"}})->cache_dir,
            "/cache");
}

TEST(HubSettingsTest, TokenEndpointAndOffline) {
  absl::StatusOr<HubSettings> s = FromMap({{"HF_TOKEN", " hf_abc\n"},
                                           {"HUGGING_FACE_HUB_TOKEN", "hf_old"},
                                           {"HF_ENDPOINT", "http://mirror.local:8080/"},
                                           {"HF_HUB_OFFLINE", "true"},
                                           {"HF_HUB_ETAG_TIMEOUT", "2.5"},
                                           {"HF_HUB_DOWNLOAD_TIMEOUT", "30"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->token, "hf_abc");
  EXPECT_EQ(s->token_source, "HF_TOKEN");
  EXPECT_EQ(s->endpoint, "http://mirror.local:8080");
  EXPECT_TRUE(s->offline);
  EXPECT_EQ(s->offline_source, "HF_HUB_OFFLINE");
  EXPECT_EQ(s->metadata_timeout, absl::Milliseconds(2500));
  EXPECT_EQ(s->download_stall_timeout, absl::Seconds(30));
  s = FromMap({{"HUGGING_FACE_HUB_TOKEN", "hf_old"}, {"HF_HUB_OFFLINE", "0"}});
  EXPECT_EQ(s->token, "hf_old");
  EXPECT_EQ(s->token_source, "HUGGING_FACE_HUB_TOKEN");
  EXPECT_FALSE(s->offline);
}

TEST(HubSettingsTest, TokenFileOfHuggingfaceCliLogin) {
  char tmpl[] = "/tmp/relserve-hf-home-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string home = tmpl;
  ASSERT_TRUE(WriteStringToFile(home + "/token", "hf_from_file\n").ok());
  absl::StatusOr<HubSettings> s = FromMap({{"HF_HOME", home}});
  EXPECT_EQ(s->token, "hf_from_file");
  EXPECT_EQ(s->token_source, "the token file " + home + "/token");
  EXPECT_EQ(FromMap({{"HF_HOME", home}, {"HF_TOKEN", "hf_env"}})->token, "hf_env");
  EXPECT_EQ(FromMap({{"HF_HOME", home}, {"HF_TOKEN_PATH", home + "/none"}})->token, "");
  RemoveTree(home);
}

TEST(HubSettingsTest, BadValuesNameTheVariable) {
  const std::pair<std::map<std::string, std::string>, const char*> cases[] = {
      {{{"HF_HUB_OFFLINE", "maybe"}}, "HF_HUB_OFFLINE: \"maybe\" is not one of"},
      {{{"HF_ENDPOINT", "huggingface.co"}}, "HF_ENDPOINT: \"huggingface.co\" is not an http:// or https:// address"},
      {{{"HF_HUB_ETAG_TIMEOUT", "-1"}}, "HF_HUB_ETAG_TIMEOUT: \"-1\" is not a number of seconds"},
      {{{"HF_HUB_DOWNLOAD_TIMEOUT", "soon"}}, "HF_HUB_DOWNLOAD_TIMEOUT: \"soon\""},
  };
  for (const auto& [env, message] : cases) {
    absl::StatusOr<HubSettings> s = FromMap(env);
    ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << message;
    EXPECT_THAT(s.status().message(), HasSubstr(message));
  }
}

}  // namespace
}  // namespace relserve
