#include "server/http_api/tei_api.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/http_api/http_status.h"
#include "server/http_api/json_fields.h"
#include "server/util/field_error.h"
#include "server/util/quote.h"

namespace relserve {

using nlohmann::json;

namespace {

absl::Status WrongType(const std::string& field, const char* expected, const json& got) {
  return WrongTypeError(field, expected, got);
}

absl::Status NonEmptyString(const json& v, const std::string& field) {
  if (!v.is_string()) return WrongType(field, "a string", v);
  if (v.get_ref<const std::string&>().empty()) return EmptyField(field);
  return absl::OkStatus();
}

// ["a"] or ["a", "b"]: one text or a pair.
absl::StatusOr<Input> SequenceOf(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty() || v.size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be [text] or a pair [text, text], not ",
                     v.is_array() ? absl::StrCat("an array of ", v.size()) : JsonTypeName(v)));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (absl::Status s = NonEmptyString(v[i], absl::StrCat(field, "[", i, "]")); !s.ok()) return s;
  }
  if (v.size() == 1) return Input::Text(v[0].get<std::string>());
  return Input::Pair(v[0].get<std::string>(), v[1].get<std::string>());
}

}  // namespace

absl::StatusOr<EmbedRequest> ParseTeiEmbed(const json& body) {
  EmbedRequest r;
  auto inputs_field = Required(body, "inputs");
  if (!inputs_field.ok()) return inputs_field.status();
  auto inputs = ReadEmbedInputs(**inputs_field, "inputs");
  if (!inputs.ok()) return inputs.status();
  r.inputs = std::move(*inputs);
  r.normalize = true;  // TEI's default
  r.dimensions_renormalize = false;  // TEI cuts to `dimensions` and normalises only when asked
  if (absl::Status s = ReadBool(body, "normalize", &r.normalize); !s.ok()) return s;
  if (absl::Status s = ReadTruncation(body, &r.truncation); !s.ok()) return s;
  if (absl::Status s = ReadInt(body, "dimensions", 1, 1 << 20, &r.dimensions); !s.ok()) return s;
  // The model's sentence-transformers prompt of that name goes before each text (serving checks it).
  if (absl::Status s = ReadString(body, "prompt_name", &r.prompt_name); !s.ok()) return s;
  if (absl::Status s = ReadWholeInput(body, &r); !s.ok()) return s;
  return r;
}

namespace {

// /embed_sparse's and /embed_multi_vector's request: /embed's without normalize and dimensions.
absl::StatusOr<EmbedRequest> ParseEmbedWithHead(const json& body) {
  EmbedRequest r;
  auto inputs_field = Required(body, "inputs");
  if (!inputs_field.ok()) return inputs_field.status();
  auto inputs = ReadEmbedInputs(**inputs_field, "inputs");
  if (!inputs.ok()) return inputs.status();
  r.inputs = std::move(*inputs);
  if (absl::Status s = ReadTruncation(body, &r.truncation); !s.ok()) return s;
  if (absl::Status s = ReadString(body, "prompt_name", &r.prompt_name); !s.ok()) return s;
  if (absl::Status s = ReadWholeInput(body, &r); !s.ok()) return s;
  if (absl::Status s = ReadTeiModel(body, &r.model); !s.ok()) return s;
  return r;
}

// A row-major [rows, width] array as JSON rows, each L2-normalised when asked.
json Rows(const std::vector<float>& values, int width, bool normalize) {
  json rows = json::array();
  const size_t w = static_cast<size_t>(std::max(width, 1));
  for (size_t row = 0; row * w < values.size(); ++row) {
    std::vector<float> v(values.begin() + static_cast<std::ptrdiff_t>(row * w),
                         values.begin() + static_cast<std::ptrdiff_t>(std::min(values.size(), (row + 1) * w)));
    if (normalize) {
      double norm = 0;
      for (float x : v) norm += double(x) * x;
      norm = std::sqrt(norm);
      if (norm > 1e-12) {
        for (float& x : v) x = static_cast<float>(x / norm);
      }
    }
    rows.push_back(std::move(v));
  }
  return rows;
}

}  // namespace

