#include "server/serving/encoder_serving.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/serving/embed_prompt.h"
#include "server/serving/input_encoder.h"
#include "server/serving/late_interaction.h"
#include "server/serving/long_input.h"
#include "server/serving/sequence_submitter.h"
#include "server/serving/zero_shot.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

Usage UsageOf(const std::vector<EncodedInput>& inputs) {
  Usage usage;
  for (const EncodedInput& e : inputs) usage.tokens += static_cast<int64_t>(e.sequence.input_ids.size());
  usage.sequences = static_cast<int32_t>(inputs.size());
  return usage;
}

Timing TimingOf(absl::Time start, absl::Duration tokenize, const RequestResults& r) {
  Timing t;
  t.tokenize = tokenize;
  t.queue = r.max_queue;
  t.inference = r.max_inference;
  t.total = absl::Now() - start;
  return t;
}

absl::Status CheckCount(size_t count, int limit, const char* field) {
  if (count == 0) return FieldError(FieldErrorKind::kEmpty, field, absl::StrCat(field, " is empty"));
  if (count > static_cast<size_t>(limit)) {
    return FieldError(FieldErrorKind::kTooMany, field,
                      absl::StrCat(field, " has ", count, " entries, more than the limit of ", limit,
                                   " per request (split the request or use EmbedStream)"));
  }
  return absl::OkStatus();
}

// The common start of Embed, EmbedTokens, Classify and Tokenize: the model the request names,
// the input count within the limit, every input tokenized and validated (the first bad one
// fails the request).
struct Prepared {
  const ServedModel* model = nullptr;
  std::shared_ptr<std::vector<EncodedInput>> inputs;
  absl::Duration tokenize;
};

// OK while the call is wanted: CANCELLED once its caller went away, DEADLINE_EXCEEDED once its
// deadline passed. Asked between inputs, between pairs and inside long texts, so that work
// for a call nobody waits for stops there.
absl::Status CallAlive(const CallContext& call) {
  if (call.cancelled != nullptr && call.cancelled->load()) {
    return absl::CancelledError("the call was cancelled (its client went away) while its inputs were tokenized");
  }
  if (absl::Now() > call.deadline) {
    return absl::DeadlineExceededError("the request's deadline passed while its inputs were tokenized");
  }
  return absl::OkStatus();
}

// How a request's inputs are cut: its own choice, else the server's default.
InputLimits LimitsOf(const ServedModel& m, const Truncation& t, const ServingLimits& limits, const CallContext& call) {
  InputLimits input;
  input.truncation.max_length = m.max_length;
  input.truncation.truncate = t.truncate.value_or(limits.auto_truncate);
  input.truncation.direction = t.direction;
  input.truncation.keep_going = [call] { return CallAlive(call); };
  return input;
}

absl::StatusOr<Prepared> Prepare(const std::string& model_name, const std::vector<Input>& inputs,
                                 const Truncation& truncation, const ModelRegistry& registry,
                                 const ServingLimits& limits, ServerMetrics* metrics, const CallContext& call,
                                 bool whole_text = false) {
  auto model = registry.Find(model_name);
  if (!model.ok()) return model.status();
  Prepared p;
  p.model = *model;
  if (absl::Status s = CheckCount(inputs.size(), limits.max_inputs_per_request, "inputs"); !s.ok()) return s;
  const absl::Time t0 = absl::Now();
  p.inputs = std::make_shared<std::vector<EncodedInput>>();
  p.inputs->reserve(inputs.size());
  InputLimits input_limits = LimitsOf(*p.model, truncation, limits, call);
  input_limits.whole_text = whole_text;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (absl::Status s = CallAlive(call); !s.ok()) return s;
    auto e = EncodeInput(inputs[i], absl::StrCat("inputs[", i, "]"), p.model->tokenizer, *p.model->backend,
                         input_limits);
    if (!e.ok()) return e.status();
    p.inputs->push_back(std::move(*e));
  }
  p.tokenize = absl::Now() - t0;
  if (metrics != nullptr) metrics->RecordTokenize(p.model->name, absl::ToDoubleSeconds(p.tokenize));
  return p;
}

std::vector<SequenceInput> Sequences(const std::vector<EncodedInput>& inputs) {
  std::vector<SequenceInput> out;
  out.reserve(inputs.size());
  for (const EncodedInput& e : inputs) out.push_back(e.sequence);
  return out;
}

// EmbedTokens answers tokens x hidden floats, Embed's multi-vector output tokens x its
// dimension: refused before any computation when that cannot fit in one response. Per token:
// the float32 values, plus the token id and two offsets (up to 5 bytes each in protobuf's
// varints). `what` names the output and the request in the message.
absl::Status CheckTokenVectorsFit(const std::vector<EncodedInput>& inputs, int width, size_t max_bytes,
                                  const char* what, const char* request) {
  const size_t per_token = static_cast<size_t>(width) * sizeof(float) + 15;
  size_t tokens = 0;
  for (const EncodedInput& e : inputs) tokens += e.sequence.input_ids.size();
  const size_t overhead = 64 * inputs.size() + 256;  // per-sequence fields, usage, timing
  if (tokens * per_token + overhead <= max_bytes) return absl::OkStatus();
  return FieldError(FieldErrorKind::kTooMany, "inputs", absl::StrCat(
      "the ", what, " of these inputs (", tokens, " tokens x ", width, " values) need about ",
      tokens * per_token + overhead, " bytes, more than the largest response of ", max_bytes,
      " bytes: send at most about ", max_bytes > overhead ? (max_bytes - overhead) / per_token : 0,
      " tokens per ", request, " request (split the inputs over several requests)"));
}

