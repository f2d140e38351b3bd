#include "server/safetensors/header_parser.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// ordered_json keeps the header's key order, which tensors() promises to preserve.
using Json = nlohmann::ordered_json;

// A real header nests 3 levels (root, entry, shape list). The cap bounds the parser's memory and
// keeps error messages short on hostile input.
constexpr int kMaxJsonDepth = 16;
constexpr size_t kMaxQuotedValueChars = 60;

struct TooDeep {};

std::string Quote(const Json& value) {
  std::string text = value.dump();
  if (text.size() > kMaxQuotedValueChars) text = text.substr(0, kMaxQuotedValueChars) + "...";
  return text;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Parses the header JSON; also rejects duplicate top-level keys, which JSON libraries would
// otherwise resolve silently (and differently from one another).
absl::StatusOr<Json> ParseHeaderJson(std::string_view text, const std::string& what) {
  std::set<std::string> seen;
  std::optional<std::string> duplicate;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!seen.insert(parsed.get<std::string>()).second && !duplicate) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  // nlohmann stops at a NUL byte as if the input ended there, which would let arbitrary bytes
  // trail a header; valid JSON never contains a raw NUL.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": header is not valid JSON: NUL byte at offset ", nul));
  }
  Json root;
  try {
    root = Json::parse(text.begin(), text.end(), callback);
  } catch (const TooDeep&) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": header JSON nests deeper than ", kMaxJsonDepth, " levels"));
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": header is not valid JSON: ", JsonErrorReason(e)));
  }
  if (duplicate) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": header lists '", *duplicate, "' more than once"));
  }
  return root;
}

std::optional<uint64_t> AsNonNegativeInteger(const Json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

absl::Status ParseMetadata(const Json& value, const std::string& what,
                           std::map<std::string, std::string>* metadata) {
  // The reference reader models __metadata__ as Option<map>, so null means "none".
  if (value.is_null()) return absl::OkStatus();
  if (!value.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": __metadata__ must be an object of strings, got ", value.type_name()));
  }
  for (const auto& item : value.items()) {
    if (!item.value().is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": __metadata__ value for key '",
                                                     item.key(), "' is not a string but ",
                                                     item.value().type_name()));
    }
    (*metadata)[item.key()] = item.value().get<std::string>();
  }
  return absl::OkStatus();
}

class EntryParser {
 public:
  EntryParser(const std::string& what, const std::string& name, uint64_t data_size)
      : prefix_(absl::StrCat(what, ": tensor '", name, "': ")), data_size_(data_size) {
    entry_.name = name;
  }

  absl::StatusOr<SafetensorsEntry> Parse(const Json& value) {
    if (!value.is_object())
      return Invalid(absl::StrCat("entry is a ", value.type_name(), ", not an object"));
    for (const char* field : {"dtype", "shape", "data_offsets"}) {
      if (!value.contains(field)) return Invalid(absl::StrCat("missing '", field, "'"));
    }
    RETURN_IF_ERROR(ParseDType(value["dtype"]));
    ASSIGN_OR_RETURN(uint64_t nbytes, ParseShape(value["shape"]));
    RETURN_IF_ERROR(ParseOffsets(value["data_offsets"], nbytes));
    return std::move(entry_);
  }

