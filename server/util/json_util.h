#ifndef RELSERVE_SERVER_UTIL_JSON_UTIL_H_
#define RELSERVE_SERVER_UTIL_JSON_UTIL_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace relserve {

// Larger JSON files are refused before they are read: parsed, they would take about ten times
// their size in memory, and no configuration or input file of a model comes near.
inline constexpr uint64_t kMaxJsonFileBytes = 256ull << 20;

// Arrays and objects nested deeper than this are refused when parsed: copying, comparing and
// printing a nlohmann::json recurse once per level, so a value nested 100,000 deep (a few
// hundred KB of "[[[[...") would overflow the stack. No model file nests beyond about 6
// (tokenizer.json's sequences of normalizers).
inline constexpr int kMaxJsonDepth = 128;

// Parses JSON text. Every failure is INVALID_ARGUMENT naming `what` (usually a file path), the
// keys leading to the offending value where there are any, and the parser's reason: syntax
// errors with their line and column, numbers beyond the range of a double (1e400), which
// the parser reports as a different kind of error, and arrays and objects nested deeper than
// kMaxJsonDepth levels (`{}` is one level, `{"a": [1]}` two).
absl::StatusOr<nlohmann::json> ParseJson(const std::string& text, const std::string& what);
// Reads and parses a JSON file; INVALID_ARGUMENT for a file larger than kMaxJsonFileBytes.
absl::StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// The reason of a JSON library exception without its "[json.exception.parse_error.101] " tag,
// saying so when a number is beyond double range.
std::string JsonErrorReason(const nlohmann::json::exception& e);

// A JSON value for an error message: compact, cut short after about 60 characters. Only that
// much is ever written out, so a value of any size or depth costs little and cannot overflow
// the stack.
std::string JsonValueForMessage(const nlohmann::json& value);

// Where JSON text opens an array or object at a level deeper than `max_depth`: the byte offset
// of that '[' or '{', or std::string_view::npos when the text nests no deeper. Brackets inside
// strings do not count; the text is not otherwise checked (a cheap scan to run before a parser).
size_t JsonNestingBeyond(absl::string_view text, int max_depth);

// Typed, range-checked reads of the keys of one JSON object (a config file). A key that is
// absent or null leaves the output as it is: transformers' getattr(config, key, default).
// Every error is INVALID_ARGUMENT "<source>: \"key\" <problem>", naming the value as given
// (18446744073709551615, "32", [1]) and the limit it breaks. `object` must outlive the reader.
class JsonFieldReader {
 public:
  JsonFieldReader(const nlohmann::json& object, std::string source)
      : object_(object), source_(std::move(source)) {}

  // Present and not null (false when `object` is not an object).
  bool Has(const char* key) const;
  // An integer in [min_value, max_value]. A float with an integral value (32.0, as Python may
  // write it) counts as an integer; 2.5, strings, booleans, lists and objects do not.
  absl::Status Int(const char* key, int* out, int64_t min_value, int64_t max_value) const;
  absl::Status Int64(const char* key, int64_t* out, int64_t min_value, int64_t max_value) const;
  // A number in [min_value, max_value], or in (min_value, max_value] when min_exclusive.
  absl::Status Double(const char* key, double* out, double min_value, double max_value,
                      bool min_exclusive = false) const;
  absl::Status Bool(const char* key, bool* out) const;
  absl::Status String(const char* key, std::string* out) const;

  // INVALID_ARGUMENT "<source>: \"key\" <problem>".
  absl::Status Error(absl::string_view key, absl::string_view problem) const;
  const std::string& source() const { return source_; }

 private:
  const nlohmann::json& object_;
  std::string source_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_UTIL_JSON_UTIL_H_
