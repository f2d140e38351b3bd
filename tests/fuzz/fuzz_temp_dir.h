#ifndef RELSERVE_TESTS_FUZZ_FUZZ_TEMP_DIR_H_
#define RELSERVE_TESTS_FUZZ_FUZZ_TEMP_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "tests/fuzz/fuzz_check.h"

namespace relserve::fuzz {

// A fresh folder under $TMPDIR (or /tmp) for files a fuzz target writes, removed when the
// process exits normally (libFuzzer's time limit and the replay driver both end that way; a
// crash leaves it for inspection).
inline std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/" + prefix +
                     ".XXXXXX";
  FUZZ_CHECK(mkdtemp(path.data()) != nullptr, "setup: mkdtemp %s", path.c_str());
  static std::string* const to_remove = new std::string(path);
  FUZZ_CHECK(*to_remove == path, "setup: one temporary folder per process");
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(*to_remove, ignored);
  });
  return path;
}

}  // namespace relserve::fuzz

#endif  // RELSERVE_TESTS_FUZZ_FUZZ_TEMP_DIR_H_