// `dimensions` on a model whose config.json says it was not Matryoshka-trained, or names the
// sizes it was trained for and not this one: refused with vLLM's words (its
// PoolingParams.verify). Models that say nothing may be cut to any size, as before.
absl::Status CheckMatryoshka(const ModelInfo& info, const std::string& model, int dimensions) {
  if (dimensions <= 0 || !info.is_matryoshka.has_value()) return absl::OkStatus();
  if (!*info.is_matryoshka) {
    return FieldError(FieldErrorKind::kUnsupported, "dimensions", absl::StrCat(
        "Model \"", model, "\" does not support matryoshka representation, changing output dimensions will lead "
        "to poor results."));
  }
  const std::vector<int>& sizes = info.matryoshka_dimensions;
  if (sizes.empty() || std::find(sizes.begin(), sizes.end(), dimensions) != sizes.end()) return absl::OkStatus();
  return FieldError(FieldErrorKind::kUnsupported, "dimensions", absl::StrCat(
      "Model \"", model, "\" only supports [", absl::StrJoin(sizes, ", "), "] matryoshka dimensions, use other output "
      "dimensions will lead to poor results."));
}

// A model without what a call needs: FAILED_PRECONDITION about the field "model".
absl::Status ModelLacks(std::string message) {
  return WithFieldError(absl::FailedPreconditionError(message), FieldErrorKind::kInvalid, "model");
}

absl::Status NoClassifier(const ServedModel& m, const char* what) {
  return ModelLacks(
      absl::StrCat("model ", m.name, " (", m.backend->info().architecture, ") has no classification head", what));
}


// A ColBERT model's Embed with multi-vectors (late_interaction.h): each text tokenized as the
// side the request names (prompt_name: query or document), its kept vectors answered; the
// pooled embedding beside them is the model's pooling of the same tokens.
void EmbedLateInteraction(const ServedModel& m, const EmbedRequest& request, const CallContext& call,
                          const ServingLimits& limits, ServerMetrics* metrics, absl::Time start,
                          EncoderServing::Done<EmbedResult> done) {
  const ModelInfo& info = m.backend->info();
  const LateInteractionInfo& li = info.late_interaction;
  auto side = LateInteractionSideOf(request.prompt_name, "prompt_name");
  if (!side.ok()) return done(side.status());
  if (absl::Status s = CheckCount(request.inputs.size(), limits.max_inputs_per_request, "inputs"); !s.ok()) {
    return done(s);
  }
  if (request.return_sparse) {
    return done(ModelLacks(absl::StrCat("model ", m.name, " (", info.architecture, ") has no sparse head")));
  }
  if (request.dimensions != 0) {
    return done(FieldError(FieldErrorKind::kInvalid, "dimensions",
                           "dimensions does not apply to a ColBERT model's multi-vector output"));
  }
  const absl::Time t0 = absl::Now();
  auto inputs = std::make_shared<std::vector<EncodedInput>>();
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const std::string field = absl::StrCat("inputs[", i, "]");
    if (request.inputs[i].kind != Input::Kind::kText) {
      return done(FieldError(FieldErrorKind::kInvalid, field, absl::StrCat(
          field, ": a ColBERT model's multi-vectors are made from text (its markers and expansion are added to "
          "the text's tokens)")));
    }
    auto e = EncodeLateInteraction(request.inputs[i].text, *side, field + ".text", *m.tokenizer, *m.backend, li);
    if (!e.ok()) return done(e.status());
    inputs->push_back(std::move(*e));
  }
  const absl::Duration tokenize = absl::Now() - t0;
  if (metrics != nullptr) metrics->RecordTokenize(m.name, absl::ToDoubleSeconds(tokenize));
  if (absl::Status s = CheckTokenVectorsFit(*inputs, info.multi_vector_dim, limits.max_response_bytes,
                                            "multi-vector token vectors", "Embed");
      !s.ok()) {
    return done(s);
  }
  SubmitSequences(
      m, Sequences(*inputs), kOutputPooled | kOutputMultiVector, call.deadline, call.cancelled, metrics,
      [=, name = m.name, normalize = request.normalize, id = request.request_id, dim = info.multi_vector_dim,
       side = *side](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return done(r.status());
        EmbedResult out;
        out.model = name;
        out.request_id = id;
        for (size_t i = 0; i < inputs->size(); ++i) {
          SequenceOutput& o = r->outputs[i];
          const EncodedInput& in = (*inputs)[i];
          Embedding e;
          e.values = std::move(o.pooled);
          if (normalize) L2Normalize(&e.values);
          const std::vector<int32_t> kept = ScoredPositions(in.sequence, side, li);
          e.multi_vector = KeptVectors(o.multi_vector, dim, kept);
          e.multi_vector_count = static_cast<int32_t>(kept.size());
          e.multi_vector_dim = dim;
          e.num_tokens = static_cast<int32_t>(in.sequence.input_ids.size());
          e.truncated = in.truncated;
          out.embeddings.push_back(std::move(e));
        }
        out.usage = UsageOf(*inputs);
        out.timing = TimingOf(start, tokenize, *r);
        done(std::move(out));
      });
}

