#include "server/rpc/proto_conversion.h"

#include "absl/strings/str_cat.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

Input FromProto(const v1::Input& in) {
  switch (in.kind_case()) {
    case v1::Input::kText: return Input::Text(in.text());
    case v1::Input::kPair: return Input::Pair(in.pair().first(), in.pair().second());
    case v1::Input::kTokens:
      return Input::Tokens({in.tokens().ids().begin(), in.tokens().ids().end()},
                           {in.tokens().token_type_ids().begin(), in.tokens().token_type_ids().end()});
    case v1::Input::KIND_NOT_SET: break;
  }
  return Input();
}

std::vector<Input> Inputs(const google::protobuf::RepeatedPtrField<v1::Input>& in) {
  std::vector<Input> out;
  out.reserve(in.size());
  for (const v1::Input& i : in) out.push_back(FromProto(i));
  return out;
}

void ToProto(const Usage& u, v1::Usage* out) {
  out->set_tokens(u.tokens);
  out->set_sequences(u.sequences);
}

void ToProto(const Timing& t, v1::Timing* out) {
  out->set_tokenize_us(absl::ToInt64Microseconds(t.tokenize));
  out->set_queue_us(absl::ToInt64Microseconds(t.queue));
  out->set_inference_us(absl::ToInt64Microseconds(t.inference));
  out->set_total_us(absl::ToInt64Microseconds(t.total));
}

template <typename Proto>
void Offsets(const std::vector<std::pair<int32_t, int32_t>>& offsets, Proto* out) {
  for (const auto& [b, e] : offsets) {
    out->add_offset_begin(b);
    out->add_offset_end(e);
  }
}

// `truncate` (unset: the server's default) and `truncation_direction`.
template <typename Request>
absl::StatusOr<Truncation> TruncationOf(const Request& r) {
  Truncation t;
  if (r.has_truncate()) t.truncate = r.truncate();
  switch (r.truncation_direction()) {
    case v1::TRUNCATION_DIRECTION_UNSPECIFIED:
    case v1::TRUNCATION_DIRECTION_RIGHT:
      t.direction = TruncationDirection::kRight;
      return t;
    case v1::TRUNCATION_DIRECTION_LEFT:
      t.direction = TruncationDirection::kLeft;
      return t;
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("truncation_direction ", r.truncation_direction(),
                                                 " is not a TruncationDirection (RIGHT = 1, LEFT = 2)"));
}

// What every request carries: the model it names and how its inputs are cut.
template <typename Out, typename Request>
absl::StatusOr<Out> Common(const Request& r) {
  Out out;
  auto truncation = TruncationOf(r);
  if (!truncation.ok()) return truncation.status();
  out.truncation = *truncation;
  out.model = r.model();
  return out;
}

}  // namespace

absl::StatusOr<EmbedRequest> FromProto(const v1::EmbedRequest& r) {
  ASSIGN_OR_RETURN(EmbedRequest out, Common<EmbedRequest>(r));
  out.inputs = Inputs(r.inputs());
  out.normalize = r.normalize();
  out.dimensions = r.dimensions();
  out.request_id = r.request_id();
  out.prompt_name = r.prompt_name();
  if (r.has_whole_input()) out.whole_input = r.whole_input();
  if (r.has_window_overlap()) out.window_overlap = r.window_overlap();
  out.return_sparse = r.return_sparse();
  out.return_multi_vector = r.return_multi_vector();
  return out;
}

absl::StatusOr<ZeroShotRequest> FromProto(const v1::ZeroShotClassifyRequest& r) {
  ASSIGN_OR_RETURN(ZeroShotRequest out, Common<ZeroShotRequest>(r));
  out.sequences.assign(r.sequences().begin(), r.sequences().end());
  out.candidate_labels.assign(r.candidate_labels().begin(), r.candidate_labels().end());
  out.hypothesis_template = r.hypothesis_template();
  out.multi_label = r.multi_label();
  return out;
}

