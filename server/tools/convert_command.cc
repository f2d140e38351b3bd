// relserve-model convert: a model directory's weights as safetensors, whatever format they are in.
#include <iostream>

#include "nlohmann/json.hpp"
#include "server/tools/checkpoint_converter.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::Status RunConvertCommand(const std::vector<std::string>& argv) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, {"model", "out"}, {"overwrite"}));
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

}  // namespace relserve
