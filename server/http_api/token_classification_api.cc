#include "server/http_api/token_classification_api.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http_api/json_fields.h"

namespace relserve {

using nlohmann::json;

namespace {

absl::Status InParameters(const absl::Status& s) {
  return s.ok() ? s : absl::Status(s.code(), absl::StrCat("parameters.", s.message()));
}

}  // namespace

absl::StatusOr<TokenClassificationHttpRequest> ParseTokenClassification(const json& body) {
  TokenClassificationHttpRequest r;
  TokenClassifyRequest& q = r.request;
  q.aggregation_strategy = AggregationStrategy::kSimple;
  auto inputs = Required(body, "inputs");
  if (!inputs.ok()) return inputs.status();
  const json& in = **inputs;
  if (in.is_string()) {
    q.texts.push_back(in.get<std::string>());
  } else if (in.is_array()) {
    if (in.empty()) return EmptyField("inputs");
    r.batch = true;
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].is_string()) return WrongTypeError(absl::StrCat("inputs[", i, "]"), "a string", in[i]);
      q.texts.push_back(in[i].get<std::string>());
    }
  } else {
    return WrongTypeError("inputs", "a string or an array of strings", in);
  }
  if (!FieldAbsent(body, "parameters")) {
    const json& p = body.at("parameters");
    if (!p.is_object()) return WrongTypeError("parameters", "an object", p);
    if (!FieldAbsent(p, "aggregation_strategy")) {
      const json& a = p.at("aggregation_strategy");
      if (!a.is_string()) return WrongTypeError("parameters.aggregation_strategy", "a string", a);
      auto strategy = ParseAggregationStrategy(a.get<std::string>(), "parameters.aggregation_strategy");
      if (!strategy.ok()) return strategy.status();
      q.aggregation_strategy = *strategy;
    }
    if (!FieldAbsent(p, "ignore_labels")) {
      const json& v = p.at("ignore_labels");
      if (!v.is_array()) return WrongTypeError("parameters.ignore_labels", "an array of strings", v);
      std::vector<std::string> ignore;
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string()) return WrongTypeError(absl::StrCat("parameters.ignore_labels[", i, "]"), "a string", v[i]);
        ignore.push_back(v[i].get<std::string>());
      }
      q.ignore_labels = std::move(ignore);
    }
    if (!FieldAbsent(p, "stride")) {
      int stride = 0;
      if (absl::Status s = InParameters(ReadInt(p, "stride", 0, 1 << 30, &stride)); !s.ok()) return s;
      q.stride = stride;
    }
  }
  if (absl::Status s = ReadString(body, "model", &q.model); !s.ok()) return s;
  return r;
}

json TokenClassificationJson(const TokenClassifyResult& result, AggregationStrategy strategy, bool batch) {
  json all = json::array();
  const bool none = strategy == AggregationStrategy::kNone;
  for (const std::vector<TokenEntity>& entities : result.results) {
    json list = json::array();
    for (const TokenEntity& e : entities) {
      json entry;
      entry[none ? "entity" : "entity_group"] = e.entity;
      entry["score"] = e.score;
      if (none) entry["index"] = e.index;
      entry["word"] = e.word;
      entry["start"] = e.start;
      entry["end"] = e.end;
      list.push_back(std::move(entry));
    }
    all.push_back(std::move(list));
  }
  if (!batch && all.size() == 1) return all[0];
  return all;
}

}  // namespace relserve
