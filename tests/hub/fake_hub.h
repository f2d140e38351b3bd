#ifndef RELSERVE_TESTS_HUB_FAKE_HUB_H_
#define RELSERVE_TESTS_HUB_FAKE_HUB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace relserve::testing {

// One file of a commit. LFS files are answered as the Hub answers them: the resolve route
// redirects (302) to the CDN with X-Linked-Etag (the sha256) and X-Linked-Size; other files
// come from the resolve route itself with their git blob sha1 as ETag.
struct FakeFile {
  std::string contents;
  bool lfs = false;
};

struct FakeRepo {
  std::map<std::string, std::map<std::string, FakeFile>> commits;  // commit hash -> path -> file
  std::map<std::string, std::string> refs;                         // branch or tag -> commit hash
  // Gated: the API answers, the files need "Authorization: Bearer <FakeHub::kToken>" (401
  // GatedRepo without a token, 403 with another one).
  bool gated = false;
  // Renamed: every route answers 307 with a relative Location on this repository id.
  std::string renamed_to;
  // LFS redirects without X-Linked-Size (a mirror that does not send it): sizes are unknown.
  bool hide_lfs_sizes = false;
  // LFS path -> the X-Linked-Size sent instead of the real one.
  std::map<std::string, int64_t> declared_sizes;
  // The resolve route answers 302 with a relative Location on itself (and X-Repo-Commit): a
  // redirect loop.
  bool resolve_redirect_loop = false;
};

// What the CDN does to the LFS bodies it serves.
enum class CdnFault {
  kNone,
  kTruncate,  // announces the whole length, sends half, closes the connection
  kCorrupt,   // the right length with one byte changed
  kStall,     // sends half, then nothing until the hub stops (at most 60 s)
  kRedirectLoop,  // answers 302 with a Location on the same URL
  kHugeLength,    // announces 10^15 bytes (Content-Length), sends the file, closes the connection
};

// The Hugging Face Hub of the tests, on loopback (cpp-httplib): GET /api/models/ORG/NAME/revision/REV
// and HEAD/GET /ORG/NAME/resolve/REV/FILE on the hub's port, GET /lfs/SHA256 on a second port
// (the CDN, another origin). Unknown repositories are 401 RepoNotFound without a token and 404
// with one, unknown revisions 404 RevisionNotFound, unknown files 404 EntryNotFound, as on
// huggingface.co. Every request is recorded. Thread-safe.
class FakeHub {
 public:
  static constexpr char kToken[] = "hf_test_token";

  FakeHub();
  ~FakeHub();
  FakeHub(const FakeHub&) = delete;
  FakeHub& operator=(const FakeHub&) = delete;

  std::string endpoint() const;      // "http://127.0.0.1:PORT"
  std::string cdn_endpoint() const;  // the CDN's
  void AddRepo(const std::string& repo_id, FakeRepo repo);
  void SetCdnFault(CdnFault fault);

  struct Request {
    std::string server;  // "hub" or "cdn"
    std::string method;
    std::string target;  // path and query as sent
    std::string authorization;
    std::string range;
  };
  std::vector<Request> requests() const;
  void ClearRequests();
  // Requests to `server` whose target starts with `prefix`.
  int CountRequests(const std::string& server, const std::string& prefix) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The name huggingface_hub gives `file`'s blob: the sha256 of an LFS file's contents, the git
// blob sha1 of any other (computed here independently of the code under test).
std::string FakeEtag(const FakeFile& file);

// A commit hash made from `seed` (the sha1 of it).
std::string FakeCommitHash(const std::string& seed);

// Every file under `dir`, as paths relative to it; files whose name ends in .safetensors,
// .bin or .model are LFS files.
std::map<std::string, FakeFile> FilesFromDirectory(const std::string& dir);

// A small DeBERTa-v3 model with its SentencePiece tokenizer (tests/data/reference) and some
// files relserve does not need (a README, the reference's inputs and outputs).
std::map<std::string, FakeFile> ReferenceModelFiles();

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_HUB_FAKE_HUB_H_
