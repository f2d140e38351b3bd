#include "server/rpc/encoder_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/rpc/embed_stream.h"
#include "server/rpc/input_encoder.h"
#include "server/rpc/sequence_submitter.h"
#include "server/rpc/status_mapping.h"
#include "server/rpc/unary_call.h"
#include "server/tokenizer/tokenizer.h"

namespace relserve {
namespace {

absl::Time DeadlineOf(const grpc::CallbackServerContext* ctx) {
  const auto d = ctx->deadline();
  if (d == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(d);
}

void FillTiming(absl::Time start, absl::Duration tokenize, const RequestResults& r, v1::Timing* t) {
  t->set_tokenize_us(absl::ToInt64Microseconds(tokenize));
  t->set_queue_us(absl::ToInt64Microseconds(r.max_queue));
  t->set_inference_us(absl::ToInt64Microseconds(r.max_inference));
  t->set_total_us(absl::ToInt64Microseconds(absl::Now() - start));
}

void FillUsage(const std::vector<EncodedInput>& inputs, v1::Usage* usage) {
  int64_t tokens = 0;
  for (const EncodedInput& e : inputs) tokens += static_cast<int64_t>(e.sequence.input_ids.size());
  usage->set_tokens(tokens);
  usage->set_sequences(static_cast<int32_t>(inputs.size()));
}

void L2Normalize(std::vector<float>* v) {
  double norm = 0;
  for (float x : *v) norm += double(x) * x;
  norm = std::sqrt(norm);
  if (norm < 1e-12) return;
  for (float& x : *v) x = static_cast<float>(x / norm);
}

absl::Status CheckCount(int count, int limit, const char* field) {
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  if (count > limit) {
    return absl::InvalidArgumentError(absl::StrCat(field, " has ", count, " entries, more than the limit of ", limit,
                                                   " per request (split the request or use EmbedStream)"));
  }
  return absl::OkStatus();
}

// Tokenizes every input of a request; the first bad one fails the request.
template <typename Inputs>
absl::StatusOr<std::vector<EncodedInput>> EncodeAll(const Inputs& inputs, const ServedModel& model, bool truncate,
                                                    ServerMetrics* metrics, absl::Duration* elapsed) {
  const absl::Time t0 = absl::Now();
  std::vector<EncodedInput> out;
  out.reserve(inputs.size());
  InputLimits limits{model.max_length, truncate};
  for (int i = 0; i < inputs.size(); ++i) {
    auto e = EncodeInput(inputs[i], absl::StrCat("inputs[", i, "]"), model.tokenizer, *model.backend, limits);
    if (!e.ok()) return e.status();
    out.push_back(std::move(*e));
  }
  *elapsed = absl::Now() - t0;
  if (metrics != nullptr) metrics->RecordTokenize(model.name, absl::ToDoubleSeconds(*elapsed));
  return out;
}

// The common start of Embed, EmbedTokens, Classify and Tokenize: the model the request names,
// the input count within the limit, every input tokenized and validated.
struct PreparedRequest {
  const ServedModel* model = nullptr;
  std::shared_ptr<std::vector<EncodedInput>> inputs;
  absl::Duration tokenize;
};

template <typename Request>
absl::StatusOr<PreparedRequest> Prepare(const Request& request, const ModelRegistry& registry,
                                        const ServiceLimits& limits, ServerMetrics* metrics, std::string* label) {
  *label = request.model();
  auto model = registry.Find(request.model());
  if (!model.ok()) return model.status();
  PreparedRequest p;
  p.model = *model;
  *label = p.model->name;
  if (absl::Status s = CheckCount(request.inputs_size(), limits.max_inputs_per_request, "inputs"); !s.ok()) return s;
  auto inputs = EncodeAll(request.inputs(), *p.model, request.truncate(), metrics, &p.tokenize);
  if (!inputs.ok()) return inputs.status();
  p.inputs = std::make_shared<std::vector<EncodedInput>>(std::move(*inputs));
  return p;
}

// EmbedTokens answers tokens x hidden floats: refused before any computation when that cannot
// fit in one response message. Per token: hidden float32 values (packed), plus the token id
// and two offsets (varints of up to 5 bytes each).
absl::Status CheckTokenStatesFit(const std::vector<EncodedInput>& inputs, int hidden, size_t max_bytes) {
  const size_t per_token = static_cast<size_t>(hidden) * sizeof(float) + 15;
  size_t tokens = 0;
  for (const EncodedInput& e : inputs) tokens += e.sequence.input_ids.size();
  const size_t overhead = 64 * inputs.size() + 256;  // per-sequence fields, usage, timing
  if (tokens * per_token + overhead <= max_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the token states of these inputs (", tokens, " tokens x ", hidden, " values) need about ",
      tokens * per_token + overhead, " bytes, more than the largest response of ", max_bytes,
      " bytes: send at most about ", max_bytes > overhead ? (max_bytes - overhead) / per_token : 0,
      " tokens per EmbedTokens request (split the inputs over several requests)"));
}

std::vector<SequenceInput> Sequences(const std::vector<EncodedInput>& inputs) {
  std::vector<SequenceInput> out;
  out.reserve(inputs.size());
  for (const EncodedInput& e : inputs) out.push_back(e.sequence);
  return out;
}

// Probabilities as the model's config asks: softmax (single-label), sigmoid (multi-label),
// raw values (regression).
std::vector<float> Scores(const std::vector<float>& logits, const std::string& problem_type) {
  std::vector<float> s(logits.size());
  if (problem_type == "regression") return logits;
  if (problem_type == "multi_label_classification") {
    for (size_t i = 0; i < logits.size(); ++i) s[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    return s;
  }
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(double(logits[i]) - max);
  for (size_t i = 0; i < logits.size(); ++i) s[i] = static_cast<float>(std::exp(double(logits[i]) - max) / sum);
  return s;
}

}  // namespace

EncoderService::EncoderService(const ModelRegistry* registry, ServerMetrics* metrics, ServiceLimits limits)
    : registry_(registry), metrics_(metrics), limits_(limits), tracker_(registry, limits.max_response_bytes) {}

void EncoderService::HandleEmbed(absl::Time deadline, std::shared_ptr<const std::atomic<bool>> cancelled,
                                 const v1::EmbedRequest& request, v1::EmbedResponse* response, Reply reply) {
  const absl::Time start = absl::Now();
  std::string label;
  auto prepared = Prepare(request, *registry_, limits_, metrics_, &label);
  if (!prepared.ok()) return reply(prepared.status(), label);
  const ServedModel& m = *prepared->model;
  const int dim = m.backend->info().embedding_dim;
  if (request.dimensions() < 0 || request.dimensions() > dim) {
    return reply(absl::InvalidArgumentError(absl::StrCat("dimensions ", request.dimensions(),
                                                         " is outside [0, ", dim, "] for model ", m.name)),
                 m.name);
  }
  const absl::Duration tokenize = prepared->tokenize;
  auto shared_inputs = prepared->inputs;
  const bool normalize = request.normalize();
  const int dimensions = request.dimensions();
  response->set_model(m.name);
  response->set_request_id(request.request_id());
  SubmitSequences(m, Sequences(*shared_inputs), kOutputPooled, deadline, std::move(cancelled), metrics_,
                  [=, name = m.name](absl::StatusOr<RequestResults> r) {
                    if (!r.ok()) return reply(r.status(), name);
                    for (size_t i = 0; i < r->outputs.size(); ++i) {
                      std::vector<float>& v = r->outputs[i].pooled;
                      if (dimensions > 0) v.resize(dimensions);
                      if (normalize || dimensions > 0) L2Normalize(&v);
                      v1::Embedding* e = response->add_embeddings();
                      e->mutable_values()->Assign(v.begin(), v.end());
                      e->set_num_tokens(static_cast<int32_t>((*shared_inputs)[i].sequence.input_ids.size()));
                      e->set_truncated((*shared_inputs)[i].truncated);
                    }
                    FillUsage(*shared_inputs, response->mutable_usage());
                    FillTiming(start, tokenize, *r, response->mutable_timing());
                    reply(absl::OkStatus(), name);
                  });
}

grpc::ServerUnaryReactor* EncoderService::Embed(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::EmbedRequest, v1::EmbedResponse>(&tracker_, metrics_, "Embed", out);
  if (!call->Begin(*bytes)) return call;
  const v1::EmbedRequest* request = &call->request;
  v1::EmbedResponse* response = &call->response;
  HandleEmbed(DeadlineOf(ctx), call->cancelled(), *request, response,
              [call](const absl::Status& s, const std::string& model) { call->Reply(s, model); });
  return call;
}

grpc::ServerUnaryReactor* EncoderService::EmbedTokens(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::EmbedTokensRequest, v1::EmbedTokensResponse>(&tracker_, metrics_, "EmbedTokens", out);
  if (!call->Begin(*bytes)) return call;
  const v1::EmbedTokensRequest* request = &call->request;
  v1::EmbedTokensResponse* response = &call->response;
  std::string label;
  auto prepared = Prepare(*request, *registry_, limits_, metrics_, &label);
  if (!prepared.ok()) return call->Reply(prepared.status(), label), call;
  const ServedModel& m = *prepared->model;
  const absl::Duration tokenize = prepared->tokenize;
  auto shared_inputs = prepared->inputs;
  const int hidden = m.backend->info().hidden_size;
  if (absl::Status s = CheckTokenStatesFit(*shared_inputs, hidden, limits_.max_response_bytes); !s.ok()) {
    return call->Reply(s, m.name), call;
  }
  response->set_model(m.name);
  SubmitSequences(m, Sequences(*shared_inputs), kOutputTokenStates, DeadlineOf(ctx), call->cancelled(), metrics_,
                  [=, name = m.name](absl::StatusOr<RequestResults> r) {
                    if (!r.ok()) return call->Reply(r.status(), name);
                    for (size_t i = 0; i < r->outputs.size(); ++i) {
                      const EncodedInput& in = (*shared_inputs)[i];
                      v1::TokenStates* t = response->add_sequences();
                      t->mutable_token_ids()->Assign(in.sequence.input_ids.begin(), in.sequence.input_ids.end());
                      for (const auto& [b, e] : in.offsets) {
                        t->add_offset_begin(b);
                        t->add_offset_end(e);
                      }
                      t->set_hidden_size(hidden);
                      const std::vector<float>& v = r->outputs[i].token_states;
                      t->mutable_values()->Assign(v.begin(), v.end());
                      t->set_truncated(in.truncated);
                    }
                    FillUsage(*shared_inputs, response->mutable_usage());
                    FillTiming(call->start(), tokenize, *r, response->mutable_timing());
                    call->Reply(absl::OkStatus(), name);
                  });
  return call;
}

grpc::ServerUnaryReactor* EncoderService::Rerank(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::RerankRequest, v1::RerankResponse>(&tracker_, metrics_, "Rerank", out);
  if (!call->Begin(*bytes)) return call;
  const v1::RerankRequest* request = &call->request;
  v1::RerankResponse* response = &call->response;
  auto model = registry_->Find(request->model());
  if (!model.ok()) return call->Reply(model.status(), request->model()), call;
  const ServedModel& m = **model;
  const ModelInfo& info = m.backend->info();
  if (info.labels.empty()) {
    return call->Reply(absl::FailedPreconditionError(absl::StrCat(
                           "model ", m.name, " (", info.architecture,
                           ") has no classification head; Rerank needs a cross-encoder")),
                       m.name),
           call;
  }
  if (request->query().empty()) return call->Reply(absl::InvalidArgumentError("query is empty"), m.name), call;
  if (absl::Status s = CheckCount(request->documents_size(), limits_.max_inputs_per_request, "documents"); !s.ok()) {
    return call->Reply(s, m.name), call;
  }
  if (request->top_n() < 0) return call->Reply(absl::InvalidArgumentError("top_n must not be negative"), m.name), call;
  const absl::Time t0 = absl::Now();
  auto inputs = std::make_shared<std::vector<EncodedInput>>();
  InputLimits limits{m.max_length, request->truncate()};
  for (int i = 0; i < request->documents_size(); ++i) {
    auto e = EncodePair(request->query(), request->documents(i), absl::StrCat("documents[", i, "]"), m.tokenizer,
                        *m.backend, limits);
    if (!e.ok()) return call->Reply(e.status(), m.name), call;
    inputs->push_back(std::move(*e));
  }
  const absl::Duration tokenize = absl::Now() - t0;
  if (metrics_ != nullptr) metrics_->RecordTokenize(m.name, absl::ToDoubleSeconds(tokenize));
  response->set_model(m.name);
  const std::string problem_type = info.problem_type;
  SubmitSequences(
      m, Sequences(*inputs), kOutputLogits, DeadlineOf(ctx), call->cancelled(), metrics_,
      [=, name = m.name](absl::StatusOr<RequestResults> r) {
        if (!r.ok()) return call->Reply(r.status(), name);
        // One logit: sigmoid of it (cross-encoders). Several: the probability of label 1,
        // the "relevant" class of two-label rerankers.
        std::vector<std::pair<float, int>> scored;
        for (size_t i = 0; i < r->outputs.size(); ++i) {
          const std::vector<float>& logits = r->outputs[i].logits;
          float score;
          if (logits.size() == 1) {
            score = request->raw_scores() ? logits[0] : 1.0f / (1.0f + std::exp(-logits[0]));
          } else {
            score = request->raw_scores() ? logits[1] : Scores(logits, "single_label_classification")[1];
          }
          scored.emplace_back(score, static_cast<int>(i));
        }
        std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
        const size_t n = request->top_n() > 0 ? std::min<size_t>(request->top_n(), scored.size()) : scored.size();
        for (size_t k = 0; k < n; ++k) {
          v1::RerankResult* res = response->add_results();
          res->set_index(scored[k].second);
          res->set_score(scored[k].first);
          if (request->return_documents()) res->set_document(request->documents(scored[k].second));
        }
        FillUsage(*inputs, response->mutable_usage());
        FillTiming(call->start(), tokenize, *r, response->mutable_timing());
        call->Reply(absl::OkStatus(), name);
      });
  return call;
}

grpc::ServerUnaryReactor* EncoderService::Classify(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::ClassifyRequest, v1::ClassifyResponse>(&tracker_, metrics_, "Classify", out);
  if (!call->Begin(*bytes)) return call;
  const v1::ClassifyRequest* request = &call->request;
  v1::ClassifyResponse* response = &call->response;
  if (request->top_k() < 0) {
    return call->Reply(absl::InvalidArgumentError("top_k must not be negative"), request->model()), call;
  }
  std::string label;
  auto prepared = Prepare(*request, *registry_, limits_, metrics_, &label);
  if (!prepared.ok()) return call->Reply(prepared.status(), label), call;
  const ServedModel& m = *prepared->model;
  const ModelInfo& info = m.backend->info();
  if (info.labels.empty()) {
    return call->Reply(absl::FailedPreconditionError(absl::StrCat("model ", m.name, " (", info.architecture,
                                                                  ") has no classification head")),
                       m.name),
           call;
  }
  const absl::Duration tokenize = prepared->tokenize;
  auto shared_inputs = prepared->inputs;
  response->set_model(m.name);
  const std::vector<std::string> labels = info.labels;
  const std::string problem_type = info.problem_type;
  SubmitSequences(m, Sequences(*shared_inputs), kOutputLogits, DeadlineOf(ctx), call->cancelled(), metrics_,
                  [=, name = m.name](absl::StatusOr<RequestResults> r) {
                    if (!r.ok()) return call->Reply(r.status(), name);
                    for (const SequenceOutput& out : r->outputs) {
                      v1::Classification* c = response->add_results();
                      c->mutable_logits()->Assign(out.logits.begin(), out.logits.end());
                      const std::vector<float> scores =
                          request->raw_scores() ? out.logits : Scores(out.logits, problem_type);
                      std::vector<int> order(scores.size());
                      std::iota(order.begin(), order.end(), 0);
                      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scores[a] > scores[b]; });
                      const size_t k = request->top_k() > 0 ? std::min<size_t>(request->top_k(), order.size())
                                                            : order.size();
                      for (size_t j = 0; j < k; ++j) {
                        v1::LabelScore* l = c->add_labels();
                        l->set_index(order[j]);
                        l->set_label(order[j] < static_cast<int>(labels.size()) ? labels[order[j]] : "");
                        l->set_score(scores[order[j]]);
                      }
                    }
                    FillUsage(*shared_inputs, response->mutable_usage());
                    FillTiming(call->start(), tokenize, *r, response->mutable_timing());
                    call->Reply(absl::OkStatus(), name);
                  });
  return call;
}

