#include "server/hub/hub_client.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/hub/http_transfer.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

constexpr int kMaxRedirects = 10;

bool IsRedirect(long status) { return status == 301 || status == 302 || status == 303 || status == 307 || status == 308; }

// kMaxRedirects were followed from `url` and the answer is one more (a loop, most likely).
absl::Status TooManyRedirects(const std::string& url) {
  return absl::UnavailableError(
      absl::StrCat("too many redirects (", kMaxRedirects, ") fetching ", url.substr(0, url.find('?'))));
}

// A Location without scheme and host: the same site (huggingface_hub follows only these when
// it asks for a file's metadata, so that a CDN address is kept, not fetched).
bool IsRelativeLocation(const std::string& location) {
  return location.find("://") == std::string::npos && location.rfind("//", 0) != 0;
}

// W/"abc" and "abc" -> abc.
std::string NormalizeEtag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

// The ETag becomes a file name in blobs/: hexadecimal on the Hub; nothing that could leave the
// folder or end in ".incomplete" or ".lock" is taken.
bool IsSafeBlobName(const std::string& etag) {
  if (etag.empty() || etag.size() > 128) return false;
  for (char c : etag) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

// What the Hub said about an error: X-Error-Message, else the JSON body's "error", short.
std::string HubMessage(const HttpResponse& r) {
  std::string message = r.Header("x-error-message");
  if (message.empty() && !r.body.empty()) {
    // ParseJson: nesting beyond kMaxJsonDepth is refused, like any body that is not JSON.
    const absl::StatusOr<nlohmann::json> j = ParseJson(r.body, "the Hub's error answer");
    if (j.ok() && j->is_object() && j->contains("error") && (*j)["error"].is_string()) {
      message = (*j)["error"].get<std::string>();
    }
  }
  if (message.size() > 300) message = message.substr(0, 300) + "...";
  return message.empty() ? "" : absl::StrCat(" (the Hub says: ", message, ")");
}

// What a failed answer means, for the repository, its revision and the file asked for (empty
// for the revision's file list).
absl::Status HubError(const HttpResponse& r, const HubSettings& s, const std::string& repo_id,
                      const std::string& revision, const std::string& file) {
  const std::string code = r.Header("x-error-code");
  const std::string what = file.empty() ? absl::StrCat(repo_id, "@", revision)
                                        : absl::StrCat("file ", file, " of ", repo_id, "@", revision);
  const std::string hub = HubMessage(r);
  const std::string token_hint =
      s.token.empty() ? "set HF_TOKEN to an access token of an account that may read it"
                      : absl::StrCat("the token from ", s.token_source, " was used and does not give access");
  const std::string page = absl::StrCat(s.endpoint, "/", repo_id);
  if (code == "GatedRepo") {
    // 401 without a token, 403 with one whose account has not accepted the conditions.
    const std::string text =
        absl::StrCat(repo_id, " is a gated repository: accept its conditions at ", page, " with your account, then ",
                     s.token.empty() ? "set HF_TOKEN to an access token of that account (no token is set)"
                                     : absl::StrCat("use a token of that account (the token from ", s.token_source,
                                                    " has no access)"),
                     hub);
    return s.token.empty() ? absl::UnauthenticatedError(text) : absl::PermissionDeniedError(text);
  }
  if (code == "RepoNotFound" || (r.status == 404 && file.empty() && code.empty())) {
    return absl::NotFoundError(absl::StrCat("repository ", repo_id, " not found on ", s.endpoint,
                                            " (it may also be private or gated: ", token_hint, ")", hub));
  }
  if (code == "RevisionNotFound") {
    return absl::NotFoundError(absl::StrCat("revision \"", revision, "\" not found in ", repo_id,
                                            " (a branch, a tag or a full commit hash)", hub));
  }
  if (code == "EntryNotFound" || r.status == 404) {
    return absl::NotFoundError(absl::StrCat(what, " not found on ", s.endpoint, hub));
  }
  if (r.status == 401) {
    return absl::UnauthenticatedError(absl::StrCat(what, " needs an access token: ", token_hint, hub));
  }
  if (r.status == 403) {
    return absl::PermissionDeniedError(absl::StrCat("access to ", what, " denied: ", token_hint, hub));
  }
  if (r.status == 408 || r.status == 429 || r.status >= 500) {
    return absl::UnavailableError(
        absl::StrCat(s.endpoint, " answered HTTP ", r.status, " for ", what, hub, "; try again later"));
  }
  return absl::FailedPreconditionError(absl::StrCat(s.endpoint, " answered HTTP ", r.status, " for ", what, hub));
}

absl::StatusCode CodeForStatus(long status) {
  switch (status) {
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    default:
      return status == 408 || status == 429 || status >= 500 ? absl::StatusCode::kUnavailable
                                                             : absl::StatusCode::kFailedPrecondition;
  }
}

class SinkRequest {
 public:
  SinkRequest(int64_t offset, DownloadSink* sink) : offset_(offset), sink_(sink) {}

  bool Start(long status, const std::map<std::string, std::string>& headers) {
    int64_t from = 0;
    std::optional<int64_t> length;
    if (const auto it = headers.find("content-length"); it != headers.end()) {
      int64_t n;
      if (absl::SimpleAtoi(it->second, &n) && n >= 0) length = n;
    }
    if (status == 206) {
      // "bytes START-END/TOTAL": a server that answers another range than the one asked for
      // cannot be appended.
      const auto it = headers.find("content-range");
      if (it == headers.end()) return Fail("a 206 answer without Content-Range");
      const std::string& range = it->second;
      const size_t space = range.find(' '), dash = range.find('-');
      if (space == std::string::npos || dash == std::string::npos || dash < space ||
          !absl::SimpleAtoi(range.substr(space + 1, dash - space - 1), &from) || from != offset_) {
        return Fail(absl::StrCat("asked for bytes from ", offset_, " on, the server sent \"", range, "\""));
      }
    }
    return sink_->Begin(from, length);
  }
  bool Write(const char* data, size_t size) { return sink_->Write(data, size); }
  const std::string& problem() const { return problem_; }

 private:
  bool Fail(std::string problem) {
    problem_ = std::move(problem);
    return false;
  }
  int64_t offset_;
  DownloadSink* sink_;
  std::string problem_;
};

}  // namespace

