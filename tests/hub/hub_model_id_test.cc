#include "server/hub/hub_model_id.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

TEST(HubModelIdTest, RepositoryAndRevision) {
  absl::StatusOr<HubModelId> id = ParseHubModelId("microsoft/deberta-v3-base");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->repo_id, "microsoft/deberta-v3-base");
  EXPECT_EQ(id->revision, "main");
  EXPECT_FALSE(id->revision_given);
  EXPECT_EQ(id->ToString(), "microsoft/deberta-v3-base");

  id = ParseHubModelId("BAAI/bge_reranker.v2@refs/pr/12");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->repo_id, "BAAI/bge_reranker.v2");
  EXPECT_EQ(id->revision, "refs/pr/12");
  EXPECT_EQ(id->ToString(), "BAAI/bge_reranker.v2@refs/pr/12");

  id = ParseHubModelId("org/repo@0123456789abcdef0123456789abcdef01234567");
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(IsCommitHash(id->revision));
}

TEST(HubModelIdTest, WhatIsNotAHubIdSaysWhy) {
  const std::pair<const char*, const char*> cases[] = {
      {"bert-base-uncased", "no '/' between organisation and repository"},
      {"/models/default", "more than one '/'"},
      {"/repo", "the organisation name is empty"},
      {"./org/repo", "more than one '/'"},
      {"models/a/b", "more than one '/'"},
      {"org/re po", "has a character other than"},
      {"org/-repo", "starts or ends with '-' or '.'"},
      {"org/repo.", "starts or ends with '-' or '.'"},
      {"org/re--po", "contains \"--\" or \"..\""},
      {"org/repo@", "the revision after '@' is empty"},
      {"org/repo@../../etc", "the revision \"../../etc\" has an empty"},
      {"org/repo@/abs", "a leading '/'"},
      {"org/repo@a//b", "has an empty"},
  };
  for (const auto& [spec, why] : cases) {
    absl::StatusOr<HubModelId> id = ParseHubModelId(spec);
    ASSERT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(id.status().message(), HasSubstr(why)) << spec;
  }
  EXPECT_FALSE(ParseHubModelId("o/" + std::string(95, 'r')).ok());
  EXPECT_TRUE(ParseHubModelId("o/" + std::string(94, 'r')).ok());
}

TEST(HubModelIdTest, CommitHashesAndSafePaths) {
  EXPECT_TRUE(IsCommitHash("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("0123456789ABCDEF0123456789abcdef01234567"));
  EXPECT_FALSE(IsCommitHash("0123456"));
  EXPECT_FALSE(IsCommitHash("main"));
  EXPECT_TRUE(IsSafeRepoPath("1_Pooling/config.json"));
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../b", "a//b", "a/./b", "a\\b", "a\nb", "a/"}) {
    EXPECT_FALSE(IsSafeRepoPath(bad)) << bad;
  }
}

}  // namespace
}  // namespace relserve
