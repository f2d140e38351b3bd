#include "server/http_api/json_fields.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/http_api/http_status.h"
#include "server/util/field_error.h"
#include "server/util/json_util.h"

namespace relserve {
namespace {

using nlohmann::json;

absl::Status WrongType(const std::string& field, const char* expected, const json& got) {
  return WrongTypeError(field, expected, got);
}

bool Absent(const json& object, const char* field) {
  auto it = object.find(field);
  return it == object.end() || it->is_null();
}

absl::Status EmptyInputs(const std::string& field) { return EmptyField(field); }

}  // namespace

absl::Status EmptyField(const std::string& field) {
  return WithHttpStatus(FieldError(FieldErrorKind::kEmpty, field, absl::StrCat(field, " is empty")), 400);
}

absl::Status WrongTypeError(const std::string& field, const char* expected, const json& got) {
  return FieldError(FieldErrorKind::kInvalid, field,
                    absl::StrCat(field, " must be ", expected, ", not ", JsonTypeName(got)));
}

std::string JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number with a fraction or exponent";
    default: return "a binary value";
  }
}

absl::StatusOr<json> ParseJsonObject(const std::string& body) {
  // Checked before parsing: nothing deeper ever becomes a json value, whose copies,
  // comparisons and dumps recurse once per level.
  if (const size_t at = JsonNestingBeyond(body, kMaxRequestJsonDepth); at != std::string::npos) {
    return WithHttpStatus(absl::InvalidArgumentError(absl::StrCat(
                              "the request body nests deeper than ", kMaxRequestJsonDepth,
                              " levels of arrays and objects (the limit; at byte ", at, ")")),
                          400);
  }
  json parsed;
  try {
    parsed = json::parse(body);
  } catch (const json::exception& e) {
    // parse_error (syntax, invalid UTF-8) and out_of_range (1e400) alike.
    return WithHttpStatus(absl::InvalidArgumentError(absl::StrCat("the request body is not valid JSON: ", e.what())),
                          400);
  }
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request body must be a JSON object, not ", JsonTypeName(parsed)));
  }
  return parsed;
}

bool FieldAbsent(const json& object, const char* field) { return Absent(object, field); }

absl::StatusOr<const json*> Required(const json& object, const char* field) {
  if (Absent(object, field)) return FieldError(FieldErrorKind::kMissing, field, absl::StrCat(field, " is required"));
  return &object.at(field);
}

absl::Status ReadRequiredNonEmptyString(const json& object, const char* field, std::string* out) {
  auto value = Required(object, field);
  if (!value.ok()) return value.status();
  if (!(*value)->is_string()) return WrongType(field, "a string", **value);
  *out = (*value)->get<std::string>();
  if (out->empty()) return EmptyField(field);
  return absl::OkStatus();
}

absl::Status ReadBool(const json& object, const char* field, bool* out) {
  if (Absent(object, field)) return absl::OkStatus();
  const json& v = object.at(field);
  if (!v.is_boolean()) return WrongType(field, "true or false", v);
  *out = v.get<bool>();
  return absl::OkStatus();
}

