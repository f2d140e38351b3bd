#include "client/request_building.h"

namespace relserve::client {
namespace {

template <typename Request>
void AddInputs(std::vector<v1::Input> inputs, Request* request) {
  for (v1::Input& input : inputs) *request->add_inputs() = std::move(input);
}

// `truncate` only when the command line says, so that the server's default applies otherwise.
template <typename Request>
void SetTruncation(const RequestOptions& options, Request* request) {
  if (options.truncate.has_value()) request->set_truncate(*options.truncate);
  if (options.truncation_direction == "left") request->set_truncation_direction(v1::TRUNCATION_DIRECTION_LEFT);
  if (options.truncation_direction == "right") request->set_truncation_direction(v1::TRUNCATION_DIRECTION_RIGHT);
}

}  // namespace

v1::EmbedRequest BuildEmbedRequest(const RequestOptions& options, std::vector<v1::Input> inputs) {
  v1::EmbedRequest r;
  r.set_model(options.model);
  AddInputs(std::move(inputs), &r);
  r.set_normalize(options.normalize);
  SetTruncation(options, &r);
  r.set_dimensions(options.dimensions);
  r.set_request_id(options.request_id);
  if (options.whole_input.has_value()) r.set_whole_input(*options.whole_input);
  r.set_return_sparse(options.sparse);
  r.set_return_multi_vector(options.multi_vector);
  return r;
}

v1::ZeroShotClassifyRequest BuildZeroShotRequest(const RequestOptions& options, const std::vector<std::string>& texts) {
  v1::ZeroShotClassifyRequest r;
  r.set_model(options.model);
  for (const std::string& t : texts) r.add_sequences(t);
  for (const std::string& l : options.labels) r.add_candidate_labels(l);
  r.set_hypothesis_template(options.hypothesis_template);
  r.set_multi_label(options.multi_label);
  SetTruncation(options, &r);
  return r;
}

v1::ClassifyTokensRequest BuildClassifyTokensRequest(const RequestOptions& options, const std::vector<std::string>& texts) {
  v1::ClassifyTokensRequest r;
  r.set_model(options.model);
  for (const std::string& t : texts) r.add_texts(t);
  r.set_aggregation_strategy(options.aggregation_strategy);
  if (options.ignore_labels.has_value()) {
    v1::LabelList* labels = r.mutable_ignore_labels();
    for (const std::string& l : *options.ignore_labels) labels->add_labels(l);
  }
  if (options.stride.has_value()) r.set_stride(*options.stride);
  return r;
}

v1::EmbedTokensRequest BuildEmbedTokensRequest(const RequestOptions& options, std::vector<v1::Input> inputs) {
  v1::EmbedTokensRequest r;
  r.set_model(options.model);
  AddInputs(std::move(inputs), &r);
  SetTruncation(options, &r);
  return r;
}

v1::ClassifyRequest BuildClassifyRequest(const RequestOptions& options, std::vector<v1::Input> inputs) {
  v1::ClassifyRequest r;
  r.set_model(options.model);
  AddInputs(std::move(inputs), &r);
  SetTruncation(options, &r);
  r.set_raw_scores(options.raw_scores);
  r.set_top_k(options.top_k);
  return r;
}

v1::TokenizeRequest BuildTokenizeRequest(const RequestOptions& options, std::vector<v1::Input> inputs) {
  v1::TokenizeRequest r;
  r.set_model(options.model);
  AddInputs(std::move(inputs), &r);
  SetTruncation(options, &r);
  return r;
}

v1::RerankRequest BuildRerankRequest(const RequestOptions& options, const std::string& query,
                                     const std::vector<std::string>& documents) {
  v1::RerankRequest r;
  r.set_model(options.model);
  r.set_query(query);
  for (const std::string& d : documents) r.add_documents(d);
  r.set_top_n(options.top_n);
  r.set_return_documents(options.return_documents);
  SetTruncation(options, &r);
  r.set_raw_scores(options.raw_scores);
  return r;
}

}  // namespace relserve::client