// Rerank on a ColBERT model: the query once as a query, each document as a document, every
// document scored by MaxSim against the query (a raw sum, as PyLate's colbert_scores), best
// first with ties in the request's order (pylate.rank.rerank's stable sort).
void RerankLateInteraction(const ServedModel& m, const RerankRequest& request, const CallContext& call,
                           const ServingLimits& limits, ServerMetrics* metrics, absl::Time start,
                           EncoderServing::Done<RerankResult> done) {
  const ModelInfo& info = m.backend->info();
  const LateInteractionInfo& li = info.late_interaction;
  if (request.chunk_documents.value_or(false) || request.max_chunks_per_doc.has_value()) {
    const char* field = request.max_chunks_per_doc ? "max_chunks_per_doc" : "chunk_documents";
    return done(FieldError(FieldErrorKind::kInvalid, field,
                           absl::StrCat(field, ": chunked rerank scores a cross-encoder's windows; model ", m.name,
                                        " is a ColBERT model, which scores each document's first ",
                                        li.document_length, " tokens by MaxSim")));
  }
  const absl::Time t0 = absl::Now();
  auto inputs = std::make_shared<std::vector<EncodedInput>>();
  auto q = EncodeLateInteraction(request.query, LateInteractionSide::kQuery, "query", *m.tokenizer, *m.backend, li);
  if (!q.ok()) return done(q.status());
  inputs->push_back(std::move(*q));
  for (size_t i = 0; i < request.documents.size(); ++i) {
    const std::string field = absl::StrCat("documents[", i, "]");
    std::string document = request.documents[i];
    if (request.max_tokens_per_doc > 0 && !document.empty()) {
      auto cut = FirstTokensOf(document, field, *m.tokenizer, request.max_tokens_per_doc);
      if (!cut.ok()) return done(cut.status());
      document = std::move(*cut);
    }
    auto d = EncodeLateInteraction(document, LateInteractionSide::kDocument, field, *m.tokenizer, *m.backend, li);
    if (!d.ok()) return done(d.status());
    inputs->push_back(std::move(*d));
  }
  const absl::Duration tokenize = absl::Now() - t0;
  if (metrics != nullptr) metrics->RecordTokenize(m.name, absl::ToDoubleSeconds(tokenize));
  auto documents = std::make_shared<std::vector<std::string>>();
  if (request.return_documents) *documents = request.documents;
  SubmitSequences(
      m, Sequences(*inputs), kOutputMultiVector, call.deadline, call.cancelled, metrics,
      [=, name = m.name, top_n = request.top_n, dim = info.multi_vector_dim](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return done(r.status());
        const std::vector<float> query = KeptVectors(
            r->outputs[0].multi_vector, dim, ScoredPositions((*inputs)[0].sequence, LateInteractionSide::kQuery, li));
        std::vector<std::pair<double, int>> scored;
        for (size_t i = 1; i < inputs->size(); ++i) {
          const std::vector<float> document =
              KeptVectors(r->outputs[i].multi_vector, dim,
                          ScoredPositions((*inputs)[i].sequence, LateInteractionSide::kDocument, li));
          scored.emplace_back(MaxSim(query, document, dim), static_cast<int>(i - 1));
        }
        std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        const size_t n = top_n > 0 ? std::min<size_t>(top_n, scored.size()) : scored.size();
        RerankResult out;
        out.model = name;
        for (size_t k = 0; k < n; ++k) {
          RerankHit hit;
          hit.index = scored[k].second;
          hit.score = static_cast<float>(scored[k].first);
          if (!documents->empty()) hit.document = (*documents)[hit.index];
          out.results.push_back(std::move(hit));
        }
        out.usage = UsageOf(*inputs);
        out.timing = TimingOf(start, tokenize, *r);
        done(std::move(out));
      });
}

}  // namespace


std::vector<float> ScoresFromLogits(const std::vector<float>& logits, ProblemType problem_type) {
  std::vector<float> s(logits.size());
  if (logits.empty() || problem_type == ProblemType::kRegression) return logits;
  if (problem_type == ProblemType::kMultiLabel) {
    for (size_t i = 0; i < logits.size(); ++i) s[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    return s;
  }
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - max);
  for (size_t i = 0; i < logits.size(); ++i) s[i] = static_cast<float>(std::exp(double(logits[i]) - max) / sum);
  return s;
}

std::vector<float> TeiScoresFromLogits(const std::vector<float>& logits) {
  if (logits.size() == 1) return {1.0f / (1.0f + std::exp(-logits[0]))};
  return ScoresFromLogits(logits, ProblemType::kSingleLabel);
}

EncoderServing::EncoderServing(const ModelRegistry* registry, ServerMetrics* metrics, ServingLimits limits)
    : registry_(registry), metrics_(metrics), limits_(limits) {}

