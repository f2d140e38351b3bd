// relserve-model tokenize / embed: text in on standard input, JSON lines out.
#include <algorithm>
#include <iostream>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/model/families/family_registry.h"
#include "server/model_config/sentence_transformers_config.h"
#include "server/tokenizer/families/tokenizer_class.h"
#include "server/tokenizer/files/tokenizer_files.h"
#include "server/tokenizer/tokenizer.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// One input line: a text, or two separated by a tab.
absl::StatusOr<Encoding> EncodeLine(const Tokenizer& tokenizer, const std::string& line, const TokenizeOptions& opts) {
  const auto tab = line.find('\t');
  if (tab == std::string::npos) return tokenizer.Encode(line, opts);
  return tokenizer.EncodePair(std::string_view(line).substr(0, tab), std::string_view(line).substr(tab + 1), opts);
}

TokenizeOptions TokenizeOptionsFromFlags(const CliArgs& args) {
  TokenizeOptions opts;
  opts.max_length = args.Int("max-length");
  opts.truncate = !args.Bool("no-truncate");
  return opts;
}

void StripCarriageReturn(std::string* line) {
  if (!line->empty() && line->back() == '\r') line->pop_back();
}

enum class Padding { kNone, kLongest, kMaxLength };

// --padding's values are checked by its flag (longest or max_length).
Padding PaddingFromFlags(const CliArgs& args) {
  const std::string padding = args.String("padding");
  if (padding == "longest") return Padding::kLongest;
  if (padding == "max_length") return Padding::kMaxLength;
  return Padding::kNone;
}

// Text input needs the tokenizer files of the model's family in the directory.
absl::Status NoTokenizerError(const std::string& dir, TokenizerFamily family) {
  return absl::FailedPreconditionError(
      absl::StrCat(dir, " has no tokenizer (", Tokenizer::FilesDescription(family), "): the model takes token ids only"));
}

absl::Status RunTokenize(const CliArgs& args) {
  ASSIGN_OR_RETURN(std::string dir, ModelDirFromFlags(args));
  const Padding padding = PaddingFromFlags(args);
  ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  ASSIGN_OR_RETURN(const TokenizerFamily family, ResolveTokenizerFamily(dir, config.family->tokenizer_family(config)));
  ASSIGN_OR_RETURN(const bool has_tokenizer, Tokenizer::HasFiles(dir, family));
  if (!has_tokenizer) return NoTokenizerError(dir, family);
  ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::Load(dir, family, config.max_length,
                                                   SentencePieceModuleOptions{args.String("sentencepiece-module")}));
  TokenizeOptions opts = TokenizeOptionsFromFlags(args);
  // Padding to the longest line needs every line first; otherwise lines go out as they come.
  std::vector<absl::StatusOr<Encoding>> pending;
  int failures = 0;
  auto print = [&](absl::StatusOr<Encoding>& enc, int pad_to) {
    nlohmann::json out;
    if (enc.ok()) {
      const absl::Status padded = tokenizer->Pad(&*enc, pad_to);
      if (!padded.ok()) enc = padded;
    }
    if (!enc.ok()) {
      ++failures;
      out["error"] = std::string(enc.status().message());
    } else {
      out["input_ids"] = enc->input_ids;
      out["attention_mask"] = enc->attention_mask;
      out["token_type_ids"] = enc->token_type_ids;
      out["truncated"] = enc->truncated;
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  };
  const int max_length_pad = padding == Padding::kMaxLength
                                 ? (opts.max_length > 0 ? opts.max_length : tokenizer->default_max_length())
                                 : 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    StripCarriageReturn(&line);
    absl::StatusOr<Encoding> enc = EncodeLine(*tokenizer, line, opts);
    if (padding == Padding::kLongest) {
      pending.push_back(std::move(enc));
    } else {
      print(enc, max_length_pad);
    }
  }
  size_t longest = 0;
  for (const auto& enc : pending) {
    if (enc.ok()) longest = std::max(longest, enc->input_ids.size());
  }
  for (auto& enc : pending) print(enc, static_cast<int>(longest));
  std::cout.flush();
  if (failures > 0) return absl::InvalidArgumentError(absl::StrCat(failures, " line(s) could not be tokenized"));
  return absl::OkStatus();
}

