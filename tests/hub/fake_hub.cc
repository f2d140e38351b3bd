#include "tests/hub/fake_hub.h"

#include <openssl/sha.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/hub/hub_cache.h"
#include "server/util/file_util.h"

namespace relserve::testing {
namespace {

std::string Hex(const unsigned char* digest, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

// Computed here with OpenSSL's one-shot functions, independently of the code under test.
std::string Sha256(const std::string& data) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  return Hex(d, sizeof(d));
}

std::string Sha1(const std::string& data) {
  unsigned char d[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d);
  return Hex(d, sizeof(d));
}

std::string GitBlobSha1(const std::string& data) {
  return Sha1(absl::StrCat("blob ", data.size(), std::string(1, '\0'), data));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void SetError(httplib::Response& res, int status, const std::string& code, const std::string& message) {
  res.status = status;
  if (!code.empty()) res.set_header("X-Error-Code", code);
  res.set_header("X-Error-Message", message);
  res.set_content(nlohmann::json({{"error", message}}).dump(), "application/json");
}

}  // namespace

struct FakeHub::Impl {
  httplib::Server hub;
  httplib::Server cdn;
  std::thread hub_thread;
  std::thread cdn_thread;
  int hub_port = 0;
  int cdn_port = 0;

  mutable std::mutex mu;
  std::map<std::string, FakeRepo> repos;
  std::map<std::string, std::string> lfs;  // sha256 -> contents
  CdnFault fault = CdnFault::kNone;
  std::vector<Request> log;
  std::atomic<bool> stopping{false};

  void Record(const std::string& server, const httplib::Request& req) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back({server, req.method, req.target, req.get_header_value("Authorization"),
                   req.get_header_value("Range")});
  }

  // The repository for a route, or an error answer. Takes the lock's place: called under mu.
  const FakeRepo* FindRepo(const std::string& repo_id, const httplib::Request& req, httplib::Response& res) {
    const auto it = repos.find(repo_id);
    if (it == repos.end()) {
      // huggingface.co: 401 to anonymous callers (a private repository looks the same), 404 otherwise.
      const bool authorized = !req.get_header_value("Authorization").empty();
      SetError(res, authorized ? 404 : 401, "RepoNotFound", absl::StrCat("Repository Not Found for url: ", req.target));
      return nullptr;
    }
    return &it->second;
  }

  // The commit a revision names, or "" after an error answer.
  std::string FindCommit(const FakeRepo& repo, const std::string& revision, httplib::Response& res) {
    if (const auto ref = repo.refs.find(revision); ref != repo.refs.end()) return ref->second;
    if (repo.commits.count(revision)) return revision;
    SetError(res, 404, "RevisionNotFound", absl::StrCat("Invalid rev id: ", revision));
    return "";
  }

  void Api(const httplib::Request& req, httplib::Response& res) {
    Record("hub", req);
    const std::string path = req.target.substr(0, req.target.find('?'));
    // /api/models/ORG/NAME/revision/REV
    const std::vector<std::string> parts = absl::StrSplit(path.substr(std::string("/api/models/").size()), '/');
    if (parts.size() != 4 || parts[2] != "revision") return SetError(res, 404, "", "no such route");
    std::lock_guard<std::mutex> lock(mu);
    const std::string repo_id = PercentDecode(parts[0]) + "/" + PercentDecode(parts[1]);
    const FakeRepo* repo = FindRepo(repo_id, req, res);
    if (repo == nullptr) return;
    const std::string revision = PercentDecode(parts[3]);
    if (!repo->renamed_to.empty()) {
      res.status = 307;
      res.set_header("Location", absl::StrCat("/api/models/", repo->renamed_to, "/revision/", parts[3]));
      return;
    }
    const std::string commit = FindCommit(*repo, revision, res);
    if (commit.empty()) return;
    nlohmann::json siblings = nlohmann::json::array();
    for (const auto& [name, file] : repo->commits.at(commit)) siblings.push_back({{"rfilename", name}});
    res.set_content(nlohmann::json({{"id", repo_id}, {"sha", commit}, {"siblings", siblings}, {"private", false}}).dump(),
                    "application/json");
  }

