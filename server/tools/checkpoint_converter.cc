#include "server/tools/checkpoint_converter.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/checkpoint/model_checkpoint.h"
#include "server/checkpoint/pytorch_bin_checkpoint.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

// std::filesystem is avoided on purpose: PyTorch's own LibTorch exports a copy of it that
// breaks programs built with a newer GCC (see RemoveTree in server/util/file_util.h).

namespace relserve {
namespace {

// Sentence-transformers modules sit one level down; nothing a model needs is deeper than this.
constexpr int kMaxDepth = 3;

const char* const kWeightFiles[] = {SafetensorsCheckpoint::kSingleFile, SafetensorsCheckpoint::kIndexFile,
                                    PytorchBinCheckpoint::kSingleFile, PytorchBinCheckpoint::kIndexFile};

bool IsCopied(const std::string& name) {
  for (const char* ext : {".json", ".txt", ".model", ".md"}) {
    if (absl::EndsWith(name, ext)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (d == nullptr) return absl::UnavailableError(absl::StrCat(dir, ": cannot list: ", std::strerror(errno)));
  std::vector<std::string> names;
  while (const dirent* e = readdir(d.get())) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status MakeDirs(const std::string& dir) {
  if (IsDirectory(dir)) return absl::OkStatus();
  const size_t slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MakeDirs(dir.substr(0, slash)));
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(absl::StrCat(dir, ": cannot create directory: ", std::strerror(errno)));
  }
  if (!IsDirectory(dir)) return absl::FailedPreconditionError(absl::StrCat(dir, ": exists and is not a directory"));
  return absl::OkStatus();
}

// `path` made absolute with links resolved, for a path that may not exist yet: its deepest
// existing ancestor resolved, the rest appended.
std::string ResolvedPath(const std::string& path) {
  std::string head = path;
  std::string tail;
  while (true) {
    char buf[PATH_MAX];
    if (realpath(head.empty() ? "." : head.c_str(), buf) != nullptr) return JoinPath(buf, tail);
    const size_t slash = head.find_last_of('/');
    const std::string last = slash == std::string::npos ? head : head.substr(slash + 1);
    tail = tail.empty() ? last : JoinPath(last, tail);
    if (slash == std::string::npos) {
      head.clear();
    } else {
      head = slash == 0 ? "/" : head.substr(0, slash);
    }
  }
}

absl::Status CopyFile(const std::string& from, const std::string& to) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(from));
  return WriteStringToFile(to, bytes);
}

class Converter {
 public:
  explicit Converter(ConversionReport* report) : report_(report) {}

  // One directory of the model (`rel` from the top, "" for the top itself) and those below it.
  absl::Status Convert(const std::string& from, const std::string& to, const std::string& rel, int depth) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(from));
    std::vector<std::string> files;
    std::vector<std::string> subdirs;
    for (const std::string& name : names) {
      const std::string path = JoinPath(from, name);
      struct stat link;
      struct stat target;
      if (name.front() == '.' || lstat(path.c_str(), &link) != 0 || stat(path.c_str(), &target) != 0) {
        report_->skipped.push_back(JoinPath(rel, name));  // hidden, or a dangling link
      } else if (S_ISDIR(target.st_mode) && !S_ISLNK(link.st_mode) && depth < kMaxDepth) {
        subdirs.push_back(name);
      } else if (S_ISREG(target.st_mode)) {
        files.push_back(name);
      } else {
        report_->skipped.push_back(JoinPath(rel, name));
      }
    }

    std::set<std::string> weight_files;
    bool has_weights = false;
    for (const char* w : kWeightFiles) {
      if (std::count(files.begin(), files.end(), w) > 0) has_weights = true;
    }
    std::unique_ptr<Checkpoint> checkpoint;
    if (has_weights || rel.empty()) {  // the top must have weights: OpenModelCheckpoint says which
      ASSIGN_OR_RETURN(checkpoint, OpenModelCheckpoint(from));
      weight_files.insert(std::begin(kWeightFiles), std::end(kWeightFiles));
      weight_files.insert(checkpoint->file_names().begin(), checkpoint->file_names().end());
    }
    if (checkpoint != nullptr) {
      RETURN_IF_ERROR(MakeDirs(to));
      RETURN_IF_ERROR(WriteSafetensors(*checkpoint, JoinPath(to, SafetensorsCheckpoint::kSingleFile)));
      report_->written.push_back(JoinPath(rel, SafetensorsCheckpoint::kSingleFile));
    }
    for (const std::string& name : files) {
      const std::string rel_name = JoinPath(rel, name);
      if (weight_files.count(name) > 0 || !IsCopied(name)) {
        report_->skipped.push_back(rel_name);
      } else if (rel.empty() && name == "config.json") {
        config_ = {JoinPath(from, name), JoinPath(to, name)};  // last: it marks a finished model
      } else {
        RETURN_IF_ERROR(MakeDirs(to));  // only where something is written
        RETURN_IF_ERROR(CopyFile(JoinPath(from, name), JoinPath(to, name)));
        report_->copied.push_back(rel_name);
      }
    }
    for (const std::string& name : subdirs) {
      RETURN_IF_ERROR(Convert(JoinPath(from, name), JoinPath(to, name), JoinPath(rel, name), depth + 1));
    }
    if (rel.empty() && !config_.first.empty()) {
      RETURN_IF_ERROR(CopyFile(config_.first, config_.second));
      report_->copied.push_back("config.json");
    }
    return absl::OkStatus();
  }

 private:
  absl::Status WriteSafetensors(const Checkpoint& checkpoint, const std::string& path) {
    SafetensorsWriter writer;
    writer.SetMetadata({{"format", "pt"}});
    for (const std::string& name : checkpoint.Names()) {
      const TensorView* view = checkpoint.Find(name);
      RETURN_IF_ERROR(writer.Add(name, view->dtype, view->shape, view->data, view->nbytes));
      report_->tensors += 1;
      report_->bytes += view->nbytes;
    }
    return writer.WriteFile(path);
  }

  ConversionReport* report_;
  std::pair<std::string, std::string> config_;
};

}  // namespace

absl::StatusOr<ConversionReport> ConvertModelDirectory(const std::string& model_dir, const std::string& out_dir,
                                                       bool overwrite) {
  if (!IsDirectory(model_dir)) return absl::NotFoundError(absl::StrCat(model_dir, ": no such directory"));
  const std::string from = ResolvedPath(model_dir);
  const std::string to = ResolvedPath(out_dir);
  if (to == from || absl::StartsWith(to, from + "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out ", out_dir, " is the model directory or inside it; write the conversion elsewhere"));
  }
  struct stat st;
  if (stat(out_dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat(out_dir, ": exists and is not a directory"));
    ASSIGN_OR_RETURN(std::vector<std::string> existing, ListDirectory(out_dir));
    if (!existing.empty() && !overwrite) {
      return absl::FailedPreconditionError(
          absl::StrCat(out_dir, ": exists and is not empty; pass --overwrite to write into it (files of the same name "
                                "are replaced)"));
    }
  }
  ConversionReport report;
  Converter converter(&report);
  RETURN_IF_ERROR(converter.Convert(model_dir, out_dir, "", 0));
  return report;
}

}  // namespace relserve
