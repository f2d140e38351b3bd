#include "server/hub/hub_model_id.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace relserve {
namespace {

constexpr size_t kMaxRepoIdLength = 96;
constexpr size_t kMaxRevisionLength = 255;

bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'; }

// Empty when `name` is a valid organisation or repository name, else why not.
std::string NameProblem(absl::string_view name, absl::string_view what) {
  if (name.empty()) return absl::StrCat("the ", what, " name is empty");
  for (char c : name) {
    if (!IsNameChar(c)) {
      return absl::StrCat("the ", what, " name \"", name, "\" has a character other than letters, digits, '-', '_' and '.'");
    }
  }
  const char first = name.front(), last = name.back();
  if (first == '-' || first == '.' || last == '-' || last == '.') {
    return absl::StrCat("the ", what, " name \"", name, "\" starts or ends with '-' or '.'");
  }
  if (absl::StrContains(name, "--") || absl::StrContains(name, "..")) {
    return absl::StrCat("the ", what, " name \"", name, "\" contains \"--\" or \"..\"");
  }
  return "";
}

}  // namespace

std::string HubModelId::ToString() const { return revision_given ? absl::StrCat(repo_id, "@", revision) : repo_id; }

bool IsCommitHash(absl::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsSafeRepoPath(absl::string_view path) {
  if (path.empty() || path.front() == '/') return false;
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return false;
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

absl::StatusOr<HubModelId> ParseHubModelId(absl::string_view spec) {
  auto error = [spec](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("\"", spec, "\" is not a Hub model id (org/repo or org/repo@revision): ", why));
  };
  HubModelId id;
  absl::string_view repo = spec;
  const size_t at = spec.find('@');
  if (at != absl::string_view::npos) {
    repo = spec.substr(0, at);
    const absl::string_view revision = spec.substr(at + 1);
    if (revision.empty()) return error("the revision after '@' is empty");
    if (revision.size() > kMaxRevisionLength) return error(absl::StrCat("the revision is longer than ", kMaxRevisionLength, " characters"));
    if (!IsSafeRepoPath(revision)) {
      return error(absl::StrCat("the revision \"", revision, "\" has an empty, \".\" or \"..\" part, a leading '/', a backslash or a control character"));
    }
    id.revision = std::string(revision);
    id.revision_given = true;
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(repo, '/');
  if (parts.size() != 2) return error(parts.size() < 2 ? "no '/' between organisation and repository" : "more than one '/'");
  if (repo.size() > kMaxRepoIdLength) return error(absl::StrCat("longer than ", kMaxRepoIdLength, " characters"));
  if (std::string p = NameProblem(parts[0], "organisation"); !p.empty()) return error(p);
  if (std::string p = NameProblem(parts[1], "repository"); !p.empty()) return error(p);
  id.repo_id = std::string(repo);
  return id;
}

}  // namespace relserve