absl::StatusOr<EmbedRequest> ParseTeiEmbedSparse(const json& body) {
  auto r = ParseEmbedWithHead(body);
  if (r.ok()) r->return_sparse = true;
  return r;
}

json TeiEmbedSparseJson(const EmbedResult& result) {
  json out = json::array();
  for (const Embedding& e : result.embeddings) {
    json values = json::array();
    for (const auto& [index, value] : e.sparse) values.push_back(json{{"index", index}, {"value", value}});
    out.push_back(std::move(values));
  }
  return out;
}

absl::StatusOr<EmbedRequest> ParseMultiVector(const json& body) {
  auto r = ParseEmbedWithHead(body);
  if (!r.ok()) return r;
  r->return_multi_vector = true;
  // A ColBERT model's side, as PyLate and Cohere name it: input_type, the same as prompt_name.
  std::string input_type;
  if (absl::Status s = ReadString(body, "input_type", &input_type); !s.ok()) return s;
  if (!input_type.empty()) {
    if (!r->prompt_name.empty() && r->prompt_name != input_type) {
      return FieldError(FieldErrorKind::kInvalid, "input_type",
                        absl::StrCat("input_type \"", input_type, "\" and prompt_name \"", r->prompt_name,
                                     "\" disagree: send one of them"));
    }
    r->prompt_name = input_type;
  }
  return r;
}

json MultiVectorJson(const EmbedResult& result) {
  json all = json::array();
  for (const Embedding& e : result.embeddings) all.push_back(Rows(e.multi_vector, e.multi_vector_dim, false));
  return all;
}

json NormalizedTokenStatesJson(const EmbedTokensResult& result) {
  json all = json::array();
  for (const TokenStates& t : result.sequences) all.push_back(Rows(t.values, t.hidden_size, /*normalize=*/true));
  return all;
}

absl::StatusOr<EmbedRequest> ParseTeiSimilarity(const json& body) {
  EmbedRequest r;
  auto inputs = Required(body, "inputs");
  if (!inputs.ok()) return inputs.status();
  if (!(*inputs)->is_object()) return WrongType("inputs", "an object with source_sentence and sentences", **inputs);
  auto source = Required(**inputs, "source_sentence");
  if (!source.ok()) return absl::Status(source.status().code(), absl::StrCat("inputs.", source.status().message()));
  if (absl::Status s = NonEmptyString(**source, "inputs.source_sentence"); !s.ok()) return s;
  r.inputs.push_back(Input::Text((*source)->get<std::string>()));
  auto sentences = Required(**inputs, "sentences");
  if (!sentences.ok()) {
    return absl::Status(sentences.status().code(), absl::StrCat("inputs.", sentences.status().message()));
  }
  if (!(*sentences)->is_array()) return WrongType("inputs.sentences", "an array of strings", **sentences);
  if ((*sentences)->empty()) return EmptyField("inputs.sentences");
  for (size_t i = 0; i < (*sentences)->size(); ++i) {
    const json& t = (**sentences)[i];
    if (absl::Status s = NonEmptyString(t, absl::StrCat("inputs.sentences[", i, "]")); !s.ok()) return s;
    r.inputs.push_back(Input::Text(t.get<std::string>()));
  }
  r.normalize = true;
  const auto parameters = body.find("parameters");
  if (parameters != body.end() && !parameters->is_null()) {
    if (!parameters->is_object()) return WrongType("parameters", "an object", *parameters);
    if (absl::Status s = ReadTruncation(*parameters, &r.truncation); !s.ok()) return s;
    if (absl::Status s = ReadString(*parameters, "prompt_name", &r.prompt_name); !s.ok()) return s;
  }
  return r;
}

json TeiSimilarityJson(const EmbedResult& result) {
  json out = json::array();
  if (result.embeddings.empty()) return out;
  const std::vector<float>& source = result.embeddings[0].values;
  for (size_t i = 1; i < result.embeddings.size(); ++i) {
    const std::vector<float>& v = result.embeddings[i].values;
    double dot = 0;
    for (size_t k = 0; k < v.size() && k < source.size(); ++k) dot += double(source[k]) * v[k];
    out.push_back(static_cast<float>(dot));
  }
  return out;
}

json TeiEmbedJson(const EmbedResult& result) {
  json out = json::array();
  for (const Embedding& e : result.embeddings) out.push_back(e.values);
  return out;
}

