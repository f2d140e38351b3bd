// relserve-model: the engine from the command line (forward, tokenize, embed, create, bench, gemm, info,
// accuracy), Hub downloads (download) and checkpoint conversion (convert).
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/model/layers/packed_linear.h"
#include "server/util/process_tuning.h"

namespace {

using relserve::CliArgs;
using relserve::Flag;
using relserve::FlagTable;
using relserve::ModelCommand;

// `text` with `prefix` before every line.
std::string Indent(const std::string& text, const std::string& prefix) {
  std::string out = prefix;
  for (char c : text) {
    out += c;
    if (c == '\n') out += prefix;
  }
  return out;
}

// The names of the flags, "--a --b".
std::string FlagNames(const std::vector<const Flag<CliArgs>*>& flags) {
  std::string out;
  for (const Flag<CliArgs>* f : flags) out += (out.empty() ? "--" : " --") + f->name;
  return out;
}

// One line of a command's options for the top-level help: its own, then the shared groups'
// ("the model options" where it takes all of those).
std::string OptionSummary(const ModelCommand& c, const std::vector<Flag<CliArgs>>& engine) {
  std::vector<const Flag<CliArgs>*> own, shared;
  for (const Flag<CliArgs>& f : c.flags) {
    bool in_engine = false;
    for (const Flag<CliArgs>& e : engine) in_engine = in_engine || (e.name == f.name && e.section == f.section);
    (in_engine ? shared : own).push_back(&f);
  }
  std::string out = FlagNames(own);
  if (shared.size() == engine.size()) {
    out += out.empty() ? "the model options" : ", and the model options";
  } else if (!shared.empty()) {
    out += (out.empty() ? "" : " ") + FlagNames(shared);
  }
  return out;
}

// `words` in lines of at most `width` columns after `prefix`, the later lines indented as far.
std::string Wrap(const std::string& prefix, const std::string& words, size_t width) {
  std::string out = prefix, line;
  for (size_t at = 0; at < words.size();) {
    size_t end = words.find(' ', at);
    if (end == std::string::npos) end = words.size();
    const std::string word = words.substr(at, end - at);
    if (!line.empty() && prefix.size() + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(prefix.size(), ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    at = end + 1;
  }
  return out + line;
}

std::string Usage() {
  const std::vector<Flag<CliArgs>> engine = relserve::EngineFlags();
  std::string out = "usage: relserve-model COMMAND [options]\n\ncommands:\n";
  for (const ModelCommand& c : relserve::ModelCommands()) {
    out += "  " + c.name + std::string(c.name.size() < 10 ? 10 - c.name.size() : 1, ' ') +
           Indent(c.description, std::string(12, ' ')).substr(12) + "\n";
    out += Wrap(std::string(12, ' ') + "options: ", OptionSummary(c, engine), 100) + "\n";
  }
  const FlagTable<CliArgs> engine_table = relserve::CliFlagTable(engine);
  out += "\nThe model options, of the commands that load a model:\n" +
         engine_table.Help(CliArgs::Defaults(engine_table)).substr(std::string("model options:\n").size());
  out += "\n`relserve-model COMMAND --help` shows one command's options. Exit codes: 0 success, 1 the command\n"
         "failed, 2 bad usage (an unknown command or option, an option without its value or with a value\n"
         "of the wrong type).\n";
  return out;
}

// A command's --help: its description, then its options from its table of flags.
std::string CommandUsage(const ModelCommand& c, const FlagTable<CliArgs>& table) {
  return "usage: relserve-model " + c.name + " [options]\n\n" + Indent(c.description, "  ") + "\n\n" +
         table.Help(CliArgs::Defaults(table));
}

bool IsHelp(const std::string& arg) { return arg == "--help" || arg == "-h"; }

}  // namespace

int main(int argc, char** argv) {
  // The one reader of the process's environment; the libraries are handed it (or the RELSERVE_
  // variables, through the flag tables).
  const relserve::GetEnv process_environment = [](const char* name) -> const char* { return std::getenv(name); };
  relserve::TuneProcessForInference(argv, process_environment, relserve::Float32TakesEveryBatchByDefault());
  if (argc < 2 || IsHelp(argv[1]) || std::string(argv[1]) == "help") {
    std::cout << Usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  const ModelCommand* command = nullptr;
  for (const ModelCommand& c : relserve::ModelCommands()) {
    if (name == c.name) command = &c;
  }
  if (command == nullptr) {
    std::cerr << "relserve-model: unknown command \"" << name << "\"\n\n" << Usage();
    return 2;
  }
  const FlagTable<CliArgs> table = relserve::CliFlagTable(command->flags);
  bool help = false;
  absl::StatusOr<CliArgs> parsed = CliArgs::Parse(args, table, &help, relserve::EnvironmentWithPrefix("RELSERVE_"));
  if (help) {
    std::cout << CommandUsage(*command, table);
    return 0;
  }
  if (parsed.ok()) parsed->set_process_environment(process_environment);
  absl::Status status = parsed.status();
  try {
    if (parsed.ok()) status = command->run(*parsed);
  } catch (const std::exception& e) {
    // The commands return their failures as statuses; this is the last line against one that
    // escapes (a library's exception), which would otherwise abort without a word.
    status = absl::InternalError(e.what());
  }
  if (relserve::IsUsageError(status)) {
    std::cerr << "relserve-model " << name << ": " << status.message() << "\n(see relserve-model " << name
              << " --help)\n";
    return 2;
  }
  if (!status.ok()) {
    std::cerr << "relserve-model " << name << ": " << status.message() << " ["
              << absl::StatusCodeToString(status.code()) << "]\n";
    return 1;
  }
  return 0;
}