namespace {

// Embed's outputs that need a head: refused here, since asked of a model without the head the
// output would fail the whole batch.
absl::Status CheckEmbedHeads(const ServedModel& m, const EmbedRequest& request) {
  const ModelInfo& info = m.backend->info();
  if (request.return_sparse && info.sparse_kind.empty()) {
    return ModelLacks(absl::StrCat(
        "model ", m.name, " (", info.architecture, ") has no sparse head: sparse vectors need a SPLADE model (a ",
        "*ForMaskedLM checkpoint with its masked-LM head) or bge-m3's sparse_linear.pt"));
  }
  if (request.return_multi_vector && info.multi_vector_kind.empty()) {
    return ModelLacks(absl::StrCat("model ", m.name, " (", info.architecture,
                                   ") has no multi-vector head: multi-vector output needs bge-m3's "
                                   "colbert_linear.pt"));
  }
  return absl::OkStatus();
}

// Embed's "encode or windows" stage: each input as one sequence (cut at the model's maximum), or,
// embedded whole (whole_input), a text as its windows (EncodeTextWindows); the prompt's tokens
// left out of pooling where the model's Pooling says so. `tokenize` receives the time taken.
absl::StatusOr<InputWindows> EncodeEmbedInputs(const ServedModel& m, const EmbedRequest& request,
                                               const PromptedInputs& prompted, const CallContext& call,
                                               const ModelRegistry& registry, const ServingLimits& limits,
                                               ServerMetrics* metrics, absl::Duration* tokenize) {
  const std::vector<Input>& inputs = prompted.prompted ? prompted.inputs : request.inputs;
  const bool whole = request.whole_input.value_or(limits.whole_input);
  const int overlap = request.window_overlap.value_or(limits.window_overlap);
  InputWindows windows;
  if (!whole) {
    ASSIGN_OR_RETURN(Prepared prepared,
                     Prepare(request.model, inputs, request.truncation, registry, limits, metrics, call));
    windows.sequences = std::move(*prepared.inputs);
    *tokenize = prepared.tokenize;
    for (size_t i = 0; i <= windows.sequences.size(); ++i) windows.first.push_back(i);
  } else {
    RETURN_IF_ERROR(CheckCount(inputs.size(), limits.max_inputs_per_request, "inputs"));
    const absl::Time t0 = absl::Now();
    const InputLimits input_limits = LimitsOf(m, request.truncation, limits, call);
    std::vector<EncodedInput>& encoded = windows.sequences;
    for (size_t i = 0; i < inputs.size(); ++i) {
      RETURN_IF_ERROR(CallAlive(call));
      const std::string field = absl::StrCat("inputs[", i, "]");
      windows.first.push_back(encoded.size());
      if (inputs[i].kind != Input::Kind::kText || m.tokenizer == nullptr) {
        ASSIGN_OR_RETURN(EncodedInput e, EncodeInput(inputs[i], field, m.tokenizer, *m.backend, input_limits));
        encoded.push_back(std::move(e));
        continue;
      }
      const int prompt_bytes = static_cast<int>(inputs[i].text.size() - request.inputs[i].text.size());
      // The windows the inputs before this one left to the request.
      const int left = limits.max_windows_per_request - static_cast<int>(encoded.size());
      if (left <= 0) {
        return FieldError(FieldErrorKind::kTooMany, field, absl::StrCat(
            "the inputs before ", field, " take all ", limits.max_windows_per_request,
            " windows one request may compute (--max-windows-per-request): send fewer or shorter texts per request"));
      }
      ASSIGN_OR_RETURN(std::vector<EncodedInput> text_windows,
                       EncodeTextWindows(inputs[i].text, field, *m.tokenizer, *m.backend, m.max_length, overlap,
                                         prompt_bytes, left, input_limits.truncation.keep_going));
      if (metrics != nullptr && text_windows.size() > 1) {
        metrics->RecordWindowedInput(m.name, static_cast<int>(text_windows.size()));
      }
      for (EncodedInput& w : text_windows) encoded.push_back(std::move(w));
    }
    windows.first.push_back(encoded.size());
    *tokenize = absl::Now() - t0;
    if (metrics != nullptr) metrics->RecordTokenize(m.name, absl::ToDoubleSeconds(*tokenize));
  }
  if (prompted.pooling_skip > 0) {
    for (size_t i = 0; i < request.inputs.size(); ++i) {
      if (request.inputs[i].kind != Input::Kind::kText) continue;
      for (size_t w = windows.first[i]; w < windows.first[i + 1]; ++w) {
        windows.sequences[w].sequence.pooling_skip = prompted.pooling_skip;
      }
    }
  }
  return windows;
}

}  // namespace

void EncoderServing::Embed(const EmbedRequest& request, const CallContext& call, Done<EmbedResult> done) const {
  const absl::Time start = absl::Now();
  auto model = registry_->Find(request.model);
  if (!model.ok()) return done(model.status());
  const ServedModel& m = **model;
  const ModelInfo& info = m.backend->info();
  if (info.late_interaction.enabled && request.return_multi_vector && m.tokenizer != nullptr) {
    return EmbedLateInteraction(m, request, call, limits_, metrics_, start, std::move(done));
  }
  if (absl::Status s = CheckEmbedHeads(m, request); !s.ok()) return done(s);
  // Prompt: sentence-transformers' prompt (the one named, else the model's default) before each text.
  auto prompted = ApplyEmbedPrompt(request.inputs, request.prompt_name, info, m.tokenizer, m.max_length);
  if (!prompted.ok()) return done(prompted.status());
  // Encode or windows: each input's sequences.
  absl::Duration tokenize;
  auto encoded = EncodeEmbedInputs(m, request, *prompted, call, *registry_, limits_, metrics_, &tokenize);
  if (!encoded.ok()) return done(encoded.status());
  auto windows = std::make_shared<InputWindows>(std::move(*encoded));
  const int dim = info.embedding_dim;
  if (request.dimensions < 0 || request.dimensions > dim) {
    return done(FieldError(FieldErrorKind::kInvalid, "dimensions",
                           absl::StrCat("dimensions ", request.dimensions, " is outside [0, ", dim, "] for model ", m.name)));
  }
  if (absl::Status s = CheckMatryoshka(info, m.name, request.dimensions); !s.ok()) return done(s);
  if (request.return_multi_vector) {
    if (absl::Status s = CheckTokenVectorsFit(windows->sequences, info.multi_vector_dim, limits_.max_response_bytes,
                                              "multi-vector token vectors", "Embed");
        !s.ok()) {
      return done(s);
    }
  }
  uint32_t outputs = kOutputPooled;
  if (windows->windowed()) outputs |= kOutputPooledUnnormalized;
  if (request.return_sparse) outputs |= kOutputSparse;
  if (request.return_multi_vector) outputs |= kOutputMultiVector;
  // Submit, then merge each input's windows (long_input.h) and apply the request's dimensions.
  SubmitSequences(
      m, Sequences(windows->sequences), outputs, call.deadline, call.cancelled, metrics_,
      [=, name = m.name, normalize = request.normalize, dimensions = request.dimensions,
       renormalize = request.dimensions_renormalize, id = request.request_id, model_normalizes = info.pooling.normalize,
       vector_dim = info.multi_vector_dim](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return done(r.status());
        EmbedResult out;
        out.model = name;
        out.request_id = id;
        out.embeddings.reserve(windows->inputs());
        for (size_t i = 0; i < windows->inputs(); ++i) {
          Embedding e = MergeWindows(*windows, i, outputs, model_normalizes, vector_dim, &r->outputs);
          if (dimensions > 0) e.values.resize(dimensions);
          if (normalize || (dimensions > 0 && renormalize)) L2Normalize(&e.values);
          out.embeddings.push_back(std::move(e));
        }
        out.usage = UsageOf(windows->sequences);  // every window computed
        out.timing = TimingOf(start, tokenize, *r);
        done(std::move(out));
      });
}

