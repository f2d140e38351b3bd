#include "server/util/json_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/file_util.h"
#include "server/util/quote.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using nlohmann::json;

absl::Status TypeError(const JsonFieldReader& r, const char* key, const char* want, const json& v) {
  return r.Error(key, absl::StrCat("must be ", want, ", got ", JsonValueForMessage(v)));
}

// Thrown by ParseJson's callback to stop the parser at the first level too deep.
struct TooDeep {};

// How far JsonValueForMessage writes before it stops.
constexpr size_t kMaxValueChars = 60;

// `text` as a JSON string, or enough of its start to fill `out` past `limit`.
void AppendStringPrefix(const std::string& text, size_t limit, std::string* out) {
  const size_t room = limit >= out->size() ? limit - out->size() + 1 : 1;
  const json quoted = text.size() <= room ? text : text.substr(0, room);
  *out += quoted.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Writes `value` compactly, as dump() does, until `out` is longer than `limit`. Each level
// writes a bracket before it goes deeper, so the recursion stops within `limit` levels.
void AppendBounded(const json& value, size_t limit, std::string* out) {
  if (out->size() > limit) return;
  if (value.is_object()) {
    *out += '{';
    for (auto it = value.begin(); it != value.end() && out->size() <= limit; ++it) {
      if (it != value.begin()) *out += ',';
      AppendStringPrefix(it.key(), limit, out);
      *out += ':';
      AppendBounded(it.value(), limit, out);
    }
    *out += '}';
  } else if (value.is_array()) {
    *out += '[';
    for (size_t i = 0; i < value.size() && out->size() <= limit; ++i) {
      if (i > 0) *out += ',';
      AppendBounded(value[i], limit, out);
    }
    *out += ']';
  } else if (value.is_string()) {
    AppendStringPrefix(value.get_ref<const std::string&>(), limit, out);
  } else {
    *out += value.dump();
  }
}

}  // namespace

// nlohmann's messages start with "[json.exception.parse_error.101] ", which says nothing to a
// reader of ours.
std::string JsonErrorReason(const json::exception& e) {
  std::string message = e.what();
  if (message.rfind("[json.exception.", 0) == 0) {
    const auto close = message.find("] ");
    if (close != std::string::npos) message.erase(0, close + 2);
  }
  // out_of_range.406: a number literal beyond what a double holds.
  if (e.id == 406) absl::StrAppend(&message, " (beyond the range of a 64-bit float)");
  return message;
}

absl::StatusOr<json> ParseJson(const std::string& text, const std::string& what) {
  // The keys above the value being parsed. A number beyond double range is reported without a
  // position, so the key is what lets the message name the field.
  std::vector<std::string> path;
  json::parser_callback_t track = [&path](int depth, json::parse_event_t event, json& parsed) {
    // `depth` counts the arrays and objects around the one that starts.
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      throw TooDeep{};
    }
    if (event == json::parse_event_t::key && depth >= 1 && parsed.is_string()) {
      path.resize(static_cast<size_t>(depth));
      path.back() = parsed.get<std::string>();
    } else if (event == json::parse_event_t::object_end || event == json::parse_event_t::array_end) {
      if (path.size() > static_cast<size_t>(depth)) path.resize(static_cast<size_t>(depth));
    }
    return true;
  };
  auto where = [&path]() -> std::string {
    std::vector<std::string> keys;
    for (const std::string& k : path) {
      if (!k.empty()) keys.push_back(k);
    }
    // Up to kMaxJsonDepth keys of any length: quoted with a bound.
    return keys.empty() ? "" : absl::StrCat(" at ", Quote(absl::StrJoin(keys, "."), 200));
  };
  try {
    return json::parse(text, track);
  } catch (const TooDeep&) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": invalid JSON", where(), ": arrays and objects nest deeper than ", kMaxJsonDepth, " levels"));
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": invalid JSON", where(), ": ", JsonErrorReason(e)));
  }
}

size_t JsonNestingBeyond(absl::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, a quote included
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::string_view::npos;
}

