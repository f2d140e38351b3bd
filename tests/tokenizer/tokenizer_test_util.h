#ifndef RELSERVE_TESTS_TOKENIZER_TOKENIZER_TEST_UTIL_H_
#define RELSERVE_TESTS_TOKENIZER_TOKENIZER_TEST_UTIL_H_

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "server/util/file_util.h"

namespace relserve::testing {

// The unigram model of tests/data/reference/tokenizer (vocab 1000, [PAD]=0 [CLS]=1 [SEP]=2
// [UNK]=3), trained with sentencepiece 0.1.97.
inline std::string ReferenceModelPath() {
  return JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer/spm.model");
}

inline std::string ReferenceCasesPath() {
  return JoinPath(RELSERVE_TEST_DATA_DIR, "reference/tokenizer/cases.json");
}

// A fresh directory under the test temp dir, unique to this process and name.
inline std::string MakeTempDir(const std::string& name) {
  const std::string dir =
      JoinPath(::testing::TempDir(), "relserve_tokenizer_" + std::to_string(getpid()) + "_" + name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

inline void WriteFile(const std::string& path, const std::string& contents) {
  ASSERT_TRUE(WriteStringToFile(path, contents).ok()) << path;
}

inline void CopyFile(const std::string& from, const std::string& to) {
  auto contents = ReadFileToString(from);
  ASSERT_TRUE(contents.ok()) << contents.status();
  WriteFile(to, *contents);
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_TOKENIZER_TOKENIZER_TEST_UTIL_H_
