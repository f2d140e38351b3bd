// relserve-model forward: transformers' forward on a padded batch of token ids.
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "server/model/engine.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// The values one matrix of inputs.json may hold, [min, max], and how to say so.
struct ValueRange {
  int64_t min = 0;
  int64_t max = 0;
  std::string description;  // "the vocabulary [0, 128100)"
};

// Reads one [batch, length] integer matrix of inputs.json.
absl::Status ReadMatrix(const nlohmann::json& j, const char* key, const std::string& path, const ValueRange& range,
                        int64_t* batch, int64_t* length, std::vector<int64_t>* out) {
  const nlohmann::json& rows = j.at(key);
  if (!rows.is_array() || rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"", key, "\" must be a non-empty list of rows"));
  }
  if (*batch == 0) *batch = static_cast<int64_t>(rows.size());
  if (static_cast<int64_t>(rows.size()) != *batch) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"", key, "\" has ", rows.size(), " rows, expected ", *batch));
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].is_array()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, "[", r, "] is not a list"));
    if (*length == 0) *length = static_cast<int64_t>(rows[r].size());
    if (static_cast<int64_t>(rows[r].size()) != *length || *length == 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, "[", r, "] has ", rows[r].size(),
                                                     " values, expected ", *length, " (rows must be padded to one length)"));
    }
    for (size_t c = 0; c < rows[r].size(); ++c) {
      const nlohmann::json& v = rows[r][c];
      if (!v.is_number_integer()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": ", key, "[", r, "][", c, "] is not an integer: ", JsonValueForMessage(v)));
      }
      // Unsigned values are compared as such: 18446744073709551615 must not pass for -1.
      bool in_range = false;
      int64_t value = 0;
      if (v.is_number_unsigned()) {
        const uint64_t u = v.get<uint64_t>();
        in_range = u <= static_cast<uint64_t>(INT64_MAX);
        value = in_range ? static_cast<int64_t>(u) : 0;
        in_range = in_range && value >= range.min && value <= range.max;
      } else {
        value = v.get<int64_t>();
        in_range = value >= range.min && value <= range.max;
      }
      if (!in_range) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, "[", r, "][", c, "] = ", JsonValueForMessage(v),
                                                       " is outside ", range.description));
      }
      out->push_back(value);
    }
  }
  return absl::OkStatus();
}

absl::Status RunForward(const CliArgs& args) {
  ASSIGN_OR_RETURN(std::string inputs_path, args.Required("inputs"));
  ASSIGN_OR_RETURN(std::string output_path, args.Required("output"));
  ASSIGN_OR_RETURN(nlohmann::json inputs, ReadJsonFile(inputs_path));
  if (!inputs.is_object() || !inputs.contains("input_ids")) {
    return absl::InvalidArgumentError(absl::StrCat(inputs_path, ": expected an object with \"input_ids\""));
  }
  // The model first: the values the inputs may hold depend on it.
  ASSIGN_OR_RETURN(auto engine, LoadEngineFromFlags(args));
  const ModelInfo& info = engine->info();
  const ValueRange ids{0, info.vocab_size - 1, absl::StrCat("the vocabulary [0, ", info.vocab_size, ")")};
  const ValueRange mask{0, 1, "{0, 1}"};
  // Without token-type embeddings the model ignores token_type_ids (as transformers does).
  const ValueRange types = info.type_vocab_size > 0
                               ? ValueRange{0, info.type_vocab_size - 1, absl::StrCat("[0, ", info.type_vocab_size, ")")}
                               : ValueRange{INT64_MIN, INT64_MAX, "the 64-bit integers"};
  PaddedBatch batch;
  RETURN_IF_ERROR(ReadMatrix(inputs, "input_ids", inputs_path, ids, &batch.batch, &batch.length, &batch.input_ids));
  if (inputs.contains("attention_mask") && !inputs.at("attention_mask").is_null()) {
    RETURN_IF_ERROR(ReadMatrix(inputs, "attention_mask", inputs_path, mask, &batch.batch, &batch.length,
                               &batch.attention_mask));
  } else {
    batch.attention_mask.assign(batch.input_ids.size(), 1);
  }
  if (inputs.contains("token_type_ids") && !inputs.at("token_type_ids").is_null()) {
    RETURN_IF_ERROR(ReadMatrix(inputs, "token_type_ids", inputs_path, types, &batch.batch, &batch.length,
                               &batch.token_type_ids));
  }

  ASSIGN_OR_RETURN(std::vector<NamedTensor> tensors, engine->ForwardPadded(batch, /*all_hidden_states=*/true));
  SafetensorsWriter writer;
  writer.SetMetadata({{"format", "pt"}});
  for (const NamedTensor& t : tensors) {
    if (t.name == "pooled" && !args.Bool("pooled")) continue;
    RETURN_IF_ERROR(writer.Add(t.name, StDType::kF32, t.shape, t.data.data(), t.data.size() * sizeof(float)));
  }
  return writer.WriteFile(output_path);
}

}  // namespace

ModelCommand ForwardCommand() {
  return {"forward",
          "transformers' forward on a padded batch (input_ids, attention_mask, token_type_ids); writes\n"
          "last_hidden_state, hidden_state_0..N and logits as float32",
          CliFlags({{CliRequired("inputs", "FILE.json",
                                 "the batch: input_ids, attention_mask and token_type_ids as lists of rows padded to "
                                 "one length"),
                     CliRequired("output", "FILE.safetensors", "where the tensors are written"),
                     CliBool("pooled", "the pooled output too")},
                    EngineFlags()}),
          RunForward};
}

}  // namespace relserve