grpc::ServerUnaryReactor* EncoderService::Tokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::TokenizeRequest, v1::TokenizeResponse>(&tracker_, metrics_, "Tokenize", out);
  if (!call->Begin(*bytes)) return call;
  const v1::TokenizeRequest* request = &call->request;
  v1::TokenizeResponse* response = &call->response;
  std::string label;
  auto prepared = Prepare(*request, *registry_, limits_, metrics_, &label);
  if (!prepared.ok()) return call->Reply(prepared.status(), label), call;
  const ServedModel& m = *prepared->model;
  const std::vector<EncodedInput>* inputs = prepared->inputs.get();
  response->set_model(m.name);
  for (const EncodedInput& in : *inputs) {
    v1::Tokenized* t = response->add_results();
    t->mutable_input_ids()->Assign(in.sequence.input_ids.begin(), in.sequence.input_ids.end());
    if (in.sequence.token_type_ids.empty()) {
      for (size_t i = 0; i < in.sequence.input_ids.size(); ++i) t->add_token_type_ids(0);
    } else {
      t->mutable_token_type_ids()->Assign(in.sequence.token_type_ids.begin(), in.sequence.token_type_ids.end());
    }
    for (const auto& [b, e] : in.offsets) {
      t->add_offset_begin(b);
      t->add_offset_end(e);
    }
    if (m.tokenizer != nullptr) {
      for (int32_t id : in.sequence.input_ids) t->add_pieces(m.tokenizer->IdToPiece(id));
    }
    t->set_truncated(in.truncated);
  }
  call->Reply(absl::OkStatus(), m.name);
  return call;
}