absl::Status RunEmbed(const CliArgs& args) {
  if (args.Bool("whole-input") || args.Has("window-overlap") || args.Bool("sparse") || args.Bool("multi-vector")) {
    return RunServedEmbedCommand(args);
  }
  const int batch_size = args.Int("batch-size");
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelFromFlags(args));
  const std::unique_ptr<Engine>& engine = loaded.engine;
  if (loaded.tokenizer == nullptr) {
    const ModelConfig& config = engine->config();
    ASSIGN_OR_RETURN(const TokenizerFamily family,
                     ResolveTokenizerFamily(args.String("model"), config.family->tokenizer_family(config)));
    return NoTokenizerError(args.String("model"), family);
  }
  TokenizeOptions opts = TokenizeOptionsFromFlags(args);
  if (opts.max_length == 0) opts.max_length = engine->info().max_length;
  // sentence-transformers' prompt (--prompt-name, else the model's default_prompt_name) goes
  // before each text, as SentenceTransformer.encode(prompt_name=...) puts it.
  const ModelInfo& info = engine->info();
  const std::string prompt_name = args.String("prompt-name");
  ASSIGN_OR_RETURN(const std::string* prompt, FindSentencePrompt(info.prompts, info.default_prompt_name, prompt_name));
  int32_t pooling_skip = 0;
  if (prompt != nullptr && !info.pooling_includes_prompt) {
    TokenizeOptions prompt_opts = opts;
    prompt_opts.truncate = true;
    ASSIGN_OR_RETURN(const Encoding prompt_enc, loaded.tokenizer->Encode(*prompt, prompt_opts));
    pooling_skip = std::max<int32_t>(static_cast<int32_t>(prompt_enc.input_ids.size()) - 1, 0);
  }

  std::vector<SequenceInput> sequences;
  std::string line;
  int line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    StripCarriageReturn(&line);
    const bool pair = line.find('\t') != std::string::npos;
    if (pair && prompt != nullptr && !prompt_name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": --prompt-name puts the prompt before texts, not pairs"));
    }
    const bool prompted = prompt != nullptr && !pair;
    if (prompted) line.insert(0, *prompt);
    auto enc = EncodeLine(*loaded.tokenizer, line, opts);
    if (!enc.ok()) return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", enc.status().message()));
    SequenceInput sequence;
    sequence.input_ids = std::move(enc->input_ids);
    sequence.token_type_ids = std::move(enc->token_type_ids);
    if (prompted) sequence.pooling_skip = pooling_skip;
    sequences.push_back(std::move(sequence));
  }
  // Length-sorted batches pad least; results go back in input order.
  std::vector<size_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sequences[a].input_ids.size() < sequences[b].input_ids.size();
  });
  std::vector<std::vector<float>> embeddings(sequences.size());
  for (size_t start = 0; start < order.size(); start += batch_size) {
    std::vector<SequenceInput> batch;
    const size_t end = std::min(order.size(), start + batch_size);
    for (size_t i = start; i < end; ++i) batch.push_back(sequences[order[i]]);
    ASSIGN_OR_RETURN(auto outputs, engine->Run(batch, kOutputPooled));
    for (size_t i = start; i < end; ++i) embeddings[order[i]] = std::move(outputs[i - start].pooled);
  }
  for (const auto& e : embeddings) std::cout << nlohmann::json{{"embedding", e}}.dump() << "\n";
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace

ModelCommand TokenizeCommand() {
  return {"tokenize",
          "one text per line on stdin (a tab separates a pair); JSON lines out (input_ids, attention_mask,\n"
          "token_type_ids, truncated); a line that fails prints {\"error\": ...} and the exit code is 1",
          CliFlags({{CliString("padding", "longest|max_length",
                               "pad every line to the longest one, or to the max length, on the family's side (the "
                               "left for XLNet) with attention mask 0",
                               "", {"longest", "max_length"}),
                     NoTruncateFlag()},
                    ModelFlags(),
                    {MaxLengthFlag(), SentencePieceModuleFlag().In("model options")}}),
          RunTokenize};
}

ModelCommand EmbedCommand() {
  return {"embed",
          "one text per line on stdin (a tab separates a pair); pooled embeddings as JSON lines, in input order",
          CliFlags({{CliInt("batch-size", "lines per batch", 32, 1),
                     CliString("prompt-name", "NAME", "the sentence-transformers prompt put before each text", "", {},
                               "the model's default_prompt_name"),
                     NoTruncateFlag(),
                     CliBool("whole-input",
                             "texts longer than the model embedded in windows whose pooled vectors are averaged "
                             "(adds windows and num_tokens)"),
                     CliInt("window-overlap", "tokens each window shares with the one before (implies the serving "
                                              "layer, as --whole-input does)",
                            0, 0),
                     CliBool("sparse", "the model's sparse vector too, as the server's Embed answers it"),
                     CliBool("multi-vector", "the model's ColBERT token vectors too, as the server's Embed answers "
                                             "them")},
                    EngineFlags()}),
          RunEmbed};
}

}  // namespace relserve