absl::StatusOr<RerankRequest> ParseTeiRerank(const json& body) {
  RerankRequest r;
  auto query = Required(body, "query");
  if (!query.ok()) return query.status();
  if (absl::Status s = NonEmptyString(**query, "query"); !s.ok()) return s;
  r.query = (*query)->get<std::string>();
  auto texts = Required(body, "texts");
  if (!texts.ok()) return texts.status();
  if (!(*texts)->is_array()) return WrongType("texts", "an array of strings", **texts);
  if ((*texts)->empty()) return EmptyField("texts");
  for (size_t i = 0; i < (*texts)->size(); ++i) {
    const json& t = (**texts)[i];
    if (absl::Status s = NonEmptyString(t, absl::StrCat("texts[", i, "]")); !s.ok()) return s;
    r.documents.push_back(t.get<std::string>());
  }
  if (absl::Status s = ReadTruncation(body, &r.truncation); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "raw_scores", &r.raw_scores); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "return_text", &r.return_documents); !s.ok()) return s;
  if (absl::Status s = ReadRerankChunking(body, &r); !s.ok()) return s;
  return r;
}

json TeiRerankJson(const RerankResult& result) {
  json out = json::array();
  for (const RerankHit& h : result.results) {
    json rank = {{"index", h.index}, {"score", h.score}};
    if (!h.document.empty()) rank["text"] = h.document;
    AddRerankWindows(result, h, &rank);
    out.push_back(std::move(rank));
  }
  return out;
}

absl::StatusOr<TeiPredictRequest> ParseTeiPredict(const json& body) {
  TeiPredictRequest r;
  auto inputs = Required(body, "inputs");
  if (!inputs.ok()) return inputs.status();
  const json& v = **inputs;
  if (v.is_string()) {
    if (absl::Status s = NonEmptyString(v, "inputs"); !s.ok()) return s;
    r.classify.inputs.push_back(Input::Text(v.get<std::string>()));
  } else if (v.is_array() && !v.empty() && v[0].is_string()) {  // one text or one pair
    auto one = SequenceOf(v, "inputs");
    if (!one.ok()) return one.status();
    r.classify.inputs.push_back(std::move(*one));
  } else if (v.is_array()) {  // a batch of [text] and [text, text]
    if (v.empty()) return EmptyField("inputs");
    r.batch = true;
    for (size_t i = 0; i < v.size(); ++i) {
      auto one = SequenceOf(v[i], absl::StrCat("inputs[", i, "]"));
      if (!one.ok()) return one.status();
      r.classify.inputs.push_back(std::move(*one));
    }
  } else {
    return WrongType("inputs", "a string, a pair [string, string] or an array of [string] and [string, string]", v);
  }
  if (absl::Status s = ReadTruncation(body, &r.classify.truncation); !s.ok()) return s;
  if (absl::Status s = ReadBool(body, "raw_scores", &r.classify.raw_scores); !s.ok()) return s;
  // TEI's scores: the sigmoid of a single logit, the softmax of several, whatever the config's
  // problem_type says.
  r.classify.score_rule = ScoreRule::kLogitCount;
  return r;
}

json TeiPredictJson(const ClassifyResult& result, bool batch) {
  json all = json::array();
  for (const Classification& c : result.results) {
    json predictions = json::array();
    for (const LabelScore& l : c.labels) predictions.push_back({{"score", l.score}, {"label", l.label}});
    all.push_back(std::move(predictions));
  }
  if (!batch && all.size() == 1) return all[0];
  return all;
}