void EncoderServing::EmbedTokens(const EmbedTokensRequest& request, const CallContext& call,
                                 Done<EmbedTokensResult> done) const {
  const absl::Time start = absl::Now();
  auto prepared = Prepare(request.model, request.inputs, request.truncation, *registry_, limits_, metrics_, call);
  if (!prepared.ok()) return done(prepared.status());
  const ServedModel& m = *prepared->model;
  const int hidden = m.backend->info().hidden_size;
  if (absl::Status s = CheckTokenVectorsFit(*prepared->inputs, hidden, limits_.max_response_bytes, "token states",
                                            "EmbedTokens");
      !s.ok()) {
    return done(s);
  }
  auto inputs = prepared->inputs;
  SubmitSequences(m, Sequences(*inputs), kOutputTokenStates, call.deadline, call.cancelled, metrics_,
                  [=, tokenize = prepared->tokenize, name = m.name](absl::StatusOr<RequestResults> r) {
                    if (!r.ok()) return done(r.status());
                    EmbedTokensResult out;
                    out.model = name;
                    for (size_t i = 0; i < r->outputs.size(); ++i) {
                      const EncodedInput& in = (*inputs)[i];
                      TokenStates t;
                      t.token_ids = in.sequence.input_ids;
                      t.offsets = in.offsets;
                      t.hidden_size = hidden;
                      t.values = std::move(r->outputs[i].token_states);
                      t.truncated = in.truncated;
                      out.sequences.push_back(std::move(t));
                    }
                    out.usage = UsageOf(*inputs);
                    out.timing = TimingOf(start, tokenize, *r);
                    done(std::move(out));
                  });
}

void EncoderServing::Rerank(const RerankRequest& request, const CallContext& call, Done<RerankResult> done) const {
  const absl::Time start = absl::Now();
  auto model = registry_->Find(request.model);
  if (!model.ok()) return done(model.status());
  const ServedModel& m = **model;
  const bool late_interaction = m.backend->info().late_interaction.enabled && m.tokenizer != nullptr;
  if (m.backend->info().labels.empty() && !late_interaction) {
    return done(NoClassifier(m, "; Rerank needs a cross-encoder (or a ColBERT model)"));
  }
  if (request.query.empty()) return done(FieldError(FieldErrorKind::kEmpty, "query", "query is empty"));
  if (absl::Status s = CheckCount(request.documents.size(), limits_.max_inputs_per_request, "documents"); !s.ok()) {
    return done(s);
  }
  if (request.top_n < 0) return done(FieldError(FieldErrorKind::kInvalid, "top_n", "top_n must not be negative"));
  if (request.max_tokens_per_doc < 0) {
    return done(FieldError(FieldErrorKind::kInvalid, "max_tokens_per_doc", "max_tokens_per_doc must not be negative"));
  }
  if (late_interaction) return RerankLateInteraction(m, request, call, limits_, metrics_, start, std::move(done));
  // Chunked when the request says so, else when it bounds the chunks (Cohere v1's
  // max_chunks_per_doc), else as the server's --rerank-chunking says.
  const bool chunked =
      request.chunk_documents.value_or(request.max_chunks_per_doc.has_value() || limits_.rerank_chunking);
  const int max_chunks = request.max_chunks_per_doc.value_or(limits_.max_chunks_per_doc);
  const int overlap = request.chunk_overlap.value_or(limits_.rerank_chunk_overlap);
  if (chunked && m.tokenizer == nullptr) {
    return done(ModelLacks(absl::StrCat("model ", m.name, " has no tokenizer: chunked rerank cuts texts into tokens")));
  }
  const absl::Time t0 = absl::Now();
  // Each document's windows: one, or (chunked) one per window; first[i] is document i's first.
  auto inputs = std::make_shared<std::vector<EncodedInput>>();
  auto first = std::make_shared<std::vector<size_t>>();
  const InputLimits limits = LimitsOf(m, request.truncation, limits_, call);
  // Unchunked, the query is tokenized once (as far as a pair can keep it) and paired with each
  // document.
  absl::StatusOr<Tokenizer::PairText> query = Tokenizer::PairText();
  if (!chunked) query = TokenizePairText(request.query, "query", m.tokenizer, limits);
  if (!query.ok()) return done(query.status());
  for (size_t i = 0; i < request.documents.size(); ++i) {
    if (absl::Status s = CallAlive(call); !s.ok()) return done(s);
    const std::string field = absl::StrCat("documents[", i, "]");
    first->push_back(inputs->size());
    const std::string* document = &request.documents[i];
    std::string cut;
    if (request.max_tokens_per_doc > 0 && m.tokenizer != nullptr && !document->empty()) {
      auto c = FirstTokensOf(*document, field, *m.tokenizer, request.max_tokens_per_doc);
      if (!c.ok()) return done(c.status());
      cut = std::move(*c);
      document = &cut;
    }
    if (!chunked) {
      auto tokens = TokenizePairText(*document, field, m.tokenizer, limits);
      if (!tokens.ok()) return done(tokens.status());
      auto e = EncodeTokenizedPair(*query, *tokens, field, *m.tokenizer, *m.backend, limits);
      if (!e.ok()) return done(e.status());
      inputs->push_back(std::move(*e));
      continue;
    }
    auto windows = EncodePairWindows(request.query, *document, field, *m.tokenizer, *m.backend, m.max_length,
                                     overlap, max_chunks);
    if (!windows.ok()) return done(windows.status());
    if (inputs->size() + windows->size() > static_cast<size_t>(limits_.max_windows_per_request)) {
      return done(FieldError(FieldErrorKind::kTooMany, field, absl::StrCat(
          "the documents up to ", field, " need more than ", limits_.max_windows_per_request,
          " windows of the model's ", m.max_length, " tokens, the most one request may compute "
          "(--max-windows-per-request; send fewer or shorter documents per request, or a lower max_chunks_per_doc)")));
    }
    if (metrics_ != nullptr && windows->size() > 1) {
      metrics_->RecordWindowedInput(m.name, static_cast<int>(windows->size()));
    }
    for (EncodedInput& w : *windows) inputs->push_back(std::move(w));
  }
  first->push_back(inputs->size());
  const absl::Duration tokenize = absl::Now() - t0;
  if (metrics_ != nullptr) metrics_->RecordTokenize(m.name, absl::ToDoubleSeconds(tokenize));
  // The documents are echoed only when asked for: no copy otherwise.
  auto documents = std::make_shared<std::vector<std::string>>();
  if (request.return_documents) *documents = request.documents;
  SubmitSequences(
      m, Sequences(*inputs), kOutputLogits, call.deadline, call.cancelled, metrics_,
      [=, name = m.name, raw = request.raw_scores, top_n = request.top_n](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return done(r.status());
        // One logit: its sigmoid (cross-encoders). Several: the probability of label 1, the
        // "relevant" class of two-label rerankers. A chunked document: its best window's.
        auto score_of = [raw](const std::vector<float>& logits) {
          if (logits.size() == 1) return raw ? logits[0] : 1.0f / (1.0f + std::exp(-logits[0]));
          return raw ? logits[1] : ScoresFromLogits(logits, ProblemType::kSingleLabel)[1];
        };
        std::vector<std::pair<float, int>> scored;
        for (size_t i = 0; i + 1 < first->size(); ++i) {
          float score = score_of(r->outputs[(*first)[i]].logits);
          for (size_t w = (*first)[i] + 1; w < (*first)[i + 1]; ++w) score = std::max(score, score_of(r->outputs[w].logits));
          scored.emplace_back(score, static_cast<int>(i));
        }
        std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        const size_t n = top_n > 0 ? std::min<size_t>(top_n, scored.size()) : scored.size();
        RerankResult out;
        out.model = name;
        out.chunked = chunked;
        for (size_t k = 0; k < n; ++k) {
          RerankHit hit;
          hit.index = scored[k].second;
          hit.score = scored[k].first;
          hit.windows = static_cast<int32_t>((*first)[hit.index + 1] - (*first)[hit.index]);
          if (!documents->empty()) hit.document = (*documents)[scored[k].second];
          out.results.push_back(std::move(hit));
        }
        out.usage = UsageOf(*inputs);
        out.timing = TimingOf(start, tokenize, *r);
        done(std::move(out));
      });
}