std::vector<std::string> HubClient::Headers(const std::string& url) const {
  std::vector<std::string> headers;
  if (!settings_.token.empty() && UrlOrigin(url) == UrlOrigin(settings_.endpoint)) {
    headers.push_back(absl::StrCat("Authorization: Bearer ", settings_.token));
  }
  return headers;
}

std::string HubClient::ResolveUrl(const std::string& repo_id, const std::string& revision,
                                  const std::string& file) const {
  return absl::StrCat(settings_.endpoint, "/", repo_id, "/resolve/", UrlEncode(revision, false), "/",
                      UrlEncode(file, true));
}

absl::StatusOr<HubRevision> HubClient::GetRevision(const HubModelId& id) const {
  const std::string request_url = absl::StrCat(settings_.endpoint, "/api/models/", id.repo_id, "/revision/",
                                               UrlEncode(id.revision, false));
  std::string url = request_url;
  HttpResponse r;
  for (int hop = 0;; ++hop) {
    HttpRequest request;
    request.url = url;
    request.headers = Headers(url);
    request.total_timeout = settings_.metadata_timeout;
    request.cancelled = settings_.cancelled;
    ASSIGN_OR_RETURN(r, PerformHttp(request));
    if (!IsRedirect(r.status) || r.Header("location").empty()) break;
    if (hop == kMaxRedirects) return TooManyRedirects(request_url);
    url = relserve::ResolveUrl(url, r.Header("location"));  // a renamed repository
  }
  if (r.status != 200) return HubError(r, settings_, id.repo_id, id.revision, "");
  const std::string where = absl::StrCat(settings_.endpoint, "'s answer for ", id.ToString());
  // Not JSON, or nested deeper than kMaxJsonDepth: the reason, naming `where`.
  absl::StatusOr<nlohmann::json> parsed = ParseJson(r.body, where);
  if (!parsed.ok()) return absl::DataLossError(parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return absl::DataLossError(absl::StrCat(where, " is not a JSON object"));
  HubRevision out;
  if (!j.contains("sha") || !j["sha"].is_string() || !IsCommitHash(j["sha"].get<std::string>())) {
    return absl::DataLossError(absl::StrCat(where, " has no \"sha\" with a 40-digit commit hash"));
  }
  out.commit = j["sha"].get<std::string>();
  if (!j.contains("siblings") || !j["siblings"].is_array()) {
    return absl::DataLossError(absl::StrCat(where, " has no \"siblings\" list"));
  }
  for (const nlohmann::json& sibling : j["siblings"]) {
    if (!sibling.is_object() || !sibling.contains("rfilename") || !sibling["rfilename"].is_string()) {
      return absl::DataLossError(absl::StrCat(where, ": an entry of \"siblings\" has no \"rfilename\""));
    }
    // A name that would leave the snapshot is nothing a model needs: left out.
    const std::string name = sibling["rfilename"].get<std::string>();
    if (IsSafeRepoPath(name)) out.files.push_back(name);
  }
  return out;
}

absl::StatusOr<HubFileMetadata> HubClient::GetFileMetadata(const std::string& repo_id, const std::string& revision,
                                                           const std::string& file) const {
  const std::string resolve_url = ResolveUrl(repo_id, revision, file);
  std::string url = resolve_url;
  HttpResponse r;
  for (int hop = 0;; ++hop) {
    HttpRequest request;
    request.method = "HEAD";
    request.url = url;
    request.headers = Headers(url);
    request.headers.push_back("Accept-Encoding: identity");  // the size of the file, not of a compressed form
    request.total_timeout = settings_.metadata_timeout;
    request.cancelled = settings_.cancelled;
    ASSIGN_OR_RETURN(r, PerformHttp(request));
    const std::string location = r.Header("location");
    if (!IsRedirect(r.status) || location.empty() || !IsRelativeLocation(location)) break;
    if (hop == kMaxRedirects) return TooManyRedirects(resolve_url);
    url = relserve::ResolveUrl(url, location);
  }
  const bool redirected = IsRedirect(r.status) && !r.Header("location").empty();
  if (!redirected && (r.status < 200 || r.status >= 300)) return HubError(r, settings_, repo_id, revision, file);
  const std::string where = absl::StrCat(settings_.endpoint, "'s answer for ", file, " of ", repo_id, "@", revision);
  HubFileMetadata m;
  m.commit = r.Header("x-repo-commit");
  if (!IsCommitHash(m.commit)) {
    return absl::DataLossError(absl::StrCat(where, " has no X-Repo-Commit header with a commit hash: is ",
                                            settings_.endpoint, " a Hugging Face Hub?"));
  }
  m.etag = NormalizeEtag(!r.Header("x-linked-etag").empty() ? r.Header("x-linked-etag") : r.Header("etag"));
  if (m.etag.empty()) return absl::DataLossError(absl::StrCat(where, " has no ETag"));
  if (!IsSafeBlobName(m.etag)) {
    return absl::DataLossError(absl::StrCat(where, " has an ETag that is no file name: \"", m.etag.substr(0, 80), "\""));
  }
  // A redirect's Content-Length is that of the redirect's own body, not of the file.
  const std::string size = !r.Header("x-linked-size").empty() ? r.Header("x-linked-size")
                           : redirected                         ? ""
                                                                : r.Header("content-length");
  int64_t n;
  if (!size.empty() && absl::SimpleAtoi(size, &n) && n >= 0) m.size = n;
  m.location = redirected ? relserve::ResolveUrl(url, r.Header("location")) : url;
  return m;
}

absl::Status HubClient::Download(const std::string& start_url, int64_t offset, DownloadSink* sink) const {
  std::string url = start_url;
  for (int hop = 0;; ++hop) {
    SinkRequest sink_request(offset, sink);
    HttpRequest request;
    request.url = url;
    request.headers = Headers(url);
    request.range_start = offset;
    request.stall_timeout = settings_.download_stall_timeout;
    request.cancelled = settings_.cancelled;
    request.on_start = [&sink_request](long status, const std::map<std::string, std::string>& headers) {
      return sink_request.Start(status, headers);
    };
    request.on_body = [&sink_request](const char* data, size_t size) { return sink_request.Write(data, size); };
    absl::StatusOr<HttpResponse> r = PerformHttp(request);
    if (!r.ok()) {
      if (!sink_request.problem().empty()) {
        return absl::DataLossError(absl::StrCat(url.substr(0, url.find('?')), ": ", sink_request.problem()));
      }
      return r.status();
    }
    if (r->status >= 200 && r->status < 300) return absl::OkStatus();
    // Nothing after `offset`: the file was complete already (its size was not known); the
    // caller's checks decide whether it is right.
    if (r->status == 416 && offset > 0) return absl::OkStatus();
    if (IsRedirect(r->status) && !r->Header("location").empty()) {
      if (hop == kMaxRedirects) return TooManyRedirects(start_url);
      url = relserve::ResolveUrl(url, r->Header("location"));  // the token stays with the endpoint (Headers)
      continue;
    }
    return absl::Status(CodeForStatus(r->status), absl::StrCat("downloading from ", url.substr(0, url.find('?')),
                                                              ": HTTP ", r->status, HubMessage(*r)));
  }
}

}  // namespace relserve
