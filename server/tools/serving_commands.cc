// relserve-model zero-shot, ner, and embed with --whole-input, --sparse or --multi-vector: the
// engine behind the server's serving layer (LocalServing), text in on standard input, JSON lines
// out, exactly what a server request answers.
#include <future>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/tools/local_serving.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

std::vector<std::string> ReadLines() {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

template <typename Result, typename Call>
absl::StatusOr<Result> Await(Call&& call) {
  std::promise<absl::StatusOr<Result>> answer;
  call([&answer](absl::StatusOr<Result> r) { answer.set_value(std::move(r)); });
  return answer.get_future().get();
}

absl::StatusOr<std::unique_ptr<LocalServing>> LocalFromFlags(const CliArgs& args, ServingLimits limits) {
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelFromFlags(args));
  limits.max_inputs_per_request = 1 << 20;
  limits.max_windows_per_request = 1 << 20;
  return LocalServing::Create(std::move(loaded), args.String("device"), args.Int("batch-size"), args.Int("threads"),
                              limits);
}

absl::Status RunZeroShot(const CliArgs& args) {
  ZeroShotRequest request;
  ASSIGN_OR_RETURN(const std::string labels, args.Required("labels"));
  for (absl::string_view l : absl::StrSplit(labels, ',')) {
    absl::string_view stripped = absl::StripAsciiWhitespace(l);
    if (!stripped.empty()) request.candidate_labels.emplace_back(stripped);
  }
  request.hypothesis_template = args.String("template");
  request.multi_label = args.Bool("multi-label");
  if (args.Bool("no-truncate")) request.truncation.truncate = false;
  ASSIGN_OR_RETURN(auto local, LocalFromFlags(args, ServingLimits()));
  request.sequences = ReadLines();
  if (request.sequences.empty()) return absl::InvalidArgumentError("no text on standard input");
  auto result = Await<ZeroShotResult>(
      [&](auto done) { local->serving().ZeroShotClassify(request, CallContext(), std::move(done)); });
  if (!result.ok()) return result.status();
  for (const ZeroShotClassification& c : result->results) {
    nlohmann::json labels_out = nlohmann::json::array(), scores = nlohmann::json::array();
    for (const LabelScore& l : c.labels) {
      labels_out.push_back(l.label);
      scores.push_back(l.score);
    }
    std::cout << nlohmann::json{{"sequence", c.sequence}, {"labels", labels_out}, {"scores", scores}}.dump(
                     -1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  }
  std::cout.flush();
  return absl::OkStatus();
}

absl::Status RunNer(const CliArgs& args) {
  TokenClassifyRequest request;
  ASSIGN_OR_RETURN(request.aggregation_strategy,
                   ParseAggregationStrategy(args.String("aggregation-strategy"), "--aggregation-strategy"));
  if (args.Has("ignore-labels")) {
    std::vector<std::string> ignore;
    for (absl::string_view l : absl::StrSplit(args.String("ignore-labels"), ',', absl::SkipEmpty())) {
      ignore.emplace_back(absl::StripAsciiWhitespace(l));
    }
    request.ignore_labels = std::move(ignore);
  }
  if (args.Has("stride")) request.stride = args.Int("stride");
  ASSIGN_OR_RETURN(auto local, LocalFromFlags(args, ServingLimits()));
  request.texts = ReadLines();
  if (request.texts.empty()) return absl::InvalidArgumentError("no text on standard input");
  auto result = Await<TokenClassifyResult>(
      [&](auto done) { local->serving().ClassifyTokens(request, CallContext(), std::move(done)); });
  if (!result.ok()) return result.status();
  const bool none = request.aggregation_strategy == AggregationStrategy::kNone;
  for (const std::vector<TokenEntity>& entities : result->results) {
    nlohmann::json list = nlohmann::json::array();
    for (const TokenEntity& e : entities) {
      nlohmann::json entry{{none ? "entity" : "entity_group", e.entity}, {"score", e.score}, {"word", e.word},
                           {"start", e.start}, {"end", e.end}};
      if (none) entry["index"] = e.index;
      list.push_back(std::move(entry));
    }
    std::cout << list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace

ModelCommand NerCommand() {
  return {"ner",
          "one text per line on stdin; token classification (named entities) with a *ForTokenClassification\n"
          "model as transformers' TokenClassificationPipeline answers it: the pipeline's list per line",
          CliFlags({{CliString("aggregation-strategy", "S", "how tokens become entities", "simple",
                               {"none", "simple", "first", "average", "max"}),
                     CliString("ignore-labels", "A,B,...",
                               "labels left out, separated by commas (\"\" for none)", "O"),
                     CliInt("stride", "tokens shared by the windows of a text longer than the model "
                                      "(else such a text is refused)", 0, 0, "N", "unset"),
                     CliInt("batch-size", "sequences per batch", 32, 1)},
                    EngineFlags()}),
          RunNer};
}

ModelCommand ZeroShotCommand() {
  return {"zero-shot",
          "one text per line on stdin; zero-shot classification with an NLI model as transformers'\n"
          "zero-shot-classification pipeline answers it: {sequence, labels, scores} per line, best first",
          CliFlags({{CliRequired("labels", "A,B,...", "the candidate labels, separated by commas"),
                     CliString("template", "T", "the hypothesis each label is put into ({} is the label)", "", {},
                               "\"This example is {}.\""),
                     CliBool("multi-label", "each label scored on its own (else the scores sum to 1)"),
                     NoTruncateFlag(),
                     CliInt("batch-size", "sequences per batch", 32, 1)},
                    EngineFlags()}),
          RunZeroShot};
}

absl::Status RunServedEmbedCommand(const CliArgs& args) {
  ServingLimits limits;
  limits.auto_truncate = !args.Bool("no-truncate");
  limits.window_overlap = args.Int("window-overlap");
  ASSIGN_OR_RETURN(auto local, LocalFromFlags(args, limits));
  EmbedRequest request;
  request.prompt_name = args.String("prompt-name");
  request.whole_input = args.Bool("whole-input");
  request.return_sparse = args.Bool("sparse");
  request.return_multi_vector = args.Bool("multi-vector");
  for (std::string& line : ReadLines()) {
    const auto tab = line.find('\t');
    request.inputs.push_back(tab == std::string::npos ? Input::Text(std::move(line))
                                                      : Input::Pair(line.substr(0, tab), line.substr(tab + 1)));
  }
  if (request.inputs.empty()) return absl::InvalidArgumentError("no text on standard input");
  auto result =
      Await<EmbedResult>([&](auto done) { local->serving().Embed(request, CallContext(), std::move(done)); });
  if (!result.ok()) return result.status();
  for (const Embedding& e : result->embeddings) {
    nlohmann::json out{{"embedding", e.values}};
    if (request.whole_input.value_or(false)) {
      out["windows"] = e.windows;
      out["num_tokens"] = e.num_tokens;
    }
    if (request.return_sparse) {
      nlohmann::json sparse = nlohmann::json::array();
      for (const auto& [index, value] : e.sparse) sparse.push_back({{"index", index}, {"value", value}});
      out["sparse"] = std::move(sparse);
    }
    if (request.return_multi_vector) {
      nlohmann::json rows = nlohmann::json::array();
      const size_t dim = static_cast<size_t>(std::max(e.multi_vector_dim, 1));
      for (size_t r = 0; r * dim < e.multi_vector.size(); ++r) {
        rows.push_back(std::vector<float>(e.multi_vector.begin() + r * dim, e.multi_vector.begin() + (r + 1) * dim));
      }
      out["multi_vector"] = std::move(rows);
    }
    std::cout << out.dump() << "\n";
  }
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace relserve