void EncoderServing::Classify(const ClassifyRequest& request, const CallContext& call,
                              Done<ClassifyResult> done) const {
  const absl::Time start = absl::Now();
  if (request.top_k < 0) return done(FieldError(FieldErrorKind::kInvalid, "top_k", "top_k must not be negative"));
  auto prepared = Prepare(request.model, request.inputs, request.truncation, *registry_, limits_, metrics_, call);
  if (!prepared.ok()) return done(prepared.status());
  const ServedModel& m = *prepared->model;
  const ModelInfo& info = m.backend->info();
  if (info.labels.empty()) return done(NoClassifier(m, ""));
  auto inputs = prepared->inputs;
  SubmitSequences(m, Sequences(*inputs), kOutputLogits, call.deadline, call.cancelled, metrics_,
                  [=, tokenize = prepared->tokenize, name = m.name, labels = info.labels,
                   problem = info.problem_type, raw = request.raw_scores, rule = request.score_rule,
                   top_k = request.top_k](absl::StatusOr<RequestResults> r) {
                    if (!r.ok()) return done(r.status());
                    ClassifyResult out;
                    out.model = name;
                    for (SequenceOutput& o : r->outputs) {
                      Classification c;
                      const std::vector<float> scores =
                          raw ? o.logits
                              : rule == ScoreRule::kLogitCount ? TeiScoresFromLogits(o.logits)
                                                               : ScoresFromLogits(o.logits, problem);
                      std::vector<int> order(scores.size());
                      std::iota(order.begin(), order.end(), 0);
                      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
                      const size_t k = top_k > 0 ? std::min<size_t>(top_k, order.size()) : order.size();
                      for (size_t j = 0; j < k; ++j) {
                        LabelScore l;
                        l.index = order[j];
                        l.label = order[j] < static_cast<int>(labels.size()) ? labels[order[j]] : "";
                        l.score = scores[order[j]];
                        c.labels.push_back(std::move(l));
                      }
                      c.logits = std::move(o.logits);
                      out.results.push_back(std::move(c));
                    }
                    out.usage = UsageOf(*inputs);
                    out.timing = TimingOf(start, tokenize, *r);
                    done(std::move(out));
                  });
}

