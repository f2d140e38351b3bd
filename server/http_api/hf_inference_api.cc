#include "server/http_api/hf_inference_api.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"

namespace relserve {

using nlohmann::json;

namespace {

absl::Status WrongType(const std::string& field, const char* expected, const json& got) {
  return WrongTypeError(field, expected, got);
}

absl::Status Empty(const std::string& field) { return EmptyField(field); }

// The pipeline's _parse_labels: a string is split on commas, each part stripped, empty parts dropped.
absl::StatusOr<std::vector<std::string>> ReadLabels(const json& v) {
  const char* field = "parameters.candidate_labels";
  std::vector<std::string> labels;
  if (v.is_string()) {
    for (absl::string_view part : absl::StrSplit(v.get_ref<const std::string&>(), ',')) {
      absl::string_view stripped = absl::StripAsciiWhitespace(part);
      if (!stripped.empty()) labels.emplace_back(stripped);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) return WrongType(absl::StrCat(field, "[", i, "]"), "a string", v[i]);
      if (v[i].get_ref<const std::string&>().empty()) return Empty(absl::StrCat(field, "[", i, "]"));
      labels.push_back(v[i].get<std::string>());
    }
  } else {
    return WrongType(field, "an array of strings or a comma-separated string", v);
  }
  if (labels.empty()) return Empty(field);
  return labels;
}

}  // namespace

bool HasCandidateLabels(const json& body) {
  auto it = body.find("parameters");
  return it != body.end() && it->is_object() && it->contains("candidate_labels") &&
         !it->at("candidate_labels").is_null();
}

absl::StatusOr<ZeroShotHttpRequest> ParseZeroShot(const json& body) {
  ZeroShotHttpRequest r;
  auto inputs = Required(body, "inputs");
  if (!inputs.ok()) return inputs.status();
  const json& in = **inputs;
  if (in.is_string()) {
    if (in.get_ref<const std::string&>().empty()) return Empty("inputs");
    r.zero_shot.sequences.push_back(in.get<std::string>());
  } else if (in.is_array()) {
    if (in.empty()) return Empty("inputs");
    r.batch = true;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].is_string()) return WrongType(absl::StrCat("inputs[", i, "]"), "a string", in[i]);
      if (in[i].get_ref<const std::string&>().empty()) return Empty(absl::StrCat("inputs[", i, "]"));
      r.zero_shot.sequences.push_back(in[i].get<std::string>());
    }
  } else {
    return WrongType("inputs", "a string or an array of strings", in);
  }
  auto parameters = Required(body, "parameters");
  if (!parameters.ok()) {
    return absl::Status(parameters.status().code(),
                        absl::StrCat(parameters.status().message(), " (it holds candidate_labels)"));
  }
  const json& p = **parameters;
  if (!p.is_object()) return WrongType("parameters", "an object", p);
  auto labels_field = Required(p, "candidate_labels");
  if (!labels_field.ok()) {
    return absl::Status(labels_field.status().code(), absl::StrCat("parameters.", labels_field.status().message()));
  }
  auto labels = ReadLabels(**labels_field);
  if (!labels.ok()) return labels.status();
  r.zero_shot.candidate_labels = std::move(*labels);
  if (absl::Status s = ReadString(p, "hypothesis_template", &r.zero_shot.hypothesis_template); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameters.", s.message()));
  }
  if (!FieldAbsent(p, "hypothesis_template") && r.zero_shot.hypothesis_template.empty()) {
    return Empty("parameters.hypothesis_template");
  }
  // The pipeline's deprecated multi_class, then multi_label, which wins.
  for (const char* name : {"multi_class", "multi_label"}) {
    if (absl::Status s = ReadBool(p, name, &r.zero_shot.multi_label); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("parameters.", s.message()));
    }
  }
  if (absl::Status s = ReadTruncation(p, &r.zero_shot.truncation); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("parameters.", s.message()));
  }
  if (absl::Status s = ReadString(body, "model", &r.zero_shot.model); !s.ok()) return s;
  return r;
}

json ZeroShotJson(const ZeroShotResult& result, bool batch) {
  json all = json::array();
  for (const ZeroShotClassification& c : result.results) {
    json labels = json::array(), scores = json::array();
    for (const LabelScore& l : c.labels) {
      labels.push_back(l.label);
      scores.push_back(l.score);
    }
    all.push_back(json{{"sequence", c.sequence}, {"labels", std::move(labels)}, {"scores", std::move(scores)}});
  }
  if (!batch && all.size() == 1) return all[0];
  return all;
}

}  // namespace relserve
