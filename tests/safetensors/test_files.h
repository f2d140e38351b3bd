#ifndef RELSERVE_TESTS_SAFETENSORS_TEST_FILES_H_
#define RELSERVE_TESTS_SAFETENSORS_TEST_FILES_H_

// Helpers shared by the safetensors tests: scratch directories and hand-built file images.

#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "gtest/gtest.h"

namespace relserve::testing {

// A fresh directory for the running test, under GoogleTest's temp dir; fixtures remove it in
// TearDown with RemoveScratchDir.
inline std::string ScratchDir() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  const std::string dir =
      ::testing::TempDir() + "relserve_st_" + std::to_string(getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void RemoveScratchDir(const std::string& dir) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

inline void WriteBytes(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 8-byte little-endian length, then `header`, then `data`: a file image with any header at all.
inline std::string RawFile(std::string_view header, std::string_view data = {}) {
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  out.append(header);
  out.append(data);
  return out;
}

inline std::string TestDataPath(const std::string& relative) {
  return std::string(RELSERVE_TEST_DATA_DIR) + "/" + relative;
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_SAFETENSORS_TEST_FILES_H_