  void Resolve(const httplib::Request& req, httplib::Response& res) {
    Record("hub", req);
    const std::string path = req.target.substr(0, req.target.find('?'));
    // /ORG/NAME/resolve/REV/FILE...
    const std::vector<std::string> parts = absl::StrSplit(path.substr(1), '/');
    if (parts.size() < 5 || parts[2] != "resolve") return SetError(res, 404, "", "no such route");
    std::lock_guard<std::mutex> lock(mu);
    const std::string repo_id = PercentDecode(parts[0]) + "/" + PercentDecode(parts[1]);
    const FakeRepo* repo = FindRepo(repo_id, req, res);
    if (repo == nullptr) return;
    if (!repo->renamed_to.empty()) {
      res.status = 307;
      res.set_header("Location", absl::StrCat("/", repo->renamed_to, path.substr(1 + parts[0].size() + 1 + parts[1].size())));
      return;
    }
    if (repo->gated) {
      const std::string auth = req.get_header_value("Authorization");
      if (auth.empty()) return SetError(res, 401, "GatedRepo", "Access to this model is restricted. Please log in.");
      if (auth != absl::StrCat("Bearer ", kToken)) {
        return SetError(res, 403, "GatedRepo", "Access to this model is restricted and you are not in the authorized list.");
      }
    }
    const std::string commit = FindCommit(*repo, PercentDecode(parts[3]), res);
    if (commit.empty()) return;
    std::vector<std::string> file_parts;
    for (size_t i = 4; i < parts.size(); ++i) file_parts.push_back(PercentDecode(parts[i]));
    const std::string name = absl::StrJoin(file_parts, "/");
    const auto& files = repo->commits.at(commit);
    const auto it = files.find(name);
    res.set_header("X-Repo-Commit", commit);
    if (it == files.end()) return SetError(res, 404, "EntryNotFound", absl::StrCat(name, " does not exist at ", commit));
    const FakeFile& file = it->second;
    if (repo->resolve_redirect_loop) {
      res.status = 302;
      res.set_header("Location", path);
      return;
    }
    if (file.lfs) {
      const std::string sha = Sha256(file.contents);
      lfs[sha] = file.contents;
      res.status = 302;
      res.set_header("Location", absl::StrCat("http://127.0.0.1:", cdn_port, "/lfs/", sha, "?signature=not-a-secret"));
      res.set_header("X-Linked-Etag", absl::StrCat("\"", sha, "\""));
      const auto declared = repo->declared_sizes.find(name);
      if (!repo->hide_lfs_sizes) {
        res.set_header("X-Linked-Size", declared != repo->declared_sizes.end() ? std::to_string(declared->second)
                                                                               : std::to_string(file.contents.size()));
      }
      res.set_header("ETag", absl::StrCat("W/\"", GitBlobSha1("version https://git-lfs.github.com/spec/v1\n" + sha), "\""));
      return;
    }
    res.set_header("ETag", absl::StrCat("\"", GitBlobSha1(file.contents), "\""));
    res.set_content(file.contents, "application/octet-stream");
  }

