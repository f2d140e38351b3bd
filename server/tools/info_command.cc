// relserve-model info: what the engine loaded.
#include <iostream>

#include "nlohmann/json.hpp"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status RunInfo(const CliArgs& args) {
  ASSIGN_OR_RETURN(auto engine, LoadEngineFromFlags(args));
  const ModelInfo& i = engine->info();
  nlohmann::json out = {{"architecture", i.architecture}, {"model_type", i.model_type},
                        {"hidden_size", i.hidden_size},   {"num_layers", i.num_layers},
                        {"vocab_size", i.vocab_size},     {"type_vocab_size", i.type_vocab_size},
                        {"max_length", i.max_length},     {"embedding_dim", i.embedding_dim},
                        {"pooling", i.pooling.Describe()}, {"normalizes", i.pooling.normalize},
                        {"labels", i.labels},
                        {"problem_type", i.labels.empty() ? "" : ProblemTypeName(i.problem_type)},
                        {"dtype", DTypeName(i.dtype)},    {"device", i.device},
                        {"has_tokenizer", i.has_tokenizer},
                        {"tokenizer_file", i.tokenizer_file}};
  if (!i.no_tokenizer_reason.empty()) out["no_tokenizer_reason"] = i.no_tokenizer_reason;
  if (!i.max_length_source.empty()) out["max_length_source"] = i.max_length_source;
  // sentence-transformers' config_sentence_transformers.json, where the model has one.
  if (!i.similarity_fn_name.empty()) out["similarity_fn_name"] = i.similarity_fn_name;
  if (!i.prompts.empty()) {
    out["prompts"] = nlohmann::json::object();
    for (const auto& [name, text] : i.prompts) out["prompts"][name] = text;
  }
  if (!i.default_prompt_name.empty()) out["default_prompt_name"] = i.default_prompt_name;
  // The sparse and multi-vector heads found (a masked-LM head, bge-m3's files), and why not.
  out["sparse_kind"] = i.sparse_kind;
  out["multi_vector_kind"] = i.multi_vector_kind;
  if (i.multi_vector_dim > 0) out["multi_vector_dim"] = i.multi_vector_dim;
  // A token classifier's labels (*ForTokenClassification), where it has them.
  if (!i.token_labels.empty()) out["token_labels"] = i.token_labels;
  out["heads"] = engine->heads_description();
  std::cout << out.dump(2) << std::endl;
  return absl::OkStatus();
}

}  // namespace

ModelCommand InfoCommand() { return {"info", "what the engine loaded, as JSON", EngineFlags(), RunInfo}; }

}  // namespace relserve
