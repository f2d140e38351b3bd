// Downloads from a Hub of the tests' own (fake_hub.h): the cache huggingface_hub expects,
// redirects, tokens, errors, resumption, checks and offline use.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/hub/blob_download.h"
#include "server/hub/hub_cache.h"
#include "server/hub/model_resolver.h"
#include "server/hub/snapshot_download.h"
#include "server/util/file_util.h"
#include "tests/hub/fake_hub.h"

namespace relserve {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::CdnFault;
using testing::FakeFile;
using testing::FakeHub;
using testing::FakeRepo;

std::string ReadLink(const std::string& path) {
  char buf[4096];
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool IsLink(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// A port nothing listens on: bound, never listened to, then closed.
int DeadPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

const std::string kRepo = "org/deberta-tiny";
const std::set<std::string> kNeeded = {"config.json", "model.safetensors", "spm.model", "tokenizer_config.json"};

class HubDownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/relserve-hub-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    cache_dir_ = tmpl;
    files_ = testing::ReferenceModelFiles();
    main_ = testing::FakeCommitHash("main");
    FakeRepo repo;
    repo.commits[main_] = files_;
    repo.refs["main"] = main_;
    hub_.AddRepo(kRepo, repo);
    settings_.endpoint = hub_.endpoint();
    settings_.cache_dir = cache_dir_;
    settings_.metadata_timeout = absl::Seconds(20);
    settings_.download_stall_timeout = absl::Seconds(20);
  }
  void TearDown() override { RemoveTree(cache_dir_); }

  absl::StatusOr<std::string> Download(const std::string& spec) {
    DownloadProgress progress(false, [this](const std::string& line) { progress_lines_ += line; });
    return ResolveModelDir(spec, settings_, &progress);
  }

  HubModelId Id(const std::string& spec) { return *ParseHubModelId(spec); }
  HubCache cache() const { return HubCache(cache_dir_); }
  std::string Snapshot(const std::string& commit) const { return cache().SnapshotDir(kRepo, commit); }
  std::string Blob(const std::string& file) const { return cache().BlobPath(kRepo, testing::FakeEtag(files_.at(file))); }

  // Every file of the snapshot (links followed or not).
  std::set<std::string> SnapshotFiles(const std::string& commit) const {
    auto files = ListFilesRecursively(Snapshot(commit));
    return files.ok() ? std::set<std::string>(files->begin(), files->end()) : std::set<std::string>{};
  }

  std::vector<std::string> IncompleteBlobs() const {
    std::vector<std::string> out;
    auto files = ListFilesRecursively(cache().RepoDir(kRepo) + "/blobs");
    if (files.ok()) {
      for (const auto& f : *files) {
        if (f.find(".incomplete") != std::string::npos) out.push_back(f);
      }
    }
    return out;
  }

  FakeHub hub_;
  std::string cache_dir_;
  std::map<std::string, FakeFile> files_;
  std::string main_;
  HubSettings settings_;
  std::string progress_lines_;
};

// The layout huggingface_hub writes and reads: refs/main holds the commit (no newline);
// snapshots/COMMIT/FILE are relative links to ../../blobs/ETAG, ETAG the sha256 of LFS files
// and the git blob sha1 of the others; only the files the model needs are fetched.
TEST_F(HubDownloadTest, FetchesWhatTheModelNeedsInHuggingFaceHubsLayout) {
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, cache_dir_ + "/models--org--deberta-tiny/snapshots/" + main_);
  EXPECT_EQ(*ReadFileToString(cache_dir_ + "/models--org--deberta-tiny/refs/main"), main_);
  EXPECT_EQ(SnapshotFiles(main_), kNeeded);  // no README.md, inputs.json, expected.safetensors
  for (const std::string& file : kNeeded) {
    const std::string link = *dir + "/" + file;
    ASSERT_TRUE(IsLink(link)) << file;
    EXPECT_EQ(ReadLink(link), "../../blobs/" + testing::FakeEtag(files_.at(file))) << file;
    EXPECT_EQ(*ReadFileToString(link), files_.at(file).contents) << file;
  }
  EXPECT_EQ(testing::FakeEtag(files_.at("model.safetensors")).size(), 64u);  // LFS: sha256
  EXPECT_EQ(testing::FakeEtag(files_.at("config.json")).size(), 40u);        // git: sha1
  EXPECT_TRUE(IncompleteBlobs().empty());
  // The LFS files came from the CDN, the others from the resolve route.
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/"), 2);
  EXPECT_THAT(progress_lines_, AllOf(HasSubstr("downloading org/deberta-tiny: model.safetensors (294.9 kB)"),
                                     HasSubstr("downloaded org/deberta-tiny: model.safetensors: 294.9 kB")));
}