absl::StatusOr<TeiTokenizeRequest> ParseTeiTokenize(const json& body) {
  TeiTokenizeRequest r;
  auto inputs = Required(body, "inputs");
  if (!inputs.ok()) return inputs.status();
  const json& v = **inputs;
  if (v.is_string()) {
    if (absl::Status s = NonEmptyString(v, "inputs"); !s.ok()) return s;
    r.tokenize.inputs.push_back(Input::Text(v.get<std::string>()));
  } else if (v.is_array()) {
    if (v.empty()) return EmptyField("inputs");
    for (size_t i = 0; i < v.size(); ++i) {
      if (absl::Status s = NonEmptyString(v[i], absl::StrCat("inputs[", i, "]")); !s.ok()) return s;
      r.tokenize.inputs.push_back(Input::Text(v[i].get<std::string>()));
    }
  } else {
    return WrongType("inputs", "a string or an array of strings", v);
  }
  if (absl::Status s = ReadBool(body, "add_special_tokens", &r.add_special_tokens); !s.ok()) return s;
  std::string prompt_name;
  if (absl::Status s = ReadString(body, "prompt_name", &prompt_name); !s.ok()) return s;
  if (!prompt_name.empty()) return absl::InvalidArgumentError("prompt_name is not supported on /tokenize");
  // Every token, as TEI's /tokenize: a chunker counts a long text's tokens with it.
  r.tokenize.whole_text = true;
  return r;
}

std::string TeiTokenizeText(const TokenizeRequest& request, const TokenizeResult& result, bool add_special_tokens) {
  // Written as text, not built as a JSON document first: a document costs hundreds of bytes per
  // token, the text about fifty. Keys in the order nlohmann::json writes them.
  std::string out = "[";
  for (size_t i = 0; i < result.results.size(); ++i) {
    const Tokenized& t = result.results[i];
    const std::string& text = request.inputs[i].text;
    if (i > 0) out += ',';
    out += '[';
    bool first = true;
    for (size_t k = 0; k < t.input_ids.size(); ++k) {
      const auto [start, stop] = k < t.offsets.size() ? t.offsets[k] : std::pair<int32_t, int32_t>{0, 0};
      const bool special = k < t.special.size() && t.special[k];
      if (special && !add_special_tokens) continue;
      const bool inside = start >= 0 && stop >= start && static_cast<size_t>(stop) <= text.size();
      const std::string piece =
          !special && inside ? text.substr(start, stop - start) : (k < t.pieces.size() ? t.pieces[k] : "");
      absl::StrAppend(&out, first ? "" : ",", "{\"id\":", t.input_ids[k], ",\"special\":", special ? "true" : "false",
                      ",\"start\":", special ? "null" : std::to_string(start), ",\"stop\":",
                      special ? "null" : std::to_string(stop), ",\"text\":", DumpJson(json(piece)), "}");
      first = false;
    }
    out += ']';
  }
  out += ']';
  return out;
}

json TeiInfoJson(const ModelDescription& m, const ServerLimitsInfo& limits) {
  json model_type;
  if (m.has_classifier()) {
    json id2label = json::object(), label2id = json::object();
    for (size_t i = 0; i < m.info.labels.size(); ++i) {
      id2label[std::to_string(i)] = m.info.labels[i];
      label2id[m.info.labels[i]] = i;
    }
    // A one-label head is a cross-encoder: TEI calls it a reranker.
    model_type[m.info.labels.size() == 1 ? "reranker" : "classifier"] = {{"id2label", id2label}, {"label2id", label2id}};
  } else if (!m.info.token_labels.empty()) {
    // relserve's: a token classifier (named entities, POST /token-classification), which TEI
    // does not serve, with its labels as TEI gives a classifier's.
    json id2label = json::object(), label2id = json::object();
    for (size_t i = 0; i < m.info.token_labels.size(); ++i) {
      id2label[std::to_string(i)] = m.info.token_labels[i];
      label2id[m.info.token_labels[i]] = i;
    }
    model_type["token_classifier"] = {{"id2label", id2label}, {"label2id", label2id}};
  } else {
    // TEI names the pooling alone ("mean"), without Dense or Normalize.
    model_type["embedding"] = {{"pooling", m.info.pooling.ModeNames()}};
  }
  return {{"model_id", m.model_id.empty() ? m.name : m.model_id},
          {"model_sha", nullptr},
          {"model_dtype", DTypeName(m.info.dtype)},
          {"served_model_name", m.name},
          {"model_type", std::move(model_type)},
          {"max_concurrent_requests", limits.max_concurrent_requests},
          {"max_input_length", limits.max_input_length},
          {"max_batch_tokens", limits.max_batch_tokens},
          {"max_batch_requests", limits.max_batch_requests},
          {"max_client_batch_size", limits.max_client_batch_size},
          {"auto_truncate", limits.auto_truncate},
          // relserve's: sentence-transformers' similarity_fn_name and whether the model has a
          // Normalize module.
          {"similarity_fn_name", m.similarity_fn_name()},
          {"normalized", m.info.pooling.normalize},
          {"tokenization_workers", limits.max_concurrent_requests},
          {"version", limits.version},
          {"sha", nullptr},
          {"docker_label", nullptr}};
}