void EncoderServing::ZeroShotClassify(const ZeroShotRequest& request, const CallContext& call,
                                      Done<ZeroShotResult> done) const {
  const absl::Time start = absl::Now();
  auto model = registry_->Find(request.model);
  if (!model.ok()) return done(model.status());
  const ServedModel& m = **model;
  const ModelInfo& info = m.backend->info();
  if (info.labels.empty()) return done(NoClassifier(m, "; zero-shot classification needs an NLI model"));
  auto entailment = EntailmentIndex(info.labels, m.name);
  if (!entailment.ok()) return done(entailment.status());
  if (m.tokenizer == nullptr) {
    return done(ModelLacks(absl::StrCat("model ", m.name, " has no tokenizer: zero-shot classification takes text")));
  }
  if (absl::Status s = CheckCount(request.sequences.size(), limits_.max_inputs_per_request, "sequences"); !s.ok()) {
    return done(s);
  }
  if (request.candidate_labels.empty()) {
    return done(FieldError(FieldErrorKind::kEmpty, "candidate_labels", "candidate_labels is empty"));
  }
  for (size_t i = 0; i < request.sequences.size(); ++i) {
    const std::string field = absl::StrCat("sequences[", i, "]");
    if (request.sequences[i].empty()) return done(FieldError(FieldErrorKind::kEmpty, field, field + " is empty"));
  }
  const std::string& hypothesis_template =
      request.hypothesis_template.empty() ? std::string(kDefaultHypothesisTemplate) : request.hypothesis_template;
  std::vector<std::string> hypotheses;
  for (size_t k = 0; k < request.candidate_labels.size(); ++k) {
    if (request.candidate_labels[k].empty()) {
      const std::string field = absl::StrCat("candidate_labels[", k, "]");
      return done(FieldError(FieldErrorKind::kEmpty, field, field + " is empty"));
    }
    auto h = FormatHypothesis(hypothesis_template, request.candidate_labels[k]);
    if (!h.ok()) return done(h.status());
    hypotheses.push_back(std::move(*h));
  }
  const size_t labels = hypotheses.size();
  const size_t pairs = request.sequences.size() * labels;
  if (pairs > static_cast<size_t>(limits_.max_inputs_per_request)) {
    return done(FieldError(FieldErrorKind::kTooMany, "candidate_labels", absl::StrCat(
        "sequences x candidate_labels = ", request.sequences.size(), " x ", labels, " = ", pairs,
        " pairs, more than the limit of ", limits_.max_inputs_per_request,
        " per request (send fewer texts or labels per request)")));
  }
  const absl::Time t0 = absl::Now();
  InputLimits input_limits = LimitsOf(m, request.truncation, limits_, call);
  input_limits.truncation.truncate = request.truncation.truncate.value_or(true);
  input_limits.truncation.pair_truncation = PairTruncation::kOnlyFirst;
  auto inputs = std::make_shared<std::vector<EncodedInput>>();
  inputs->reserve(pairs);
  // Each hypothesis and each text is tokenized once (a text only as far as a pair can keep it),
  // then every pair is made from them.
  std::vector<Tokenizer::PairText> hypothesis_tokens;
  for (size_t k = 0; k < labels; ++k) {
    auto h = TokenizePairText(hypotheses[k], absl::StrCat("candidate_labels[", k, "]"), m.tokenizer, input_limits);
    if (!h.ok()) return done(h.status());
    hypothesis_tokens.push_back(*std::move(h));
  }
  for (size_t i = 0; i < request.sequences.size(); ++i) {
    if (absl::Status s = CallAlive(call); !s.ok()) return done(s);
    auto premise = TokenizePairText(request.sequences[i], absl::StrCat("sequences[", i, "]"), m.tokenizer, input_limits);
    if (!premise.ok()) return done(premise.status());
    for (size_t k = 0; k < labels; ++k) {
      auto e = EncodeTokenizedPair(*premise, hypothesis_tokens[k],
                                   absl::StrCat("sequences[", i, "] with candidate_labels[", k, "]"), *m.tokenizer,
                                   *m.backend, input_limits);
      if (!e.ok()) return done(e.status());
      inputs->push_back(std::move(*e));
    }
  }
  const absl::Duration tokenize = absl::Now() - t0;
  if (metrics_ != nullptr) metrics_->RecordTokenize(m.name, absl::ToDoubleSeconds(tokenize));
  auto sequences = std::make_shared<std::vector<std::string>>(request.sequences);
  auto candidates = std::make_shared<std::vector<std::string>>(request.candidate_labels);
  SubmitSequences(
      m, Sequences(*inputs), kOutputLogits, call.deadline, call.cancelled, metrics_,
      [=, name = m.name, entail = *entailment, multi = request.multi_label](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return done(r.status());
        ZeroShotResult out;
        out.model = name;
        for (size_t i = 0; i < sequences->size(); ++i) {
          std::vector<std::vector<float>> logits;
          for (size_t k = 0; k < labels; ++k) logits.push_back(std::move(r->outputs[i * labels + k].logits));
          const std::vector<double> scores = ZeroShotScores(logits, entail, multi);
          ZeroShotClassification c;
          c.sequence = (*sequences)[i];
          for (int k : ZeroShotOrder(scores)) {
            LabelScore l;
            l.label = (*candidates)[k];
            l.index = k;
            l.score = static_cast<float>(scores[k]);
            c.labels.push_back(std::move(l));
          }
          out.results.push_back(std::move(c));
        }
        out.usage = UsageOf(*inputs);
        out.timing = TimingOf(start, tokenize, *r);
        done(std::move(out));
      });
}