TEST_F(HubDownloadTest, NestedFilesLinkWithOneMoreLevelUp) {
  std::map<std::string, FakeFile> files = files_;
  files["modules.json"] = {R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])",
                           false};
  files["1_Pooling/config.json"] = {R"({"word_embedding_dimension": 32, "pooling_mode_mean_tokens": true})", false};
  FakeRepo repo;
  repo.commits[main_] = files;
  repo.refs["main"] = main_;
  hub_.AddRepo(kRepo, repo);
  ASSERT_TRUE(Download(kRepo).ok());
  const std::string link = Snapshot(main_) + "/1_Pooling/config.json";
  EXPECT_EQ(ReadLink(link), "../../../blobs/" + testing::FakeEtag(files.at("1_Pooling/config.json")));
  EXPECT_EQ(*ReadFileToString(link), files.at("1_Pooling/config.json").contents);
}

// The token goes to the endpoint, never to the CDN that LFS files redirect to.
TEST_F(HubDownloadTest, TheTokenStaysWithTheEndpoint) {
  settings_.token = FakeHub::kToken;
  settings_.token_source = "HF_TOKEN";
  ASSERT_TRUE(Download(kRepo).ok());
  int cdn = 0, hub = 0;
  for (const FakeHub::Request& r : hub_.requests()) {
    if (r.server == "cdn") {
      ++cdn;
      EXPECT_EQ(r.authorization, "") << r.target;
    } else {
      ++hub;
      EXPECT_EQ(r.authorization, std::string("Bearer ") + FakeHub::kToken) << r.target;
    }
  }
  EXPECT_EQ(cdn, 2);
  EXPECT_GT(hub, 4);
}

TEST_F(HubDownloadTest, ASecondRunAsksForTheRevisionOnly) {
  ASSERT_TRUE(Download(kRepo).ok());
  hub_.ClearRequests();
  ASSERT_TRUE(Download(kRepo).ok());
  ASSERT_EQ(hub_.requests().size(), 1u);
  EXPECT_EQ(hub_.requests()[0].target, "/api/models/org/deberta-tiny/revision/main");
}

// A branch, a tag-like name and a full commit hash; a blob shared between commits is fetched
// once; a commit whose snapshot is complete needs no network.
TEST_F(HubDownloadTest, RevisionsByBranchTagAndCommitHash) {
  const std::string old_commit = testing::FakeCommitHash("v1.0");
  std::map<std::string, FakeFile> old_files = files_;
  old_files["config.json"].contents.insert(1, "\"note\": \"v1.0\", ");
  FakeRepo repo;
  repo.commits[main_] = files_;
  repo.commits[old_commit] = old_files;
  repo.refs["main"] = main_;
  repo.refs["v1.0"] = old_commit;
  hub_.AddRepo(kRepo, repo);

  absl::StatusOr<std::string> tagged = Download(kRepo + "@v1.0");
  ASSERT_TRUE(tagged.ok()) << tagged.status();
  EXPECT_EQ(*tagged, Snapshot(old_commit));
  EXPECT_EQ(*cache().ReadRef(kRepo, "v1.0"), old_commit);
  EXPECT_THAT(*ReadFileToString(*tagged + "/config.json"), HasSubstr("v1.0"));
  EXPECT_FALSE(FileExists(cache().RefPath(kRepo, "main")));

  hub_.ClearRequests();
  absl::StatusOr<std::string> pinned = Download(kRepo + "@" + main_);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(*pinned, Snapshot(main_));
  EXPECT_THAT(*ReadFileToString(*pinned + "/config.json"), Not(HasSubstr("v1.0")));
  EXPECT_FALSE(FileExists(cache().RefPath(kRepo, main_)));  // no ref for a commit hash
  EXPECT_FALSE(FileExists(cache().RefPath(kRepo, "main")));
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/"), 0);  // the weights and spm.model are shared blobs
  EXPECT_EQ(hub_.CountRequests("hub", "/org/deberta-tiny/resolve/" + main_ + "/config.json"), 2);  // HEAD, GET

  hub_.ClearRequests();
  ASSERT_TRUE(Download(kRepo + "@" + main_).ok());
  EXPECT_TRUE(hub_.requests().empty());

  ASSERT_TRUE(Download(kRepo + "@main").ok());
  EXPECT_EQ(*cache().ReadRef(kRepo, "main"), main_);
}

