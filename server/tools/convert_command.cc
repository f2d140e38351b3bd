// relserve-model convert: a model directory's weights as safetensors, whatever format they are in.
#include <iostream>

#include "nlohmann/json.hpp"
#include "server/tools/checkpoint_converter.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status RunConvert(const CliArgs& args) {
  ASSIGN_OR_RETURN(const std::string model, args.Required("model"));
  ASSIGN_OR_RETURN(const std::string out, args.Required("out"));
  ASSIGN_OR_RETURN(const ConversionReport report, ConvertModelDirectory(model, out, args.Bool("overwrite")));
  const nlohmann::json summary = {{"model", model},           {"out", out},
                                  {"written", report.written}, {"tensors", report.tensors},
                                  {"bytes", report.bytes},     {"copied", report.copied},
                                  {"skipped", report.skipped}};
  std::cout << summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  return absl::OkStatus();
}

}  // namespace

ModelCommand ConvertCommand() {
  return {"convert",
          "writes the model's weights (pytorch_model.bin, sharded or not, or safetensors) as model.safetensors\n"
          "in --out, with copies of its config, tokenizer and sentence-transformers files; a summary as JSON",
          {CliRequired("model", "DIR", "the model directory"),
           CliRequired("out", "DIR", "where the converted model is written (not inside --model)"),
           CliBool("overwrite", "write into an --out that exists and is not empty")},
          RunConvert};
}

}  // namespace relserve
