#ifndef RELSERVE_TESTS_FUZZ_FUZZ_CHECK_H_
#define RELSERVE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

// A property of the code under fuzzing that must hold for every input. Failing, it aborts, which
// libFuzzer reports as a crash and saves the input: a wrong answer is a finding as much as a
// memory error is.
#define FUZZ_CHECK(condition, ...)                                                    \
  do {                                                                               \
    if (!(condition)) {                                                              \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: ", __FILE__, __LINE__,     \
                   #condition);                                                      \
      std::fprintf(stderr, __VA_ARGS__);                                             \
      std::fprintf(stderr, "\n");                                                    \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#endif  // RELSERVE_TESTS_FUZZ_FUZZ_CHECK_H_