TEST_F(HubDownloadTest, RenamedRepositoryFollowsRelativeRedirects) {
  FakeRepo renamed;
  renamed.renamed_to = kRepo;
  hub_.AddRepo("old-org/deberta-tiny", renamed);
  absl::StatusOr<std::string> dir = Download("old-org/deberta-tiny");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, cache_dir_ + "/models--old-org--deberta-tiny/snapshots/" + main_);
  EXPECT_EQ(*ReadFileToString(*dir + "/config.json"), files_.at("config.json").contents);
  EXPECT_GT(hub_.CountRequests("hub", "/org/deberta-tiny/resolve/"), 0);
}

TEST_F(HubDownloadTest, AGatedRepositoryNeedsAToken) {
  FakeRepo gated;
  gated.commits[main_] = files_;
  gated.refs["main"] = main_;
  gated.gated = true;
  hub_.AddRepo("org/gated", gated);

  absl::StatusOr<std::string> dir = Download("org/gated");
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnauthenticated) << dir.status();
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr("org/gated is a gated repository"), HasSubstr("set HF_TOKEN"), HasSubstr("/org/gated")));

  settings_.token = "hf_someone_else";
  settings_.token_source = "HF_TOKEN";
  dir = Download("org/gated");
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kPermissionDenied) << dir.status();
  EXPECT_THAT(dir.status().message(), AllOf(HasSubstr("token from HF_TOKEN has no access"), Not(HasSubstr("hf_someone_else"))));

  settings_.token = FakeHub::kToken;
  dir = Download("org/gated");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*ReadFileToString(*dir + "/model.safetensors"), files_.at("model.safetensors").contents);
}

TEST_F(HubDownloadTest, UnknownRepositoryOrRevisionIsNotFound) {
  absl::StatusOr<std::string> dir = Download("org/nothing-here");
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kNotFound) << dir.status();
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr("repository org/nothing-here not found on " + hub_.endpoint()), HasSubstr("private or gated"),
                    HasSubstr("HF_TOKEN"), HasSubstr("no directory named org/nothing-here exists either")));
  settings_.token = FakeHub::kToken;  // the Hub answers 404 rather than 401 then
  dir = Download("org/nothing-here");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kNotFound) << dir.status();

  dir = Download(kRepo + "@no-such-branch");
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kNotFound) << dir.status();
  EXPECT_THAT(dir.status().message(), HasSubstr("revision \"no-such-branch\" not found in org/deberta-tiny"));
  EXPECT_FALSE(IsDirectory(cache().RepoDir(kRepo) + "/snapshots"));
}

TEST_F(HubDownloadTest, ARepositoryWithoutWeightsIsRefusedBeforeDownloading) {
  std::map<std::string, FakeFile> files = files_;
  files.erase("model.safetensors");
  files["tf_model.h5"] = {"not read", true};
  FakeRepo repo;
  repo.commits[main_] = files;
  repo.refs["main"] = main_;
  hub_.AddRepo(kRepo, repo);
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kNotFound) << dir.status();
  EXPECT_THAT(dir.status().message(), AllOf(HasSubstr(main_), HasSubstr("no weights"), HasSubstr("pytorch_model.bin")));
  EXPECT_EQ(hub_.CountRequests("cdn", "/"), 0);
}

