#include "server/hub/hub_settings.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

// Set and not empty.
bool Get(const GetEnv& getenv, const char* name, std::string* out) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return false;
  *out = v;
  return true;
}

std::string ExpandHome(const std::string& path, const GetEnv& getenv) {
  if (path == "~" || path.rfind("~/", 0) == 0) {
    std::string home;
    if (Get(getenv, "HOME", &home)) return home + path.substr(1);
  }
  return path;
}

// huggingface_hub's HF_HOME: HF_HOME, else XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
std::string HfHome(const GetEnv& getenv) {
  std::string v;
  if (Get(getenv, "HF_HOME", &v)) return ExpandHome(v, getenv);
  if (Get(getenv, "XDG_CACHE_HOME", &v)) return JoinPath(ExpandHome(v, getenv), "huggingface");
  return ExpandHome("~/.cache/huggingface", getenv);
}

absl::Status ParseSeconds(const GetEnv& getenv, const char* name, absl::Duration* out) {
  std::string v;
  if (!Get(getenv, name, &v)) return absl::OkStatus();
  double s;
  if (!absl::SimpleAtod(v, &s) || !(s > 0) || s > 86400) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": \"", v, "\" is not a number of seconds in (0, 86400]"));
  }
  *out = absl::Seconds(s);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HubSettings> HubSettingsFromEnvironment(const GetEnv& env) {
  const GetEnv getenv = env ? env : [](const char*) -> const char* { return nullptr; };
  HubSettings s;
  std::string v;
  if (Get(getenv, "HF_ENDPOINT", &v)) {
    while (!v.empty() && v.back() == '/') v.pop_back();
    if (v.rfind("https://", 0) != 0 && v.rfind("http://", 0) != 0) {
      return absl::InvalidArgumentError(absl::StrCat("HF_ENDPOINT: \"", v, "\" is not an http:// or https:// address"));
    }
    s.endpoint = v;
  }
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    if (Get(getenv, name, &v)) {
      s.token = std::string(absl::StripAsciiWhitespace(v));
      s.token_source = name;
      break;
    }
  }
  const std::string home = HfHome(getenv);
  if (s.token.empty()) {
    std::string path = JoinPath(home, "token");
    if (Get(getenv, "HF_TOKEN_PATH", &v)) path = ExpandHome(v, getenv);
    if (FileExists(path)) {
      auto text = ReadFileToString(path);
      if (text.ok() && !absl::StripAsciiWhitespace(*text).empty()) {
        s.token = std::string(absl::StripAsciiWhitespace(*text));
        s.token_source = absl::StrCat("the token file ", path);
      }
    }
  }
  if (Get(getenv, "HF_HUB_CACHE", &v) || Get(getenv, "HUGGINGFACE_HUB_CACHE", &v)) {
    s.cache_dir = ExpandHome(v, getenv);
  } else {
    s.cache_dir = JoinPath(home, "hub");
  }
  if (Get(getenv, "HF_HUB_OFFLINE", &v)) {
    const std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(v));
    if (upper == "1" || upper == "ON" || upper == "YES" || upper == "TRUE") {
      s.offline = true;
      s.offline_source = "HF_HUB_OFFLINE";
    } else if (upper != "0" && upper != "OFF" && upper != "NO" && upper != "FALSE") {
      return absl::InvalidArgumentError(absl::StrCat("HF_HUB_OFFLINE: \"", v, "\" is not one of 1, 0, true, false, yes, no, on, off"));
    }
  }
  if (absl::Status st = ParseSeconds(getenv, "HF_HUB_ETAG_TIMEOUT", &s.metadata_timeout); !st.ok()) return st;
  if (absl::Status st = ParseSeconds(getenv, "HF_HUB_DOWNLOAD_TIMEOUT", &s.download_stall_timeout); !st.ok()) return st;
  return s;
}

}  // namespace relserve
