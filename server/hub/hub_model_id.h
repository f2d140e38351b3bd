#ifndef RELSERVE_SERVER_HUB_HUB_MODEL_ID_H_
#define RELSERVE_SERVER_HUB_HUB_MODEL_ID_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace relserve {

// A model repository on the Hugging Face Hub as --model names it: "org/repo" or
// "org/repo@revision", where the revision is a branch, a tag or a full commit hash.
struct HubModelId {
  std::string repo_id;            // "org/repo"
  std::string revision = "main";  // the Hub's default branch when none is given
  bool revision_given = false;    // "@revision" was written

  // "org/repo" or "org/repo@revision", as it was given.
  std::string ToString() const;
};

inline constexpr char kDefaultRevision[] = "main";

// Parses "org/repo[@revision]". The repository id follows the Hub's own rule (huggingface_hub's
// validate_repo_id): two names of letters, digits, '-', '_' and '.', neither starting nor
// ending with '-' or '.', without "--" or "..", 96 characters at most. A name without an
// organisation ("bert-base-uncased") is not taken: such a word is far more often a local folder.
// The revision becomes a path under refs/, so it must be a relative path without "." or ".."
// parts, empty parts or control characters. INVALID_ARGUMENT naming the rule that is broken.
absl::StatusOr<HubModelId> ParseHubModelId(absl::string_view spec);

// 40 lowercase hexadecimal digits: a git commit as the Hub names snapshots.
bool IsCommitHash(absl::string_view revision);

// A path inside a repository or snapshot that stays inside it: relative, '/'-separated, no
// empty, "." or ".." parts, no backslash or control characters. File names from the Hub's
// answers go through this before they become paths on disk.
bool IsSafeRepoPath(absl::string_view path);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_HUB_MODEL_ID_H_
