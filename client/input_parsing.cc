#include "client/input_parsing.h"

#include "server/util/utf8.h"

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace relserve::client {
namespace {

using nlohmann::json;

absl::StatusOr<json> ParseObjectOrString(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    // e.what() starts "[json.exception.parse_error.101] "; the rest says what and where.
    std::string reason = e.what();
    if (const auto close = reason.find("] "); reason.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
      reason.erase(0, close + 2);
    }
    // out_of_range.406: a number literal beyond what a double holds, such as 1e400.
    if (e.id == 406) reason += " (beyond the range of a 64-bit float)";
    return absl::InvalidArgumentError(absl::StrCat("not valid JSON: ", reason));
  }
  if (!j.is_object() && !j.is_string()) return absl::InvalidArgumentError("expected a JSON object");
  return j;
}

absl::StatusOr<std::string> StringField(const json& j, const char* key) {
  if (!j[key].is_string()) return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a string"));
  return j[key].get<std::string>();
}

absl::Status IntList(const json& j, const char* key, google::protobuf::RepeatedField<int32_t>* out) {
  const json& list = j[key];
  if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a list of integers"));
  for (size_t i = 0; i < list.size(); ++i) {
    const json& v = list[i];
    if (!v.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", key, "\" must be a list of integers, got ", v.dump(-1, ' ', false, json::error_handler_t::replace),
                       " at index ", i));
    }
    // Non-negative literals are unsigned in the parser; compared as such, 18446744073709551615
    // does not pass for -1.
    if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat("\"", key, "\"[", i, "] is ", v.dump(),
                                                     ": ids must be integers >= 0 and <= ", INT32_MAX));
    }
    out->Add(static_cast<int32_t>(v.get<uint64_t>()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ParseTokenIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::string s = text;
  for (char& ch : s) {
    if (ch == '[' || ch == ']' || ch == ',') ch = ' ';
  }
  for (absl::string_view part : absl::StrSplit(s, ' ', absl::SkipWhitespace())) {
    int32_t id;
    if (!absl::SimpleAtoi(part, &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("\"", part, "\" is not a token id"));
    }
    ids.push_back(id);
  }
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" holds no token ids"));
  return ids;
}

absl::StatusOr<std::vector<v1::Input>> InputsFromArgs(const std::vector<std::string>& args, bool pairs, bool ids) {
  std::vector<v1::Input> inputs;
  if (pairs && args.size() % 2 != 0) {
    return absl::InvalidArgumentError("--pairs: expected an even number of arguments (TEXT TEXT_PAIR ...)");
  }
  // Text goes out in protobuf strings, which must be UTF-8: the server would refuse it.
  if (!ids) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (absl::Status s = ValidateUtf8(args[i], absl::StrCat("argument ", i + 1)); !s.ok()) return s;
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    v1::Input input;
    if (pairs) {
      input.mutable_pair()->set_first(args[i]);
      input.mutable_pair()->set_second(args[++i]);
    } else if (ids) {
      auto parsed = ParseTokenIds(args[i]);
      if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("--ids: ", parsed.status().message()));
      input.mutable_tokens()->mutable_ids()->Add(parsed->begin(), parsed->end());
    } else {
      input.set_text(args[i]);
    }
    inputs.push_back(std::move(input));
  }
  return inputs;
}

absl::StatusOr<v1::Input> ParseInputLine(const std::string& line) {
  auto parsed = ParseObjectOrString(line);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  v1::Input input;
  if (j.is_string()) {
    input.set_text(j.get<std::string>());
    return input;
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "text" && key != "text_pair" && key != "tokens" && key != "token_type_ids") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown key \"", key, "\" (expected text, text_pair, tokens, token_type_ids)"));
    }
  }
  const bool text = j.contains("text"), tokens = j.contains("tokens");
  if (text == tokens) return absl::InvalidArgumentError("expected exactly one of \"text\" and \"tokens\"");
  if (tokens) {
    if (j.contains("text_pair")) return absl::InvalidArgumentError("\"text_pair\" goes with \"text\", not \"tokens\"");
    v1::TokenIds* ids = input.mutable_tokens();
    if (absl::Status s = IntList(j, "tokens", ids->mutable_ids()); !s.ok()) return s;
    if (ids->ids().empty()) return absl::InvalidArgumentError("\"tokens\" is empty");
    if (j.contains("token_type_ids")) {
      if (absl::Status s = IntList(j, "token_type_ids", ids->mutable_token_type_ids()); !s.ok()) return s;
      if (ids->token_type_ids_size() != ids->ids_size()) {
        return absl::InvalidArgumentError("\"token_type_ids\" must be as long as \"tokens\"");
      }
    }
    return input;
  }
  if (j.contains("token_type_ids")) return absl::InvalidArgumentError("\"token_type_ids\" goes with \"tokens\"");
  auto first = StringField(j, "text");
  if (!first.ok()) return first.status();
  if (!j.contains("text_pair")) {
    input.set_text(*first);
    return input;
  }
  auto second = StringField(j, "text_pair");
  if (!second.ok()) return second.status();
  input.mutable_pair()->set_first(*first);
  input.mutable_pair()->set_second(*second);
  return input;
}

absl::StatusOr<RerankInput> ParseRerankLine(const std::string& line) {
  auto parsed = ParseObjectOrString(line);
  if (!parsed.ok()) return parsed.status();
  const json& j = *parsed;
  if (!j.is_object() || !j.contains("query") || !j.contains("documents")) {
    return absl::InvalidArgumentError("expected {\"query\": ..., \"documents\": [...]}");
  }
  RerankInput r;
  auto query = StringField(j, "query");
  if (!query.ok()) return query.status();
  r.query = *query;
  if (!j["documents"].is_array()) return absl::InvalidArgumentError("\"documents\" must be a list of strings");
  for (const json& d : j["documents"]) {
    if (!d.is_string()) return absl::InvalidArgumentError("\"documents\" must be a list of strings");
    r.documents.push_back(d.get<std::string>());
  }
  if (r.documents.empty()) return absl::InvalidArgumentError("\"documents\" is empty");
  return r;
}

bool IsBlankLine(const std::string& line) {
  for (char ch : line) {
    if (!absl::ascii_isspace(static_cast<unsigned char>(ch))) return false;
  }
  return true;
}

}  // namespace relserve::client