absl::StatusOr<TokenClassifyRequest> FromProto(const v1::ClassifyTokensRequest& r) {
  TokenClassifyRequest out;
  out.model = r.model();
  out.texts.assign(r.texts().begin(), r.texts().end());
  if (!r.aggregation_strategy().empty()) {
    ASSIGN_OR_RETURN(out.aggregation_strategy,
                     ParseAggregationStrategy(r.aggregation_strategy(), "aggregation_strategy"));
  }
  if (r.has_ignore_labels()) {
    out.ignore_labels = std::vector<std::string>(r.ignore_labels().labels().begin(), r.ignore_labels().labels().end());
  }
  if (r.has_stride()) out.stride = r.stride();
  return out;
}

absl::StatusOr<EmbedTokensRequest> FromProto(const v1::EmbedTokensRequest& r) {
  ASSIGN_OR_RETURN(EmbedTokensRequest out, Common<EmbedTokensRequest>(r));
  out.inputs = Inputs(r.inputs());
  return out;
}

absl::StatusOr<RerankRequest> FromProto(const v1::RerankRequest& r) {
  ASSIGN_OR_RETURN(RerankRequest out, Common<RerankRequest>(r));
  out.query = r.query();
  out.documents.assign(r.documents().begin(), r.documents().end());
  out.top_n = r.top_n();
  out.return_documents = r.return_documents();
  out.raw_scores = r.raw_scores();
  out.max_tokens_per_doc = r.max_tokens_per_doc();
  if (r.has_chunk_documents()) out.chunk_documents = r.chunk_documents();
  if (r.has_max_chunks_per_doc()) out.max_chunks_per_doc = r.max_chunks_per_doc();
  if (r.has_chunk_overlap()) out.chunk_overlap = r.chunk_overlap();
  return out;
}

absl::StatusOr<ClassifyRequest> FromProto(const v1::ClassifyRequest& r) {
  ASSIGN_OR_RETURN(ClassifyRequest out, Common<ClassifyRequest>(r));
  out.inputs = Inputs(r.inputs());
  out.raw_scores = r.raw_scores();
  out.top_k = r.top_k();
  return out;
}

absl::StatusOr<TokenizeRequest> FromProto(const v1::TokenizeRequest& r) {
  ASSIGN_OR_RETURN(TokenizeRequest out, Common<TokenizeRequest>(r));
  out.inputs = Inputs(r.inputs());
  return out;
}

void ToProto(EmbedResult&& r, v1::EmbedResponse* out) {
  out->set_model(r.model);
  out->set_request_id(r.request_id);
  for (Embedding& e : r.embeddings) {
    v1::Embedding* p = out->add_embeddings();
    p->mutable_values()->Assign(e.values.begin(), e.values.end());
    p->set_num_tokens(e.num_tokens);
    p->set_truncated(e.truncated);
    p->set_windows(e.windows);
    for (const auto& [index, value] : e.sparse) {
      v1::SparseValue* v = p->add_sparse();
      v->set_index(index);
      v->set_value(value);
    }
    if (e.multi_vector_dim > 0) {
      v1::TokenVectors* v = p->mutable_multi_vector();
      v->set_dim(e.multi_vector_dim);
      v->set_count(e.multi_vector_count);
      v->mutable_values()->Assign(e.multi_vector.begin(), e.multi_vector.end());
    }
  }
  ToProto(r.usage, out->mutable_usage());
  ToProto(r.timing, out->mutable_timing());
}

void ToProto(EmbedTokensResult&& r, v1::EmbedTokensResponse* out) {
  out->set_model(r.model);
  for (TokenStates& t : r.sequences) {
    v1::TokenStates* p = out->add_sequences();
    p->mutable_token_ids()->Assign(t.token_ids.begin(), t.token_ids.end());
    Offsets(t.offsets, p);
    p->set_hidden_size(t.hidden_size);
    p->mutable_values()->Assign(t.values.begin(), t.values.end());
    p->set_truncated(t.truncated);
  }
  ToProto(r.usage, out->mutable_usage());
  ToProto(r.timing, out->mutable_timing());
}

void ToProto(RerankResult&& r, v1::RerankResponse* out) {
  out->set_model(r.model);
  for (RerankHit& h : r.results) {
    v1::RerankResult* p = out->add_results();
    p->set_index(h.index);
    p->set_score(h.score);
    p->set_windows(h.windows);
    if (!h.document.empty()) p->set_document(std::move(h.document));
  }
  ToProto(r.usage, out->mutable_usage());
  ToProto(r.timing, out->mutable_timing());
}