// A body cut short is an error that keeps what arrived; the next run asks for the rest with
// Range and completes the file, checked.
TEST_F(HubDownloadTest, ATruncatedDownloadResumesWithRange) {
  hub_.SetCdnFault(CdnFault::kTruncate);
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnavailable) << dir.status();
  EXPECT_THAT(dir.status().message(), AllOf(HasSubstr("spm.model"), HasSubstr("the next attempt resumes")));
  const std::string spm = files_.at("spm.model").contents;
  const std::string incomplete = cache().IncompletePath(kRepo, testing::FakeEtag(files_.at("spm.model")));
  ASSERT_EQ(*ReadFileToString(incomplete), spm.substr(0, spm.size() / 2));
  EXPECT_FALSE(FileExists(Blob("spm.model")));
  EXPECT_FALSE(IsLink(Snapshot(main_) + "/spm.model"));
  EXPECT_FALSE(FileExists(cache().RefPath(kRepo, "main")));  // the snapshot is not complete
  EXPECT_THAT(progress_lines_, HasSubstr("download of org/deberta-tiny: spm.model stopped after"));

  hub_.SetCdnFault(CdnFault::kNone);
  hub_.ClearRequests();
  dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*ReadFileToString(*dir + "/spm.model"), spm);
  EXPECT_TRUE(IncompleteBlobs().empty());
  bool resumed = false;
  for (const FakeHub::Request& r : hub_.requests()) {
    if (r.server == "cdn" && r.range == "bytes=" + std::to_string(spm.size() / 2) + "-") resumed = true;
  }
  EXPECT_TRUE(resumed);
  EXPECT_THAT(progress_lines_, HasSubstr("resuming after"));
}

// A download that receives nothing for HF_HUB_DOWNLOAD_TIMEOUT fails, resumably.
TEST_F(HubDownloadTest, AStalledDownloadTimesOutResumably) {
  hub_.SetCdnFault(CdnFault::kStall);
  settings_.download_stall_timeout = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnavailable) << dir.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_THAT(dir.status().message(), HasSubstr("no data for 1s"));
  const std::string spm = files_.at("spm.model").contents;
  EXPECT_EQ(*ReadFileToString(cache().IncompletePath(kRepo, testing::FakeEtag(files_.at("spm.model")))),
            spm.substr(0, spm.size() / 2));
}

// An .incomplete file that already holds every byte (an attempt stopped before its rename) is
// checked, not fetched again; one with the wrong bytes is deleted and fetched anew.
TEST_F(HubDownloadTest, ACompleteIncompleteFileIsCheckedNotFetched) {
  const std::string spm = files_.at("spm.model").contents;
  const std::string incomplete = cache().IncompletePath(kRepo, testing::FakeEtag(files_.at("spm.model")));
  ASSERT_TRUE(MakeDirectories(cache().RepoDir(kRepo) + "/blobs").ok());
  ASSERT_TRUE(WriteStringToFile(incomplete, spm).ok());
  ASSERT_TRUE(Download(kRepo).ok());
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/" + testing::FakeEtag(files_.at("spm.model"))), 0);
  EXPECT_EQ(*ReadFileToString(Blob("spm.model")), spm);

  RemoveTree(cache_dir_);
  ASSERT_TRUE(MakeDirectories(cache().RepoDir(kRepo) + "/blobs").ok());
  std::string wrong = spm;
  wrong[10] ^= 1;
  ASSERT_TRUE(WriteStringToFile(incomplete, wrong).ok());
  absl::StatusOr<std::string> dir = Download(kRepo);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kDataLoss) << dir.status();
  EXPECT_FALSE(FileExists(incomplete));
  ASSERT_TRUE(Download(kRepo).ok());
  EXPECT_EQ(*ReadFileToString(Blob("spm.model")), spm);
}