void EncoderServing::ClassifyTokens(const TokenClassifyRequest& request, const CallContext& call,
                                    Done<TokenClassifyResult> done) const {
  const absl::Time start = absl::Now();
  auto model = registry_->Find(request.model);
  if (!model.ok()) return done(model.status());
  const ServedModel& m = **model;
  const ModelInfo& info = m.backend->info();
  if (info.token_labels.empty()) {
    return done(ModelLacks(absl::StrCat("model ", m.name, " (", info.architecture,
                                        ") has no token-classification head (a *ForTokenClassification architecture)")));
  }
  if (m.tokenizer == nullptr) {
    return done(ModelLacks(absl::StrCat("model ", m.name, " has no tokenizer: token classification takes text")));
  }
  if (absl::Status s = CheckCount(request.texts.size(), limits_.max_inputs_per_request, "inputs"); !s.ok()) {
    return done(s);
  }
  if (request.stride.has_value() && request.aggregation_strategy == AggregationStrategy::kNone) {
    // The pipeline's own refusal: windows are merged by entity, which needs an aggregation.
    return done(FieldError(FieldErrorKind::kInvalid, "stride",
                           "stride was given to classify a whole text in windows, but aggregation_strategy is "
                           "\"none\": choose simple, first, average or max"));
  }
  const absl::Time t0 = absl::Now();
  auto windows = std::make_shared<std::vector<EncodedInput>>();
  std::vector<size_t> first_window;  // text i's windows: [first_window[i], first_window[i + 1])
  for (size_t i = 0; i < request.texts.size(); ++i) {
    if (absl::Status s = CallAlive(call); !s.ok()) return done(s);
    first_window.push_back(windows->size());
    auto w = EncodeTokenClassificationText(request.texts[i], absl::StrCat("inputs[", i, "]"), *m.tokenizer,
                                           *m.backend, m.max_length, request.stride);
    if (!w.ok()) return done(w.status());
    for (EncodedInput& e : *w) windows->push_back(std::move(e));
  }
  first_window.push_back(windows->size());
  if (windows->size() > static_cast<size_t>(limits_.max_windows_per_request)) {
    return done(FieldError(FieldErrorKind::kTooMany, "inputs", absl::StrCat(
        "the inputs make ", windows->size(), " windows, more than the limit of ", limits_.max_windows_per_request,
        " per request (send fewer or shorter texts, or a smaller stride)")));
  }
  const absl::Duration tokenize = absl::Now() - t0;
  if (metrics_ != nullptr) metrics_->RecordTokenize(m.name, absl::ToDoubleSeconds(tokenize));
  auto texts = std::make_shared<std::vector<std::string>>(request.texts);
  const Tokenizer* tokenizer = m.tokenizer;
  SubmitSequences(
      m, Sequences(*windows), kOutputTokenLogits, call.deadline, call.cancelled, metrics_,
      [=, name = m.name, labels = info.token_labels, strategy = request.aggregation_strategy,
       ignore = request.ignore_labels.value_or(std::vector<std::string>{"O"})](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return done(r.status());
        TokenClassifyResult out;
        out.model = name;
        for (size_t i = 0; i < texts->size(); ++i) {
          const std::vector<EncodedInput> text_windows(windows->begin() + first_window[i],
                                                      windows->begin() + first_window[i + 1]);
          std::vector<const std::vector<float>*> logits;
          for (size_t w = first_window[i]; w < first_window[i + 1]; ++w) logits.push_back(&r->outputs[w].token_logits);
          out.results.push_back(TokenEntities((*texts)[i], text_windows, logits, labels, *tokenizer, strategy, ignore));
        }
        out.usage = UsageOf(*windows);
        out.timing = TimingOf(start, tokenize, *r);
        done(std::move(out));
      });
}

absl::StatusOr<TokenizeResult> EncoderServing::Tokenize(const TokenizeRequest& request,
                                                       const CallContext& call) const {
  auto prepared = Prepare(request.model, request.inputs, request.truncation, *registry_, limits_, metrics_, call,
                          request.whole_text);
  if (!prepared.ok()) return prepared.status();
  const ServedModel& m = *prepared->model;
  TokenizeResult out;
  out.model = m.name;
  for (EncodedInput& in : *prepared->inputs) {
    Tokenized t;
    t.input_ids = std::move(in.sequence.input_ids);
    t.token_type_ids = std::move(in.sequence.token_type_ids);
    if (t.token_type_ids.empty()) t.token_type_ids.assign(t.input_ids.size(), 0);
    t.offsets = std::move(in.offsets);
    t.special = std::move(in.special);
    t.special.resize(t.input_ids.size(), false);
    if (m.tokenizer != nullptr) {
      for (int32_t id : t.input_ids) t.pieces.push_back(m.tokenizer->IdToPiece(id));
    }
    t.truncated = in.truncated;
    out.results.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<ModelDescription> EncoderServing::DescribeModel(const std::string& name) const {
  auto model = registry_->Find(name);
  if (!model.ok()) return model.status();
  return Describe(**model);
}

absl::StatusOr<std::vector<std::string>> EncoderServing::Decode(const std::string& model,
                                                               const std::vector<std::vector<int32_t>>& ids,
                                                               bool skip_special_tokens) const {
  auto m = registry_->Find(model);
  if (!m.ok()) return m.status();
  if ((*m)->tokenizer == nullptr) {
    return ModelLacks(absl::StrCat("model ", (*m)->name, " has no tokenizer: its token ids cannot be decoded"));
  }
  if (absl::Status s = CheckCount(ids.size(), limits_.max_inputs_per_request, "ids"); !s.ok()) return s;
  std::vector<std::string> texts;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto text = (*m)->tokenizer->Decode(ids[i], skip_special_tokens);
    if (!text.ok()) {
      // "ids[3] = ..." of the sequence, or of the sequence's position in a batch.
      const std::string message(text.status().message());
      return absl::Status(text.status().code(),
                          ids.size() == 1 ? message : absl::StrCat("ids[", i, "]", message.substr(3)));
    }
    texts.push_back(std::move(*text));
  }
  return texts;
}

ModelDescription EncoderServing::Describe(const ServedModel& m) {
  ModelDescription d;
  d.info = m.backend->info();
  d.info.max_length = m.max_length;
  if (!m.devices.empty()) d.info.device = m.devices;
  d.info.has_tokenizer = m.tokenizer != nullptr;
  d.name = m.name;
  d.model_id = m.model_id;
  d.aliases = m.aliases;
  if (auto entailment = EntailmentIndex(d.info.labels, m.name); entailment.ok()) {
    d.entailment_label = d.info.labels[*entailment];
  }
  return d;
}

std::vector<ModelDescription> EncoderServing::ListModels() const {
  std::vector<ModelDescription> out;
  for (const ServedModel* m : registry_->All()) out.push_back(Describe(*m));
  return out;
}

}  // namespace relserve
