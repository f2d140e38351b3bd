// The main() of a fuzz target in builds without libFuzzer: it runs LLVMFuzzerTestOneInput once
// on every file named on the command line, and on every file inside the folders named there, so
// the committed seeds and regression inputs run with the ordinary test suite. Arguments that
// start with '-' (libFuzzer's flags) are ignored, so both kinds of binary take the same command.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool ReadFile(const std::filesystem::path& path, std::vector<uint8_t>* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.empty() || arg[0] == '-') continue;
    std::error_code error;
    if (std::filesystem::is_directory(arg, error)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg, error)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else if (std::filesystem::is_regular_file(arg, error)) {
      inputs.push_back(arg);
    } else {
      std::fprintf(stderr, "%s: no such file or folder\n", arg.c_str());
      return 2;
    }
    if (error) {
      std::fprintf(stderr, "%s: %s\n", arg.c_str(), error.message().c_str());
      return 2;
    }
  }
  // A fixed order makes a failure reproducible from the log.
  std::sort(inputs.begin(), inputs.end());
  std::vector<uint8_t> bytes;
  for (const auto& path : inputs) {
    if (!ReadFile(path, &bytes)) {
      std::fprintf(stderr, "%s: cannot read\n", path.c_str());
      return 2;
    }
    std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(), bytes.size());
    // An empty vector's data() may be null; libFuzzer passes a valid pointer with size 0.
    static const uint8_t kEmpty = 0;
    LLVMFuzzerTestOneInput(bytes.empty() ? &kEmpty : bytes.data(), bytes.size());
  }
  std::fprintf(stderr, "ran %zu inputs\n", inputs.size());
  return inputs.empty() ? 2 : 0;
}