// Without sizes from the Hub, a complete .incomplete file asks for the bytes after its end
// (416: there are none) and is then checked against its sha256.
TEST_F(HubDownloadTest, UnknownSizesStillResumeAndCheck) {
  FakeRepo repo;
  repo.commits[main_] = files_;
  repo.refs["main"] = main_;
  repo.hide_lfs_sizes = true;
  hub_.AddRepo(kRepo, repo);
  const std::string spm = files_.at("spm.model").contents;
  const std::string incomplete = cache().IncompletePath(kRepo, testing::FakeEtag(files_.at("spm.model")));
  ASSERT_TRUE(MakeDirectories(cache().RepoDir(kRepo) + "/blobs").ok());
  ASSERT_TRUE(WriteStringToFile(incomplete, spm).ok());
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*ReadFileToString(*dir + "/spm.model"), spm);
  EXPECT_EQ(*ReadFileToString(*dir + "/model.safetensors"), files_.at("model.safetensors").contents);

  hub_.SetCdnFault(CdnFault::kTruncate);
  RemoveTree(cache_dir_);
  EXPECT_EQ(Download(kRepo).status().code(), absl::StatusCode::kUnavailable);
  hub_.SetCdnFault(CdnFault::kNone);
  dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*ReadFileToString(*dir + "/spm.model"), spm);
}

// Contents that do not match the sha256 the Hub reports are deleted: nothing corrupt stays in
// blobs/ or snapshots/, and the next run fetches the file anew.
TEST_F(HubDownloadTest, AWrongChecksumLeavesNothingCorrupt) {
  hub_.SetCdnFault(CdnFault::kCorrupt);
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kDataLoss) << dir.status();
  const std::string etag = testing::FakeEtag(files_.at("spm.model"));
  EXPECT_THAT(dir.status().message(), AllOf(HasSubstr("spm.model"), HasSubstr("sha256"), HasSubstr("the Hub says " + etag)));
  EXPECT_FALSE(FileExists(Blob("spm.model")));
  EXPECT_TRUE(IncompleteBlobs().empty());
  EXPECT_FALSE(IsLink(Snapshot(main_) + "/spm.model"));
  for (const std::string& f : SnapshotFiles(main_)) EXPECT_TRUE(FileExists(Snapshot(main_) + "/" + f)) << f;

  hub_.SetCdnFault(CdnFault::kNone);
  dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*ReadFileToString(*dir + "/spm.model"), files_.at("spm.model").contents);
}

// Redirect loops (issue 20) on the CDN, the resolve route and the API: each is named as such,
// not as "HTTP 302" or a missing ETag, and leaves no empty .incomplete file behind.
TEST_F(HubDownloadTest, RedirectLoopsAreNamedAndLeaveNothingBehind) {
  hub_.SetCdnFault(CdnFault::kRedirectLoop);
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnavailable) << dir.status();
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr("downloading spm.model of org/deberta-tiny: too many redirects (10) fetching " +
                              hub_.cdn_endpoint() + "/lfs/" + testing::FakeEtag(files_.at("spm.model"))),
                    HasSubstr("nothing was received"), Not(HasSubstr("HTTP 302")), Not(HasSubstr("signature"))));
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/"), 11);
  EXPECT_TRUE(IncompleteBlobs().empty());
  hub_.SetCdnFault(CdnFault::kNone);
  ASSERT_TRUE(Download(kRepo).ok());

  FakeRepo looping;
  looping.commits[main_] = files_;
  looping.refs["main"] = main_;
  looping.resolve_redirect_loop = true;
  hub_.AddRepo("org/looping", looping);
  dir = Download("org/looping");
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnavailable) << dir.status();
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr("too many redirects (10) fetching " + hub_.endpoint() + "/org/looping/resolve/" + main_ +
                              "/config.json"),
                    Not(HasSubstr("ETag"))));

  FakeRepo self;
  self.renamed_to = "org/self";
  hub_.AddRepo("org/self", self);
  dir = Download("org/self");
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnavailable) << dir.status();
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr("too many redirects (10) fetching " + hub_.endpoint() + "/api/models/org/self/revision/main"),
                    Not(HasSubstr("HTTP 307"))));
}