absl::Status ReadTeiModel(const json& body, std::string* model) { return ReadString(body, "model", model); }

absl::StatusOr<EmbedTokensRequest> ParseTeiEmbedAll(const json& body) {
  EmbedTokensRequest r;
  auto inputs_field = Required(body, "inputs");
  if (!inputs_field.ok()) return inputs_field.status();
  auto inputs = ReadEmbedInputs(**inputs_field, "inputs");
  if (!inputs.ok()) return inputs.status();
  r.inputs = std::move(*inputs);
  if (absl::Status s = ReadTruncation(body, &r.truncation); !s.ok()) return s;
  if (absl::Status s = ReadTeiModel(body, &r.model); !s.ok()) return s;
  std::string prompt_name;
  if (absl::Status s = ReadString(body, "prompt_name", &prompt_name); !s.ok()) return s;
  if (!prompt_name.empty()) return absl::InvalidArgumentError("prompt_name is not supported on /embed_all");
  return r;
}

json TeiEmbedAllJson(const EmbedTokensResult& result) {
  json all = json::array();
  for (const TokenStates& t : result.sequences) all.push_back(Rows(t.values, t.hidden_size, /*normalize=*/false));
  return all;
}

absl::StatusOr<TeiDecodeRequest> ParseTeiDecode(const json& body) {
  TeiDecodeRequest r;
  auto ids = Required(body, "ids");
  if (!ids.ok()) return ids.status();
  const json& v = **ids;
  if (!v.is_array()) return WrongType("ids", "an array of token ids or an array of arrays of token ids", v);
  if (v.empty()) return EmptyField("ids");
  if (v[0].is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      auto one = ReadTokenIds(v[i], absl::StrCat("ids[", i, "]"));
      if (!one.ok()) return one.status();
      r.ids.push_back(std::move(*one));
    }
  } else {
    auto one = ReadTokenIds(v, "ids");
    if (!one.ok()) return one.status();
    r.ids.push_back(std::move(*one));
  }
  if (absl::Status s = ReadBool(body, "skip_special_tokens", &r.skip_special_tokens); !s.ok()) return s;
  if (absl::Status s = ReadTeiModel(body, &r.model); !s.ok()) return s;
  return r;
}

int64_t CountCharacters(const Input& input) {
  auto chars = [](const std::string& text) {
    int64_t n = 0;
    for (unsigned char c : text) n += (c & 0xC0) != 0x80;  // every byte that starts a character
    return n;
  };
  switch (input.kind) {
    case Input::Kind::kText: return chars(input.text);
    case Input::Kind::kPair: return chars(input.first) + chars(input.second);
    case Input::Kind::kTokens: return static_cast<int64_t>(input.ids.size());
    case Input::Kind::kEmpty: break;
  }
  return 0;
}

std::vector<std::pair<std::string, std::string>> TeiComputeHeaders(int64_t characters, int64_t tokens,
                                                                   const Timing& timing, absl::Duration compute) {
  // Whole milliseconds, cut down, as Rust's Duration::as_millis.
  auto ms = [](absl::Duration d) { return std::to_string(absl::ToInt64Milliseconds(d)); };
  return {{"x-compute-time", ms(compute)},
          {"x-compute-characters", std::to_string(characters)},
          {"x-compute-tokens", std::to_string(tokens)},
          {"x-total-time", ms(compute)},  // TEI writes the same time in both
          {"x-tokenization-time", ms(timing.tokenize)},
          {"x-queue-time", ms(timing.queue)},
          {"x-inference-time", ms(timing.inference)}};
}

json TeiErrorJson(const absl::Status& status, int http_status) {
  return {{"error", CapMessage(std::string(status.message()), kMaxHttpErrorMessageBytes)},
          {"error_type", TeiErrorType(status, http_status)}};
}

}  // namespace relserve