grpc::ServerUnaryReactor* EncoderService::ListModels(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* bytes,
                                    grpc::ByteBuffer* out) {
  auto* call = new UnaryCall<v1::ListModelsRequest, v1::ListModelsResponse>(&tracker_, metrics_, "ListModels", out);
  if (!call->Begin(*bytes)) return call;
  v1::ListModelsResponse* response = &call->response;
  for (const ServedModel* m : registry_->All()) {
    const ModelInfo& i = m->backend->info();
    v1::ModelInfo* out = response->add_models();
    out->set_name(m->name);
    out->set_architecture(i.architecture);
    out->set_model_type(i.model_type);
    out->set_max_length(m->max_length);
    out->set_hidden_size(i.hidden_size);
    out->set_num_layers(i.num_layers);
    out->set_vocab_size(i.vocab_size);
    out->set_embedding_dim(i.embedding_dim);
    out->set_pooling(i.pooling);
    for (const std::string& l : i.labels) out->add_labels(l);
    out->set_problem_type(i.problem_type);
    out->set_dtype(i.dtype);
    out->set_device(i.device);
    out->set_has_tokenizer(m->tokenizer != nullptr);
  }
  response->set_default_model(registry_->default_model());
  call->Reply(absl::OkStatus(), registry_->default_model());
  return call;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* EncoderService::EmbedStream(
    grpc::CallbackServerContext* ctx) {
  return NewEmbedStream(this, &tracker_, metrics_, DeadlineOf(ctx));
}

}  // namespace relserve