// A declared size no disk holds (issue 20: 10^15 bytes) is refused before the download starts,
// whether the Hub declares it (X-Linked-Size) or only the download does (Content-Length).
TEST_F(HubDownloadTest, AHugeDeclaredSizeIsRefusedBeforeDownloading) {
  const std::string blobs = cache().RepoDir(kRepo) + "/blobs";
  const auto refused = [&](const absl::StatusOr<std::string>& dir) {
    ASSERT_EQ(dir.status().code(), absl::StatusCode::kResourceExhausted) << dir.status();
    EXPECT_THAT(dir.status().message(),
                AllOf(HasSubstr("cannot download spm.model of org/deberta-tiny: it needs 1000000000000000 bytes"),
                      HasSubstr("the filesystem of " + blobs + " has "), HasSubstr(" free")));
    EXPECT_TRUE(IncompleteBlobs().empty());
    EXPECT_FALSE(FileExists(Blob("spm.model")));
  };
  FakeRepo repo;
  repo.commits[main_] = files_;
  repo.refs["main"] = main_;
  repo.declared_sizes["spm.model"] = 1'000'000'000'000'000;
  hub_.AddRepo(kRepo, repo);
  refused(Download(kRepo));
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/"), 0);

  repo.declared_sizes.clear();
  repo.hide_lfs_sizes = true;
  hub_.AddRepo(kRepo, repo);
  hub_.SetCdnFault(CdnFault::kHugeLength);
  refused(Download(kRepo));

  hub_.SetCdnFault(CdnFault::kNone);
  ASSERT_TRUE(Download(kRepo).ok());
}

TEST_F(HubDownloadTest, OfflineACompleteCacheNeedsNoNetwork) {
  ASSERT_TRUE(Download(kRepo).ok());
  hub_.ClearRequests();
  settings_.offline = true;
  settings_.offline_source = "--offline";
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, Snapshot(main_));
  dir = Download(kRepo + "@" + main_);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(HubDownloadTest, OfflineAMissingFileIsNamed) {
  settings_.offline = true;
  settings_.offline_source = "HF_HUB_OFFLINE";
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dir.status().message(), AllOf(HasSubstr("org/deberta-tiny is not in the cache " + cache_dir_),
                                            HasSubstr("offline (HF_HUB_OFFLINE)"), HasSubstr("relserve-model download")));

  settings_.offline = false;
  ASSERT_TRUE(Download(kRepo).ok());
  settings_.offline = true;
  ASSERT_EQ(unlink(Blob("model.safetensors").c_str()), 0);
  dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dir.status().message(),
              AllOf(HasSubstr("links to blobs that are missing: model.safetensors -> ../../blobs/"), HasSubstr(main_)));

  ASSERT_EQ(unlink((Snapshot(main_) + "/config.json").c_str()), 0);
  dir = Download(kRepo);
  EXPECT_THAT(dir.status().message(), HasSubstr("no config.json"));

  dir = Download(kRepo + "@v2");
  EXPECT_THAT(dir.status().message(), HasSubstr("refs/v2"));
  hub_.ClearRequests();
  dir = Download(kRepo);
  EXPECT_TRUE(hub_.requests().empty());

  // Online again, the missing pieces are fetched.
  settings_.offline = false;
  ASSERT_TRUE(Download(kRepo).ok());
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/"), 1);
}

TEST_F(HubDownloadTest, AnUnreachableHubFallsBackToACompleteCache) {
  settings_.endpoint = "http://127.0.0.1:" + std::to_string(DeadPort());
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_EQ(dir.status().code(), absl::StatusCode::kUnavailable) << dir.status();
  EXPECT_THAT(dir.status().message(), AllOf(HasSubstr(settings_.endpoint), HasSubstr("the cache cannot stand in")));

  settings_.endpoint = hub_.endpoint();
  ASSERT_TRUE(Download(kRepo).ok());
  settings_.endpoint = "http://127.0.0.1:" + std::to_string(DeadPort());
  dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, Snapshot(main_));
}