absl::Status ReadString(const json& object, const char* field, std::string* out) {
  if (Absent(object, field)) return absl::OkStatus();
  const json& v = object.at(field);
  if (!v.is_string()) return WrongType(field, "a string", v);
  *out = v.get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadInt(const json& object, const char* field, int64_t min, int64_t max, int* out) {
  if (Absent(object, field)) return absl::OkStatus();
  const json& v = object.at(field);
  auto out_of_range = [&] {
    return FieldError(FieldErrorKind::kInvalid, field,
                      absl::StrCat(field, " must be an integer in [", min, ", ", max, "], not ", JsonValueForMessage(v)));
  };
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(max)) return out_of_range();
  } else if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < min || x > max) return out_of_range();
  } else {
    return WrongType(field, "an integer", v);
  }
  const int64_t x = v.get<int64_t>();
  if (x < min) return out_of_range();
  *out = static_cast<int>(x);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const json& value, const std::string& field) {
  if (!value.is_array()) return WrongType(field, "an array of token ids", value);
  if (value.empty()) return EmptyInputs(field);
  std::vector<int32_t> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const json& v = value[i];
    constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
    const bool in_range = (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t{kMaxId}) ||
                          (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= kMaxId);
    if (!in_range) {
      const std::string item = absl::StrCat(field, "[", i, "]");
      return FieldError(FieldErrorKind::kInvalid, item,
                        absl::StrCat(item, " must be a token id (an integer in [0, 2147483647]), not ",
                                     JsonValueForMessage(v)));
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

absl::StatusOr<std::vector<Input>> ReadEmbedInputs(const json& value, const std::string& field) {
  std::vector<Input> inputs;
  if (value.is_string()) {
    if (value.get_ref<const std::string&>().empty()) return EmptyInputs(field);
    inputs.push_back(Input::Text(value.get<std::string>()));
    return inputs;
  }
  if (!value.is_array()) {
    return WrongType(field, "a string, an array of strings, an array of token ids or an array of arrays of token ids",
                     value);
  }
  if (value.empty()) return EmptyInputs(field);
  if (value[0].is_number()) {  // one input given as token ids
    auto ids = ReadTokenIds(value, field);
    if (!ids.ok()) return ids.status();
    inputs.push_back(Input::Tokens(std::move(*ids)));
    return inputs;
  }
  inputs.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item = absl::StrCat(field, "[", i, "]");
    const json& v = value[i];
    if (v.is_string()) {
      if (v.get_ref<const std::string&>().empty()) return EmptyInputs(item);
      inputs.push_back(Input::Text(v.get<std::string>()));
    } else if (v.is_array()) {
      auto ids = ReadTokenIds(v, item);
      if (!ids.ok()) return ids.status();
      inputs.push_back(Input::Tokens(std::move(*ids)));
    } else {
      return WrongType(item, "a string or an array of token ids", v);
    }
  }
  return inputs;
}

absl::Status ReadTruncation(const json& object, Truncation* out) {
  if (!Absent(object, "truncate")) {
    bool truncate = false;
    if (absl::Status s = ReadBool(object, "truncate", &truncate); !s.ok()) return s;
    out->truncate = truncate;
  }
  if (Absent(object, "truncation_direction")) return absl::OkStatus();
  const json& v = object.at("truncation_direction");
  if (!v.is_string()) return WrongType("truncation_direction", "a string", v);
  const std::string& d = v.get_ref<const std::string&>();
  if (d == "Right" || d == "right") {
    out->direction = TruncationDirection::kRight;
  } else if (d == "Left" || d == "left") {
    out->direction = TruncationDirection::kLeft;
  } else {
    return FieldError(FieldErrorKind::kInvalid, "truncation_direction",
                      absl::StrCat("truncation_direction must be \"Right\" or \"Left\", not ", JsonValueForMessage(v)));
  }
  return absl::OkStatus();
}

absl::Status ReadWholeInput(const json& object, EmbedRequest* out) {
  if (!Absent(object, "whole_input")) {
    bool whole = false;
    if (absl::Status s = ReadBool(object, "whole_input", &whole); !s.ok()) return s;
    out->whole_input = whole;
  }
  if (!Absent(object, "window_overlap")) {
    int overlap = 0;
    if (absl::Status s = ReadInt(object, "window_overlap", 0, 1 << 20, &overlap); !s.ok()) return s;
    out->window_overlap = overlap;
  }
  return absl::OkStatus();
}

absl::Status ReadRerankChunking(const json& object, RerankRequest* out) {
  if (!Absent(object, "chunk_documents")) {
    bool chunk = false;
    if (absl::Status s = ReadBool(object, "chunk_documents", &chunk); !s.ok()) return s;
    out->chunk_documents = chunk;
  }
  if (!Absent(object, "max_chunks_per_doc")) {
    int chunks = 0;
    if (absl::Status s = ReadInt(object, "max_chunks_per_doc", 1, 1 << 20, &chunks); !s.ok()) return s;
    out->max_chunks_per_doc = chunks;
  }
  if (!Absent(object, "chunk_overlap")) {
    int overlap = 0;
    if (absl::Status s = ReadInt(object, "chunk_overlap", 0, 1 << 20, &overlap); !s.ok()) return s;
    out->chunk_overlap = overlap;
  }
  return absl::OkStatus();
}

void AddRerankWindows(const RerankResult& result, const RerankHit& hit, json* out) {
  if (result.chunked) (*out)["windows"] = hit.windows;
}

std::string DumpJson(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace relserve