void ToProto(ClassifyResult&& r, v1::ClassifyResponse* out) {
  out->set_model(r.model);
  for (Classification& c : r.results) {
    v1::Classification* p = out->add_results();
    p->mutable_logits()->Assign(c.logits.begin(), c.logits.end());
    for (LabelScore& l : c.labels) {
      v1::LabelScore* s = p->add_labels();
      s->set_index(l.index);
      s->set_label(std::move(l.label));
      s->set_score(l.score);
    }
  }
  ToProto(r.usage, out->mutable_usage());
  ToProto(r.timing, out->mutable_timing());
}

void ToProto(ZeroShotResult&& r, v1::ZeroShotClassifyResponse* out) {
  out->set_model(r.model);
  for (ZeroShotClassification& c : r.results) {
    v1::ZeroShotClassification* p = out->add_results();
    p->set_sequence(std::move(c.sequence));
    for (LabelScore& l : c.labels) {
      v1::LabelScore* s = p->add_labels();
      s->set_index(l.index);
      s->set_label(std::move(l.label));
      s->set_score(l.score);
    }
  }
  ToProto(r.usage, out->mutable_usage());
  ToProto(r.timing, out->mutable_timing());
}

void ToProto(TokenClassifyResult&& r, v1::ClassifyTokensResponse* out) {
  out->set_model(r.model);
  for (std::vector<TokenEntity>& entities : r.results) {
    v1::TokenEntities* p = out->add_results();
    for (TokenEntity& e : entities) {
      v1::TokenEntity* q = p->add_entities();
      q->set_entity(std::move(e.entity));
      q->set_score(e.score);
      q->set_index(e.index);
      q->set_word(std::move(e.word));
      q->set_start(e.start);
      q->set_end(e.end);
    }
  }
  ToProto(r.usage, out->mutable_usage());
  ToProto(r.timing, out->mutable_timing());
}

void ToProto(TokenizeResult&& r, v1::TokenizeResponse* out) {
  out->set_model(r.model);
  for (Tokenized& t : r.results) {
    v1::Tokenized* p = out->add_results();
    p->mutable_input_ids()->Assign(t.input_ids.begin(), t.input_ids.end());
    p->mutable_token_type_ids()->Assign(t.token_type_ids.begin(), t.token_type_ids.end());
    Offsets(t.offsets, p);
    for (std::string& piece : t.pieces) p->add_pieces(std::move(piece));
    for (bool special : t.special) p->add_special(special);
    p->set_truncated(t.truncated);
  }
}

void ToProto(const std::vector<ModelDescription>& models, const std::string& default_model,
             v1::ListModelsResponse* out) {
  for (const ModelDescription& m : models) {
    v1::ModelInfo* p = out->add_models();
    const ModelInfo& i = m.info;
    p->set_name(m.name);
    p->set_architecture(i.architecture);
    p->set_model_type(i.model_type);
    p->set_max_length(i.max_length);
    p->set_hidden_size(i.hidden_size);
    p->set_num_layers(i.num_layers);
    p->set_vocab_size(i.vocab_size);
    p->set_embedding_dim(i.embedding_dim);
    p->set_pooling(i.pooling.Describe());
    for (const std::string& l : i.labels) p->add_labels(l);
    p->set_problem_type(m.has_classifier() ? ProblemTypeName(i.problem_type) : "");
    p->set_dtype(DTypeName(i.dtype));
    p->set_device(i.device);
    p->set_has_tokenizer(i.has_tokenizer);
    p->set_similarity_fn_name(m.similarity_fn_name());
    p->set_normalized(i.pooling.normalize);
    for (const std::string& name : m.prompt_names()) p->add_prompt_names(name);
    p->set_default_prompt_name(i.default_prompt_name);
    p->set_sparse(i.sparse_kind);
    p->set_multi_vector(i.multi_vector_kind);
    p->set_multi_vector_dim(i.multi_vector_dim);
    p->set_entailment_label(m.entailment_label);
    for (const std::string& l : i.token_labels) p->add_token_labels(l);
  }
  out->set_default_model(default_model);
}

}  // namespace relserve