TEST_F(HubDownloadTest, ShardsAndSentenceTransformersModules) {
  std::map<std::string, FakeFile> files = files_;
  files.erase("model.safetensors");
  files["model.safetensors.index.json"] = {
      R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors",
          "c": "model-00001-of-00002.safetensors"}})",
      false};
  files["model-00001-of-00002.safetensors"] = {"shard one", true};
  files["model-00002-of-00002.safetensors"] = {"shard two", true};
  files["pytorch_model.bin"] = {"not needed beside safetensors", true};
  files["modules.json"] = {R"([{"path": "", "type": "sentence_transformers.models.Transformer"},
      {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
      {"path": "2_Dense", "type": "sentence_transformers.models.Dense"},
      {"path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}])",
                           false};
  files["sentence_bert_config.json"] = {R"({"max_seq_length": 128})", false};
  files["1_Pooling/config.json"] = {"{}", false};
  files["2_Dense/config.json"] = {"{}", false};
  files["2_Dense/model.safetensors"] = {"dense", true};
  files["2_Dense/pytorch_model.bin"] = {"dense as pickle", true};
  files["onnx/model.onnx"] = {"not needed", true};
  FakeRepo repo;
  repo.commits[main_] = files;
  repo.refs["main"] = main_;
  hub_.AddRepo(kRepo, repo);
  absl::StatusOr<std::string> dir = Download(kRepo);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(SnapshotFiles(main_),
            (std::set<std::string>{"config.json", "spm.model", "tokenizer_config.json", "modules.json",
                                   "sentence_bert_config.json", "1_Pooling/config.json", "2_Dense/config.json",
                                   "2_Dense/model.safetensors", "model.safetensors.index.json",
                                   "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}));
}

// Two downloads of one model at once (replicas sharing a cache): each blob is fetched once.
TEST_F(HubDownloadTest, ConcurrentDownloadsFetchEachBlobOnce) {
  absl::StatusOr<std::string> a, b;
  std::thread t1([&] { a = Download(kRepo); });
  std::thread t2([&] { b = Download(kRepo); });
  t1.join();
  t2.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(hub_.CountRequests("cdn", "/lfs/" + testing::FakeEtag(files_.at("model.safetensors"))), 1);
  EXPECT_EQ(*ReadFileToString(*a + "/model.safetensors"), files_.at("model.safetensors").contents);
}

// A path that exists is a path, even when it reads as a Hub id.
TEST_F(HubDownloadTest, AnExistingPathWins) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(cache_dir_.c_str()), 0);
  ASSERT_TRUE(MakeDirectories("org/deberta-tiny").ok());
  EXPECT_FALSE(NamesHubModel(kRepo));
  absl::StatusOr<std::string> dir = Download(kRepo);
  EXPECT_EQ(DefaultModelName(kRepo), "deberta-tiny");
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(*dir, kRepo);
  EXPECT_TRUE(hub_.requests().empty());
  EXPECT_TRUE(NamesHubModel(kRepo + "@v1"));
  // A Hub id is served as org/repo (what TEI, Infinity and vLLM report), "repo" accepted too.
  EXPECT_EQ(DefaultModelName(kRepo + "@v1"), "org/deberta-tiny");
  EXPECT_EQ(ModelNameAliases("org/deberta-tiny", kRepo + "@v1"), std::vector<std::string>{"deberta-tiny"});
  EXPECT_EQ(ModelNameAliases("tiny", kRepo), (std::vector<std::string>{"org/deberta-tiny", "deberta-tiny"}));
  EXPECT_EQ(DefaultModelName("/models/default"), "default");
  EXPECT_TRUE(ModelNameAliases("default", "/models/default").empty());
  // Not a Hub id and not a path: left for the engine to report.
  dir = Download("/no/such/model/dir");
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(*dir, "/no/such/model/dir");
}

TEST_F(HubDownloadTest, CancellationStopsTheDownload) {
  settings_.cancelled = [] { return true; };
  absl::StatusOr<std::string> dir = Download(kRepo);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kCancelled) << dir.status();
}

TEST(HexDigestTest, KnownValues) {
  // `printf 'hello\n' | git hash-object --stdin` and `printf abc | sha256sum`.
  EXPECT_EQ(HexDigest("git-sha1", "hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_EQ(HexDigest("sha256", "abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace relserve