 private:
  absl::Status Invalid(absl::string_view problem) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, problem));
  }

  absl::Status ParseDType(const Json& value) {
    if (!value.is_string())
      return Invalid(absl::StrCat("dtype ", Quote(value), " is not a string"));
    auto dtype = ParseStDType(value.get<std::string>());
    if (!dtype.ok()) return Invalid(dtype.status().message());
    entry_.dtype = *dtype;
    return absl::OkStatus();
  }

  // Returns the byte size the shape implies.
  absl::StatusOr<uint64_t> ParseShape(const Json& value) {
    if (!value.is_array()) return Invalid(absl::StrCat("shape ", Quote(value), " is not a list"));
    constexpr uint64_t kMaxDim = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    int64_t numel = 1;
    // Like the reference reader, any overflow of the running product is an error, even if a
    // later 0 would make the tensor empty: TensorView::numel() multiplies in the same order.
    bool overflow = false;
    for (size_t i = 0; i < value.size(); ++i) {
      const Json& dim = value[i];
      if (!dim.is_number_integer()) {
        return Invalid(absl::StrCat("shape[", i, "] is ", Quote(dim), ", not an integer"));
      }
      std::optional<uint64_t> d = AsNonNegativeInteger(dim);
      if (!d) return Invalid(absl::StrCat("shape[", i, "] is negative (", Quote(dim), ")"));
      if (*d > kMaxDim) return Invalid(absl::StrCat("shape[", i, "] = ", *d, " is too large"));
      entry_.shape.push_back(static_cast<int64_t>(*d));
      overflow = overflow || __builtin_mul_overflow(numel, entry_.shape.back(), &numel);
    }
    uint64_t nbytes = 0;
    if (overflow ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel),
                               static_cast<uint64_t>(StDTypeSize(entry_.dtype)), &nbytes)) {
      return Invalid(
          absl::StrCat("element count of shape ", ShapeString(entry_.shape), " overflows 64 bits"));
    }
    return nbytes;
  }

  absl::Status ParseOffsets(const Json& value, uint64_t nbytes) {
    std::optional<uint64_t> begin, end;
    if (value.is_array() && value.size() == 2) {
      begin = AsNonNegativeInteger(value[0]);
      end = AsNonNegativeInteger(value[1]);
    }
    if (!begin || !end) {
      return Invalid(absl::StrCat("data_offsets ", Quote(value),
                                  " is not two non-negative integers [begin, end]"));
    }
    if (*begin > *end) {
      return Invalid(absl::StrCat("data_offsets [", *begin, ",", *end, "] end before begin"));
    }
    if (*end - *begin != nbytes) {
      return Invalid(absl::StrCat("data_offsets [", *begin, ",", *end, "] span ", *end - *begin,
                                  " bytes but ", std::string(StDTypeName(entry_.dtype)), " ",
                                  ShapeString(entry_.shape), " needs ", nbytes));
    }
    if (*end > data_size_) {
      return absl::DataLossError(absl::StrCat(prefix_, "data ends at offset ", *end,
                                              " but the data buffer holds only ", data_size_,
                                              " bytes (file truncated?)"));
    }
    entry_.begin = *begin;
    entry_.end = *end;
    return absl::OkStatus();
  }

  std::string prefix_;
  uint64_t data_size_;
  SafetensorsEntry entry_;
};

// Overlapping views would alias one another's bytes: a sign of a corrupt or hostile header.
absl::Status CheckNoOverlap(const std::vector<SafetensorsEntry>& tensors, const std::string& what) {
  std::vector<const SafetensorsEntry*> sorted;
  for (const SafetensorsEntry& e : tensors) {
    if (e.begin != e.end) sorted.push_back(&e);  // empty tensors occupy no bytes
  }
  std::sort(sorted.begin(), sorted.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin < b->begin;
  });
  const SafetensorsEntry* furthest = nullptr;  // the earlier tensor reaching furthest
  for (const SafetensorsEntry* e : sorted) {
    if (furthest != nullptr && e->begin < furthest->end) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": tensors '", furthest->name, "' [", furthest->begin, ",", furthest->end,
          ") and '", e->name, "' [", e->begin, ",", e->end, ") overlap"));
    }
    if (furthest == nullptr || e->end > furthest->end) furthest = e;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(const uint8_t* bytes, size_t size,
                                                         const std::string& what) {
  if (size < 8) {
    return absl::DataLossError(
        absl::StrCat(what, ": file is ", size, " bytes, too short for the 8-byte header length"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian
  if (n > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": header length ", n, " exceeds the ",
                                                   kMaxSafetensorsHeaderBytes, "-byte limit"));
  }
  if (n > size - 8) {
    return absl::DataLossError(absl::StrCat(what, ": header length ", n,
                                            " runs past the end of the ", size,
                                            "-byte file (file truncated?)"));
  }
  SafetensorsLayout layout;
  layout.header_bytes = n;
  layout.data_start = 8 + n;
  const uint64_t data_size = size - layout.data_start;

  std::string_view text(reinterpret_cast<const char*>(bytes + 8), n);
  ASSIGN_OR_RETURN(Json root, ParseHeaderJson(text, what));
  if (!root.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": header is a JSON ", root.type_name(), ", not an object"));
  }
  for (const auto& item : root.items()) {
    if (item.key() == "__metadata__") {
      RETURN_IF_ERROR(ParseMetadata(item.value(), what, &layout.metadata));
      continue;
    }
    EntryParser parser(what, item.key(), data_size);
    ASSIGN_OR_RETURN(SafetensorsEntry entry, parser.Parse(item.value()));
    layout.tensors.push_back(std::move(entry));
  }
  RETURN_IF_ERROR(CheckNoOverlap(layout.tensors, what));
  return layout;
}

}  // namespace relserve