  void Cdn(const httplib::Request& req, httplib::Response& res) {
    Record("cdn", req);
    const std::string path = req.target.substr(0, req.target.find('?'));
    std::string body;
    CdnFault f;
    {
      std::lock_guard<std::mutex> lock(mu);
      const auto it = lfs.find(path.substr(std::string("/lfs/").size()));
      if (it == lfs.end()) return SetError(res, 404, "", "no such object");
      body = it->second;
      f = fault;
    }
    if (f == CdnFault::kCorrupt && !body.empty()) body[body.size() / 2] ^= 0x5a;
    if (f == CdnFault::kRedirectLoop) {
      res.status = 302;
      res.set_header("Location", req.target);
      return;
    }
    if (f == CdnFault::kHugeLength) {
      auto data = std::make_shared<std::string>(std::move(body));
      res.set_content_provider(size_t{1'000'000'000'000'000}, "application/octet-stream",
                               [data](size_t offset, size_t length, httplib::DataSink& sink) {
                                 if (offset < data->size()) {
                                   sink.write(data->data() + offset, std::min(length, data->size() - offset));
                                 }
                                 return offset < data->size();
                               });
      return;
    }
    if (!req.ranges.empty() && req.ranges[0].first >= static_cast<ssize_t>(body.size())) {
      res.status = 416;  // nothing from there on
      res.set_header("Content-Range", absl::StrCat("bytes */", body.size()));
      return;
    }
    if (f == CdnFault::kStall) {
      auto data = std::make_shared<std::string>(std::move(body));
      std::atomic<bool>* stop = &stopping;
      res.set_content_provider(data->size(), "application/octet-stream",
                               [data, stop](size_t offset, size_t length, httplib::DataSink& sink) {
                                 const size_t half = data->size() / 2;
                                 if (offset < half) {
                                   sink.write(data->data() + offset, std::min(length, half - offset));
                                   return true;
                                 }
                                 for (int i = 0; i < 1200 && !*stop; ++i) {
                                   std::this_thread::sleep_for(std::chrono::milliseconds(50));
                                 }
                                 return false;
                               });
      return;
    }
    if (f == CdnFault::kTruncate) {
      auto data = std::make_shared<std::string>(std::move(body));
      res.set_content_provider(data->size(), "application/octet-stream",
                               [data](size_t offset, size_t length, httplib::DataSink& sink) {
                                 const size_t half = data->size() / 2;
                                 if (offset < half) sink.write(data->data() + offset, std::min(length, half - offset));
                                 return false;  // the connection ends here
                               });
      return;
    }
    res.set_content(body, "application/octet-stream");
  }
};

FakeHub::FakeHub() : impl_(std::make_unique<Impl>()) {
  Impl* impl = impl_.get();
  impl->hub.Get("/api/models/.*", [impl](const httplib::Request& req, httplib::Response& res) { impl->Api(req, res); });
  impl->hub.Get("/.*", [impl](const httplib::Request& req, httplib::Response& res) { impl->Resolve(req, res); });
  impl->cdn.Get("/lfs/.*", [impl](const httplib::Request& req, httplib::Response& res) { impl->Cdn(req, res); });
  impl->hub_port = impl->hub.bind_to_any_port("127.0.0.1");
  impl->cdn_port = impl->cdn.bind_to_any_port("127.0.0.1");
  impl->hub_thread = std::thread([impl] { impl->hub.listen_after_bind(); });
  impl->cdn_thread = std::thread([impl] { impl->cdn.listen_after_bind(); });
  while (!impl->hub.is_running() || !impl->cdn.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeHub::~FakeHub() {
  impl_->stopping = true;
  impl_->hub.stop();
  impl_->cdn.stop();
  impl_->hub_thread.join();
  impl_->cdn_thread.join();
}

std::string FakeHub::endpoint() const { return absl::StrCat("http://127.0.0.1:", impl_->hub_port); }
std::string FakeHub::cdn_endpoint() const { return absl::StrCat("http://127.0.0.1:", impl_->cdn_port); }

void FakeHub::AddRepo(const std::string& repo_id, FakeRepo repo) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->repos[repo_id] = std::move(repo);
}

void FakeHub::SetCdnFault(CdnFault fault) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->fault = fault;
}

std::vector<FakeHub::Request> FakeHub::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->log;
}

void FakeHub::ClearRequests() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->log.clear();
}

int FakeHub::CountRequests(const std::string& server, const std::string& prefix) const {
  int n = 0;
  for (const Request& r : requests()) n += r.server == server && absl::StartsWith(r.target, prefix);
  return n;
}

std::string FakeEtag(const FakeFile& file) { return file.lfs ? Sha256(file.contents) : GitBlobSha1(file.contents); }

std::string FakeCommitHash(const std::string& seed) { return Sha1(seed); }

std::map<std::string, FakeFile> FilesFromDirectory(const std::string& dir) {
  std::map<std::string, FakeFile> files;
  const std::vector<std::string> names = *ListFilesRecursively(dir);
  for (const std::string& name : names) {
    FakeFile f;
    f.contents = *ReadFileToString(JoinPath(dir, name));
    f.lfs = absl::EndsWith(name, ".safetensors") || absl::EndsWith(name, ".bin") || absl::EndsWith(name, ".model");
    files[name] = std::move(f);
  }
  return files;
}

std::map<std::string, FakeFile> ReferenceModelFiles() {
  const std::string data = RELSERVE_TEST_DATA_DIR;
  std::map<std::string, FakeFile> files = FilesFromDirectory(data + "/reference/deberta_v3_like");
  files["spm.model"] = {*ReadFileToString(data + "/reference/tokenizer/spm.model"), true};
  files["tokenizer_config.json"] = {R"({"do_lower_case": false, "model_max_length": 512})", false};
  return files;
}

}  // namespace relserve::testing