absl::StatusOr<json> ReadJsonFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) > kMaxJsonFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is ", st.st_size, " bytes, more than the ",
                                                   kMaxJsonFileBytes, "-byte limit for a JSON file"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJson(text, path);
}

std::string JsonValueForMessage(const json& value) {
  std::string text;
  AppendBounded(value, kMaxValueChars, &text);
  if (text.size() > kMaxValueChars) {
    // Cut at a character boundary (continuation bytes are 10xxxxxx).
    size_t end = kMaxValueChars;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    text = text.substr(0, end) + "...";
  }
  return text;
}

bool JsonFieldReader::Has(const char* key) const {
  if (!object_.is_object()) return false;
  auto it = object_.find(key);
  return it != object_.end() && !it->is_null();
}

absl::Status JsonFieldReader::Error(absl::string_view key, absl::string_view problem) const {
  return absl::InvalidArgumentError(absl::StrCat(source_, ": \"", key, "\" ", problem));
}

absl::Status JsonFieldReader::Int64(const char* key, int64_t* out, int64_t min_value,
                                    int64_t max_value) const {
  if (!Has(key)) return absl::OkStatus();
  const json& v = object_.at(key);
  auto too_large = [&]() {
    return Error(key, absl::StrCat("must be at most ", max_value, ", got ", JsonValueForMessage(v)));
  };
  auto too_small = [&]() {
    return Error(key, absl::StrCat("must be at least ", min_value, ", got ", JsonValueForMessage(v)));
  };
  int64_t value = 0;
  if (v.is_number_unsigned()) {
    // Compared as unsigned: 18446744073709551615 must not pass for -1.
    const uint64_t u = v.get<uint64_t>();
    if (max_value < 0 || u > static_cast<uint64_t>(max_value)) return too_large();
    value = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    value = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::floor(d) != d) return TypeError(*this, key, "an integer", v);
    // 2^63 and beyond do not convert to int64_t.
    if (d >= 9223372036854775808.0 || d > static_cast<double>(max_value)) return too_large();
    if (d < -9223372036854775808.0 || d < static_cast<double>(min_value)) return too_small();
    value = static_cast<int64_t>(d);
  } else {
    return TypeError(*this, key, "an integer", v);
  }
  if (value > max_value) return too_large();
  if (value < min_value) return too_small();
  *out = value;
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Int(const char* key, int* out, int64_t min_value, int64_t max_value) const {
  min_value = std::max<int64_t>(min_value, std::numeric_limits<int>::min());
  max_value = std::min<int64_t>(max_value, std::numeric_limits<int>::max());
  int64_t value = *out;
  RETURN_IF_ERROR(Int64(key, &value, min_value, max_value));
  *out = static_cast<int>(value);
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Double(const char* key, double* out, double min_value, double max_value,
                                     bool min_exclusive) const {
  if (!Has(key)) return absl::OkStatus();
  const json& v = object_.at(key);
  if (!v.is_number()) return TypeError(*this, key, "a number", v);
  const double d = v.get<double>();
  const bool above_min = min_exclusive ? d > min_value : d >= min_value;
  if (!std::isfinite(d) || !above_min || d > max_value) {
    return Error(key, absl::StrCat("must be a number ", min_exclusive ? "above " : "from ", min_value,
                                   min_exclusive ? " and at most " : " to ", max_value, ", got ",
                                   JsonValueForMessage(v)));
  }
  *out = d;
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Bool(const char* key, bool* out) const {
  if (!Has(key)) return absl::OkStatus();
  const json& v = object_.at(key);
  if (!v.is_boolean()) return TypeError(*this, key, "true or false", v);
  *out = v.get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFieldReader::String(const char* key, std::string* out) const {
  if (!Has(key)) return absl::OkStatus();
  const json& v = object_.at(key);
  if (!v.is_string()) return TypeError(*this, key, "a string", v);
  *out = v.get<std::string>();
  return absl::OkStatus();
}

}  // namespace relserve
