// relserve-model as it is used from outside: the binary, its files and its exit codes.
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/checkpoint/model_checkpoint.h"
#include "server/safetensors/safetensors_file.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kBinary = RELSERVE_MODEL_BINARY;
const std::string kData = RELSERVE_TEST_DATA_DIR;

struct Result {
  int exit_code;
  std::string output;  // stdout and stderr
};

Result RunCli(const std::string& args, const std::string& stdin_text = "") {
  const fs::path input = fs::temp_directory_path() / ("relserve-cli-in-" + std::to_string(getpid()));
  FILE* f = std::fopen(input.c_str(), "wb");
  std::fwrite(stdin_text.data(), 1, stdin_text.size(), f);
  std::fclose(f);
  const std::string cmd = kBinary + " " + args + " < " + input.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  fs::remove(input);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The binary with `args` and no input: exit code, standard output and standard error apart.
struct SplitResult {
  int exit_code;
  std::string out, err;
};
// `env`: variables set for this run only ("NAME=VALUE ...").
SplitResult RunCliSplit(const std::string& args, const std::string& env = "") {
  const fs::path err = fs::temp_directory_path() / ("relserve-cli-err-" + std::to_string(getpid()));
  // OMP_WAIT_POLICY set: the binary need not re-execute itself (process_tuning.h), which halves
  // the time of each of these short runs.
  const std::string cmd =
      "OMP_WAIT_POLICY=PASSIVE " + env + " " + kBinary + " " + args + " < /dev/null 2> " + err.string();
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(err);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, ss.str()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("relserve-cli-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// forward writes every tensor transformers gives, matching the reference within 1e-4 (XLNet's
// inputs are padded on the left and name their padding_side).
TEST_F(CliTest, ForwardWritesTheReferenceTensors) {
  for (const std::string name : {"deberta_v3_cls", "t5_v1_0", "bert_absolute", "bert_relative_key", "mpnet_like",
                                  "xlnet_like"}) {
    const std::string ref = kData + "/reference/" + name;
    const std::string out = (dir_ / (name + ".safetensors")).string();
    Result r = RunCli("forward --model " + ref + " --inputs " + ref + "/inputs.json --output " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto got = SafetensorsFile::Open(out);
    ASSERT_TRUE(got.ok()) << got.status();
    auto want = SafetensorsFile::Open(ref + "/expected.safetensors");
    ASSERT_TRUE(want.ok());
    auto inputs = nlohmann::json::parse(std::ifstream(ref + "/inputs.json"));
    for (const TensorView& w : (*want)->tensors()) {
      const TensorView* g = (*got)->Find(w.name);
      ASSERT_NE(g, nullptr) << w.name;
      ASSERT_EQ(g->dtype, StDType::kF32);
      ASSERT_EQ(g->shape, w.shape) << w.name;
      std::vector<float> a(g->numel()), b(w.numel());
      std::memcpy(a.data(), g->data, g->nbytes);
      std::memcpy(b.data(), w.data, w.nbytes);
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        if (w.shape.size() == 3) {
          const size_t token = i / w.shape[2];
          if (inputs["attention_mask"][token / w.shape[1]][token % w.shape[1]] == 0) continue;
        }
        worst = std::max(worst, testing::AbsDiff(double(a[i]), b[i]));
      }
      EXPECT_LE(worst, 1e-4) << name << " " << w.name;
    }
  }
}

// create --family xlnet writes a directory the engine loads; forward takes left-padded rows.
TEST_F(CliTest, CreateXlnetLoadsAndRunsLeftPaddedRows) {
  const std::string model = (dir_ / "xlnet").string();
  SplitResult r = RunCliSplit("create --family xlnet --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab 64 "
                              "--labels 3 --init-std 0.2 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunCliSplit("info --model " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["model_type"], "xlnet");
  EXPECT_EQ(info["architecture"], "XLNetForSequenceClassification");
  EXPECT_EQ(info["labels"].size(), 3u);
  // The same sequence padded on the left and alone: the same logits.
  const std::string inputs = (dir_ / "inputs.json").string();
  std::ofstream(inputs) << R"({"input_ids": [[5, 5, 9, 10, 4, 3], [7, 8, 9, 10, 4, 3], [9, 10, 4, 3, 5, 5]],
    "attention_mask": [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]],
    "token_type_ids": [[3, 3, 0, 0, 0, 2], [0, 0, 1, 1, 1, 2], [0, 0, 0, 2, 3, 3]], "padding_side": "left"})";
  const std::string out = (dir_ / "out.safetensors").string();
  r = RunCliSplit("forward --model " + model + " --inputs " + inputs + " --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto got = SafetensorsFile::Open(out);
  ASSERT_TRUE(got.ok()) << got.status();
  const TensorView* logits = (*got)->Find("logits");
  ASSERT_NE(logits, nullptr);
  ASSERT_EQ(logits->shape, (std::vector<int64_t>{3, 3}));
  std::vector<float> v(9);
  std::memcpy(v.data(), logits->data, logits->nbytes);
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(v[k], v[6 + k], 1e-5) << "left vs right padding, label " << k;
  EXPECT_GT(std::fabs(v[0] - v[3]) + std::fabs(v[1] - v[4]) + std::fabs(v[2] - v[5]), 1e-3);  // another sequence
}

TEST_F(CliTest, ForwardRejectsBadInputsClearly) {
  const std::string ref = kData + "/reference/deberta_v3_like";
  const std::string bad = (dir_ / "bad.json").string();
  std::ofstream(bad) << R"({"input_ids": [[1, 2, 3], [1, 2]], "attention_mask": [[1, 1, 1], [1, 1]]})";
  Result r = RunCli("forward --model " + ref + " --inputs " + bad + " --output " + (dir_ / "o.safetensors").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("input_ids[1] has 2 values, expected 3"));
  std::ofstream(bad) << R"({"input_ids": [[1, 2000, 3]]})";
  r = RunCli("forward --model " + ref + " --inputs " + bad + " --output " + (dir_ / "o.safetensors").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("outside the vocabulary"));
  r = RunCli("forward --model " + ref + " --output x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--inputs is required"));
  r = RunCli("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
}

// Whether `usage` names `option` as a whole word ("--no-gemm", not "--no-gemm-at-all").
bool ListsOption(const std::string& usage, const std::string& option) {
  for (size_t at = usage.find(option); at != std::string::npos; at = usage.find(option, at + 1)) {
    const size_t end = at + option.size();
    if (end == usage.size() || !(std::isalnum(static_cast<unsigned char>(usage[end])) || usage[end] == '-')) return true;
  }
  return false;
}

// Every command prints its usage for --help (on standard output, exit 0, whatever else is on
// the line), and that usage lists every option the command accepts: the options an unknown
// one is refused with (exit 2, on standard error).
TEST(CliHelpTest, EveryCommandHasHelpListingItsOptions) {
  for (const std::string command :
       {"forward", "tokenize", "embed", "zero-shot", "create", "bench", "info", "accuracy", "download", "convert"}) {
    const SplitResult help = RunCliSplit(command + " --help");
    EXPECT_EQ(help.exit_code, 0) << command << ": " << help.err;
    EXPECT_EQ(help.out.rfind("usage: relserve-model " + command + " ", 0), 0u) << command << ": " << help.out;
    EXPECT_EQ(help.err, "") << command;
    const SplitResult bad = RunCliSplit(command + " --bogus-option 1");
    EXPECT_EQ(bad.exit_code, 2) << command << ": " << bad.err;
    EXPECT_EQ(bad.out, "") << command;
    EXPECT_THAT(bad.err, HasSubstr("relserve-model " + command + ": unknown flag --bogus-option")) << command;
    EXPECT_THAT(bad.err, HasSubstr("relserve-model " + command + " --help")) << command;
    const size_t known = bad.err.find("(known: ");
    ASSERT_NE(known, std::string::npos) << bad.err;
    const std::string list = bad.err.substr(known + 8, bad.err.find(')', known) - known - 8);
    size_t options = 0;
    for (size_t at = list.find("--"); at != std::string::npos; at = list.find("--", at + 2)) {
      const std::string option = list.substr(at, list.find_first_of(", ", at) - at);
      EXPECT_TRUE(ListsOption(help.out, option)) << command << " --help does not list " << option;
      ++options;
    }
    EXPECT_GT(options, 0u) << bad.err;
  }
  // -h too, and --help wins over the other options on the line.
  for (const std::string line : {"create -h", "embed --model /nonexistent --help --batch-size x"}) {
    const SplitResult r = RunCliSplit(line);
    EXPECT_EQ(r.exit_code, 0) << line << ": " << r.err;
    EXPECT_EQ(r.out.rfind("usage: relserve-model " + line.substr(0, line.find(' ')) + " ", 0), 0u) << line;
  }
  const SplitResult no_value = RunCliSplit("embed --model");
  EXPECT_EQ(no_value.exit_code, 2) << no_value.err;
  EXPECT_THAT(no_value.err, HasSubstr(": --model needs a value"));
  const SplitResult top = RunCliSplit("--help");
  EXPECT_EQ(top.exit_code, 0);
  for (const char* command :
       {"forward", "tokenize", "embed", "zero-shot", "create", "bench", "info", "accuracy", "download", "convert"}) {
    EXPECT_THAT(top.out, HasSubstr(std::string("\n  ") + command + " ")) << command;
  }
  EXPECT_EQ(RunCliSplit("frobnicate --help").exit_code, 2);
}

// The options a --help lists, by name ("--batch-size"), with the line of help below each: the
// lines "  --NAME [VALUE]" and the indented line after them.
std::map<std::string, std::string> HelpOptions(const std::string& help) {
  std::map<std::string, std::string> out;
  std::istringstream in(help);
  std::string line, name;
  while (std::getline(in, line)) {
    if (line.rfind("  --", 0) == 0) {
      name = line.substr(2, line.find(' ', 2) == std::string::npos ? std::string::npos : line.find(' ', 2) - 2);
      out[name] = "";
    } else if (!name.empty() && line.rfind("      ", 0) == 0) {
      out[name] += line.substr(6);
    } else {
      name.clear();
    }
  }
  return out;
}

// The options a command accepts: those its refusal of an unknown option lists.
std::set<std::string> KnownOptions(const std::string& command) {
  const SplitResult bad = RunCliSplit(command + " --bogus-option 1");
  const size_t known = bad.err.find("(known: ");
  std::set<std::string> out;
  if (known == std::string::npos) return out;
  const std::string list = bad.err.substr(known + 8, bad.err.find(')', known) - known - 8);
  for (size_t at = list.find("--"); at != std::string::npos; at = list.find("--", at + 2)) {
    out.insert(list.substr(at, list.find_first_of(", ", at) - at));
  }
  return out;
}

// Each command's --help is its table of options: exactly the options it accepts, each with its
// default or "(required)"; the shared model options under their own heading, the same for every
// command that loads a model; and the values the table types are checked as it says (a bad one
// is a usage error naming the option and the value).
TEST(CliHelpTest, HelpIsGeneratedFromTheTableOfOptions) {
  const std::vector<std::string> engine = {"--model", "--offline", "--dtype", "--device",
                                           "--threads", "--max-length", "--pooling"};
  std::string engine_section;
  for (const std::string command :
       {"forward", "tokenize", "embed", "zero-shot", "create", "bench", "info", "accuracy", "download", "convert"}) {
    const SplitResult help = RunCliSplit(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << command;
    const std::map<std::string, std::string> options = HelpOptions(help.out);
    std::set<std::string> listed;
    for (const auto& [name, text] : options) {
      listed.insert(name);
      EXPECT_TRUE(text.find("(default: ") != std::string::npos || text.find("(required)") != std::string::npos)
          << command << " " << name << ": " << text;
    }
    EXPECT_EQ(listed, KnownOptions(command)) << command << ": " << help.out;
    if (command != "tokenize" && command != "download" && command != "convert" && command != "create") {
      const size_t at = help.out.find("\nmodel options:\n");
      ASSERT_NE(at, std::string::npos) << command << ": " << help.out;
      for (const std::string& option : engine) {
        EXPECT_TRUE(ListsOption(help.out.substr(at), option)) << command << " " << option;
      }
      if (engine_section.empty()) engine_section = help.out.substr(at);
      EXPECT_EQ(help.out.substr(at), engine_section) << command;
    }
  }
  const std::map<std::string, std::string> embed = HelpOptions(RunCliSplit("embed --help").out);
  EXPECT_THAT(embed.at("--batch-size"), HasSubstr("(default: 32)"));
  EXPECT_THAT(embed.at("--dtype"), HasSubstr("(default: float32)"));
  EXPECT_THAT(embed.at("--device"), HasSubstr("(default: cpu)"));
  EXPECT_THAT(embed.at("--threads"), HasSubstr("(default: all cores)"));
  EXPECT_THAT(embed.at("--model"), HasSubstr("(required)"));
  EXPECT_THAT(RunCliSplit("embed --help").out, HasSubstr("  --dtype float32|bfloat16|float16|int8\n"));
  const std::map<std::string, std::string> bench = HelpOptions(RunCliSplit("bench --help").out);
  EXPECT_THAT(bench.at("--batch"), HasSubstr("(default: 8)"));
  EXPECT_THAT(bench.at("--seq"), HasSubstr("(default: 128)"));
  EXPECT_THAT(bench.at("--iters"), HasSubstr("(default: 10)"));
  EXPECT_THAT(bench.at("--warmup"), HasSubstr("(default: 2)"));
  EXPECT_THAT(bench.at("--gemm-size"), HasSubstr("(default: 2048)"));
  EXPECT_THAT(bench.at("--no-gemm"), HasSubstr("(default: false)"));
  EXPECT_THAT(bench.at("--output"), HasSubstr("(default: pooled)"));
  const std::map<std::string, std::string> create = HelpOptions(RunCliSplit("create --help").out);
  EXPECT_THAT(create.at("--seed"), HasSubstr("(default: 1)"));
  EXPECT_THAT(create.at("--dtype"), HasSubstr("(default: float32)"));
  EXPECT_EQ(create.count("--position-embedding-type"), 1u);  // a family's own option

  // The top-level help lists the model options with their defaults, as a command's does.
  const std::string top = RunCliSplit("--help").out;
  EXPECT_THAT(top, HasSubstr(engine_section.substr(std::string("\nmodel options:\n").size())));
  EXPECT_THAT(top, HasSubstr("--batch --seq --iters --warmup --gemm-size --no-gemm --output, and the model\n"));

  // Typed values: a usage error (exit 2) naming the option and the value, before any model is read.
  struct Case {
    std::string line, message;
  };
  for (const Case& c : {Case{"bench --model /nonexistent --batch 0", "--batch: \"0\" is not an integer >= 1"},
                        Case{"embed --model /nonexistent --batch-size x", "--batch-size: \"x\" is not an integer >= 1"},
                        Case{"accuracy --model /nonexistent --seq -3", "--seq: \"-3\" is not an integer >= 1"},
                        Case{"info --model /nonexistent --max-length -1",
                             "--max-length: \"-1\" is not an integer >= 0"},
                        Case{"info --model /nonexistent --threads 0", "--threads: \"0\" is not an integer >= 1"},
                        Case{"info --model /nonexistent --dtype float64",
                             "--dtype: \"float64\" is not one of float32, bfloat16, float16, int8"},
                        Case{"create --family bert --out /nonexistent/x --dtype int8",
                             "--dtype: \"int8\" is not one of float32, bfloat16, float16"},
                        Case{"forward --model /nonexistent --pooled maybe",
                             "--pooled: \"maybe\" is not true or false"}}) {
    const SplitResult r = RunCliSplit(c.line);
    EXPECT_EQ(r.exit_code, 2) << c.line << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.line;
    EXPECT_THAT(r.err, HasSubstr("(see relserve-model ")) << c.line;
  }
  // --device is free-form: the engine, not the table, judges it (a missing model fails first, exit 1).
  const SplitResult device = RunCliSplit("info --model /nonexistent --device tpu:3");
  EXPECT_EQ(device.exit_code, 1) << device.err;
  EXPECT_THAT(device.err, Not(HasSubstr("--device")));
}

// create -> tokenize -> embed on a model with the reference tokenizer.
TEST_F(CliTest, CreateTokenizeEmbed) {
  const std::string model = (dir_ / "model").string();
  Result r = RunCli("create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab-file " + kData +
                 "/reference/tokenizer/spm.model --sentence-transformers --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCli("tokenize --model " + model, "Hello world\nquery\tpassage\n\xC3\x28\n");
  EXPECT_EQ(r.exit_code, 1);  // one line failed
  std::istringstream lines(r.output);
  std::string line;
  std::getline(lines, line);
  auto first = nlohmann::json::parse(line);
  // cases.json: "Hello world" -> 5 998 11 28 339 713, inside [CLS] ... [SEP].
  EXPECT_EQ(first["input_ids"], nlohmann::json({1, 5, 998, 11, 28, 339, 713, 2}));
  std::getline(lines, line);
  auto pair = nlohmann::json::parse(line);
  EXPECT_EQ(pair["token_type_ids"].back(), 1);
  std::getline(lines, line);
  EXPECT_THAT(line, HasSubstr("invalid UTF-8"));

  r = RunCli("embed --model " + model, "Hello world\na longer sentence about relative attention\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream embeddings(r.output);
  int count = 0;
  while (std::getline(embeddings, line)) {
    auto e = nlohmann::json::parse(line)["embedding"];
    ASSERT_EQ(e.size(), 32u);
    double norm = 0;
    for (double v : e) norm += v * v;
    EXPECT_NEAR(norm, 1.0, 1e-5);  // the Normalize module
    ++count;
  }
  EXPECT_EQ(count, 2);

  r = RunCli("bench --model " + model + " --batch 2 --seq 16 --iters 1 --warmup 0 --gemm-size 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto bench = nlohmann::json::parse(r.output);
  EXPECT_GT(bench["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(bench["efficiency"].get<double>(), 0);
  // What ran the projections, as the engine chose it; the flags change it.
  const std::string default_projections = bench["projections"].get<std::string>();
  {
    // The packed GEMM's kernel as the CPU has its instructions (as Linux names them), else OpenBLAS.
    std::ifstream cpuinfo("/proc/cpuinfo");
    const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
    auto has = [&](const std::string& f) { return flags.find(" " + f + " ") != std::string::npos; };
    EXPECT_EQ(default_projections, has("avx512f")                 ? "relserve-avx512"
                                   : has("avx2") && has("fma") ? "relserve-avx2"
                                                               : "libtorch");
  }
  r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --float32-gemm blas");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["projections"], "libtorch");
  EXPECT_EQ(bench["output"], "pooled");
  {
    // --output times a head's output: a token classifier's logits (packed with the encoder where
    // it is); a model without the head says so, and an unknown output is a usage error.
    const std::string ner = (dir_ / "ner").string();
    r = RunCli("create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab 64 --config "
               "'{\"architectures\": [\"DebertaV2ForTokenClassification\"], \"id2label\": {\"0\": \"O\", "
               "\"1\": \"B-PER\"}}' --out " + ner);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = RunCli("bench --model " + ner + " --batch 2 --seq 8 --iters 1 --warmup 0 --no-gemm --output token-logits");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json tokens = nlohmann::json::parse(r.output);
    EXPECT_EQ(tokens["output"], "token-logits");
    if (default_projections == "libtorch") {
      EXPECT_FALSE(tokens.contains("packed_float32_heads"));
    } else {
      EXPECT_EQ(tokens["packed_float32_heads"], 1);
    }
    r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --output token-logits");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("no token-classification head"), std::string::npos) << r.output;
    r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --output hidden");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--output: \"hidden\" is not one of pooled, logits, token-logits, multi-vector, sparse"),
              std::string::npos)
        << r.output;
    // A classifier's logits: every batch's last layer on the first token alone (first-token
    // forwards); pooled (mean) runs every token; a backbone has no logits.
    const std::string classifier = (dir_ / "classifier").string();
    r = RunCli("create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab 64 --labels 3 --out " +
               classifier);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = RunCli("bench --model " + classifier + " --batch 2 --seq 8 --iters 2 --warmup 1 --no-gemm --output logits");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(r.output)["first_token_forwards"], 3) << r.output;
    r = RunCli("bench --model " + classifier + " --batch 2 --seq 8 --iters 2 --warmup 1 --no-gemm");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(nlohmann::json::parse(r.output)["first_token_forwards"], 0) << r.output;
    r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --output logits");
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("no classification head"), std::string::npos) << r.output;
  }
  {
    // Attention's products (--float32-attention): in the tiles where the packed GEMM runs (every
    // layer of a 2 x 16 batch by default), in OpenBLAS with OpenBLAS's projections or when asked,
    // in the tiles when asked, whatever runs the projections.
    auto attention = [&](const std::string& flags) {
      Result run = RunCli("bench --model " + model + " --batch 2 --seq 16 --iters 1 --warmup 0 --no-gemm " + flags);
      EXPECT_EQ(run.exit_code, 0) << run.output;
      auto calls = nlohmann::json::parse(run.output)["attention_calls"];
      EXPECT_GT(calls["cpu"].get<int64_t>(), 0) << flags;
      return std::make_pair(calls["cpu"].get<int64_t>(), calls["cpu_tiled"].get<int64_t>());
    };
    const bool packed = default_projections != "libtorch";
    auto [cpu, tiled] = attention("");
    EXPECT_EQ(tiled, packed ? cpu : 0);
    std::tie(cpu, tiled) = attention("--float32-gemm blas");
    EXPECT_EQ(tiled, 0);
    std::tie(cpu, tiled) = attention("--float32-attention blas");
    EXPECT_EQ(tiled, 0);
    std::tie(cpu, tiled) = attention("--float32-gemm blas --float32-attention tiles");
    EXPECT_EQ(tiled, packed ? cpu : 0);
    // Past 192 tokens (13 x 16): by default the tiles wherever the packed GEMM takes every batch
    // (tiled_attention.h, kAuto): AVX2's tiles, and AVX-512's on an AMD CPU; OpenBLAS's batched
    // products where AVX-512's tiles stop at 192 tokens (an Intel CPU).
    Result longer = RunCli("bench --model " + model + " --batch 13 --seq 16 --iters 1 --warmup 0 --no-gemm");
    ASSERT_EQ(longer.exit_code, 0) << longer.output;
    auto longer_calls = nlohmann::json::parse(longer.output)["attention_calls"];
    // The packed GEMM's bound: 192 tokens for AVX-512's tiles on Intel, every batch for AVX2's and
    // for AVX-512's on AMD (packed_linear.h).
    std::ifstream vendor_info("/proc/cpuinfo");
    const std::string vendor_text((std::istreambuf_iterator<char>(vendor_info)), std::istreambuf_iterator<char>());
    const bool amd = vendor_text.find("AuthenticAMD") != std::string::npos;
    const nlohmann::json longer_result = nlohmann::json::parse(longer.output);
    const bool every = default_projections == "relserve-avx2" || (default_projections == "relserve-avx512" && amd);
    if (every) {
      EXPECT_EQ(longer_result["packed_float32_max_tokens"], "every");
    } else if (default_projections == "relserve-avx512") {
      EXPECT_EQ(longer_result["packed_float32_max_tokens"], 192);
    } else {
      EXPECT_FALSE(longer_result.contains("packed_float32_max_tokens"));
    }
    EXPECT_GT(longer_calls["cpu"].get<int64_t>(), 0);
    EXPECT_EQ(longer_calls["cpu_tiled"].get<int64_t>(), every ? longer_calls["cpu"].get<int64_t>() : 0)
        << default_projections;
    r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --float32-attention some");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("float32-attention"), std::string::npos) << r.output;
  }
  {
    // bfloat16 attention's products (--bfloat16-attention) on a CPU with AVX512-BF16: in relserve's
    // registers for batches of at most 192 tokens by default (2 x 16), in oneDNN's batched products
    // past them (13 x 16) or when asked, in the registers when asked; oneDNN's always elsewhere. The
    // timed batches' attention time is reported beside their time.
    std::ifstream cpuinfo("/proc/cpuinfo");
    const std::string cpu_flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
    const bool bf16 = cpu_flags.find(" avx512_bf16") != std::string::npos;
    auto attention = [&](const std::string& shape, const std::string& flags) {
      Result run = RunCli("bench --model " + model + " " + shape + " --iters 2 --warmup 0 --no-gemm --dtype bfloat16 " + flags);
      EXPECT_EQ(run.exit_code, 0) << run.output;
      const size_t last = run.output.find_last_of('\n', run.output.size() - 2);
      const nlohmann::json result = nlohmann::json::parse(last == std::string::npos ? run.output : run.output.substr(last + 1));
      auto calls = result["attention_calls"];
      EXPECT_GT(calls["cpu"].get<int64_t>(), 0) << flags;
      EXPECT_GT(result["attention_ms_per_batch"].get<double>(), 0.0) << flags;
      EXPECT_LT(result["attention_ms_per_batch"].get<double>(), result["ms_per_batch"].get<double>()) << flags;
      return std::make_pair(calls["cpu"].get<int64_t>(), calls["cpu_tiled"].get<int64_t>());
    };
    auto [cpu, tiled] = attention("--batch 2 --seq 16", "");
    EXPECT_EQ(tiled, bf16 ? cpu : 0);
    std::tie(cpu, tiled) = attention("--batch 2 --seq 16", "--bfloat16-attention onednn");
    EXPECT_EQ(tiled, 0);
    std::tie(cpu, tiled) = attention("--batch 13 --seq 16", "");
    EXPECT_EQ(tiled, 0);
    std::tie(cpu, tiled) = attention("--batch 13 --seq 16", "--bfloat16-attention tiles");
    EXPECT_EQ(tiled, bf16 ? cpu : 0);
    Result bad = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --no-gemm --bfloat16-attention amx");
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find("bfloat16-attention"), std::string::npos) << bad.output;
  }
  r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --dtype bfloat16 --bfloat16-gemm onednn");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  {
    // On a CPU without AVX512-BF16 the load warns (on stderr, before the result's line) that
    // bfloat16's products are converted in software.
    std::ifstream cpuinfo("/proc/cpuinfo");
    const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
    const bool bf16 = flags.find(" avx512_bf16") != std::string::npos;
    EXPECT_EQ(r.output.find("without AVX512-BF16") != std::string::npos, !bf16) << r.output;
    const size_t last = r.output.find_last_of('\n', r.output.size() - 2);
    const std::string result = last == std::string::npos ? r.output : r.output.substr(last + 1);
    EXPECT_EQ(nlohmann::json::parse(result)["projections"], "libtorch");
  }
  r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --dtype int8 --int8-gemm onednn");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["projections"], "onednn-int8");
  r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --dtype int8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  {
    // relserve's int8 GEMM in AMX tiles where the CPU has AMX-INT8, in VNNI registers where it has
    // AVX-512 VNNI, in AVX2 registers where it has AVX2 and FMA (as Linux names them), oneDNN's
    // elsewhere.
    std::ifstream cpuinfo("/proc/cpuinfo");
    const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
    const bool amx_int8 = flags.find(" amx_int8") != std::string::npos;
    const bool vnni = flags.find(" avx512_vnni") != std::string::npos;
    const bool avx2 = flags.find(" avx2") != std::string::npos && flags.find(" fma") != std::string::npos;
    EXPECT_EQ(nlohmann::json::parse(r.output)["projections"], amx_int8 ? "relserve-amx-int8"
                                                              : vnni   ? "relserve-vnni-int8"
                                                              : avx2   ? "relserve-avx2-int8"
                                                                       : "onednn-int8");
  }
  r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --int8-gemm vnni");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--int8-gemm: \"vnni\" is not one of auto, onednn"), std::string::npos) << r.output;
  r = RunCli("bench --model " + model + " --batch 1 --seq 8 --iters 1 --warmup 0 --no-gemm --bfloat16-gemm amx");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--bfloat16-gemm: \"amx\" is not one of auto, onednn"), std::string::npos) << r.output;
}

// gemm: relserve's kernel and the library's on the same projections, per row count, where this
// CPU runs the kernel (as Linux names its features), and a clear refusal where it does not.
TEST_F(CliTest, GemmTimesTheOwnKernelAgainstTheLibrarysOnTheSameWeights) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  auto has = [&](const std::string& f) { return flags.find(" " + f) != std::string::npos; };
  struct Case {
    std::string dtype, own, their_gemm, refusal;
    bool runs;
    double tolerance;  // the two sides' largest difference, relative to the largest value
  };
  const std::vector<Case> cases = {
      {"float32", has("avx512f") ? "relserve-avx512" : "relserve-avx2", "blas", "AVX2 and FMA",
       has("avx512f") || (has("avx2") && has("fma")), 1e-5},
      {"bfloat16", has("amx_bf16") ? "relserve-amx" : "relserve-avx512-bf16", "onednn", "AVX512-BF16",
       has("amx_bf16") || (has("avx512_bf16") && has("avx512bw") && has("avx512vl")), 2e-2},
      {"int8",
       has("amx_int8")      ? "relserve-amx-int8"
       : has("avx512_vnni") ? "relserve-vnni-int8"
                            : "relserve-avx2-int8",
       "onednn-int8", "AVX2", has("amx_int8") || has("avx512_vnni") || (has("avx2") && has("fma")), 5e-2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dtype);
    const Result r = RunCli("gemm --dtype " + c.dtype +
                            " --rows 24,40 --hidden 64 --intermediate 96 --layers 2 --pairs 3 --threads 1");
    if (!c.runs) {
      EXPECT_EQ(r.exit_code, 1) << r.output;
      EXPECT_NE(r.output.find("--dtype " + c.dtype + ": "), std::string::npos) << r.output;
      EXPECT_NE(r.output.find(c.refusal), std::string::npos) << r.output;
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::istringstream lines(r.output);
    std::vector<nlohmann::json> rows;
    for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
    ASSERT_EQ(rows.size(), 2u) << r.output;
    for (size_t i = 0; i < rows.size(); ++i) {
      const nlohmann::json& row = rows[i];
      EXPECT_EQ(row["rows"], i == 0 ? 24 : 40);
      EXPECT_EQ(row["dtype"], c.dtype);
      EXPECT_EQ(row["own_gemm"], c.own);
      EXPECT_EQ(row["library_gemm"], c.their_gemm);
      EXPECT_EQ(row["pairs"], 3);
      EXPECT_EQ(row["threads"], 1);
      EXPECT_GT(row["own_gflops_median"].get<double>(), 0);
      EXPECT_GT(row["library_gflops_median"].get<double>(), 0);
      EXPECT_LE(row["own_over_library_q1"].get<double>(), row["own_over_library_median"].get<double>());
      EXPECT_LE(row["own_over_library_median"].get<double>(), row["own_over_library_q3"].get<double>());
      EXPECT_LT(row["max_relative_difference"].get<double>(), c.tolerance);
      if (c.dtype == "int8") {
        // auto: 8 bits where the kernel multiplies them as fast (AMX, VNNI), 7 on AVX2 alone;
        // oneDNN's 8 only with VNNI.
        EXPECT_EQ(row["own_int8_weight_bits"], has("amx_int8") || has("avx512_vnni") ? 8 : 7);
        EXPECT_EQ(row["library_int8_weight_bits"], has("avx512_vnni") || has("avx_vnni") ? 8 : 7);
      } else {
        EXPECT_FALSE(row.contains("own_int8_weight_bits"));
      }
    }
    if (c.dtype == "int8") {
      // The own side's bits as asked, whatever the kernel.
      for (int bits : {7, 8}) {
        const Result b = RunCli("gemm --dtype int8 --int8-weight-bits " + std::to_string(bits) +
                                " --rows 24 --hidden 64 --intermediate 96 --layers 1 --pairs 1 --threads 1");
        ASSERT_EQ(b.exit_code, 0) << b.output;
        const nlohmann::json row = nlohmann::json::parse(b.output.substr(0, b.output.find('\n')));
        EXPECT_EQ(row["own_int8_weight_bits"], bits);
        EXPECT_LT(row["max_relative_difference"].get<double>(), c.tolerance);
      }
    }
  }
  Result r = RunCli("gemm --dtype int8 --int8-weight-bits 9");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--int8-weight-bits: \"9\" is not one of auto, 7, 8"), std::string::npos) << r.output;
  r = RunCli("gemm --rows 128,x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--rows: \"x\" is not an integer >= 1"), std::string::npos) << r.output;
  r = RunCli("gemm --dtype float16");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--dtype: \"float16\" is not one of float32, bfloat16, int8"), std::string::npos) << r.output;
}

// zero-shot: the pipeline's scores over the logits `forward` gives for each (text, hypothesis)
// pair that `tokenize` makes; embed --whole-input and --sparse through the serving layer.
TEST_F(CliTest, ZeroShotAndEmbedThroughTheServingLayer) {
  const std::string model = (dir_ / "nli").string();
  Result r = RunCli("create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 --labels 3 "
                    "--vocab-file " + kData + "/reference/tokenizer/spm.model --out " + model +
                    " --config '{\"id2label\": {\"0\": \"contradiction\", \"1\": \"neutral\", \"2\": "
                    "\"entailment\"}, \"label2id\": {\"contradiction\": 0, \"entailment\": 2, \"neutral\": 1}}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string text = "the council approved the budget";
  const std::vector<std::string> labels = {"politics", "sports", "cooking"};
  r = RunCli("zero-shot --model " + model + " --labels politics,sports,cooking", text + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json got = nlohmann::json::parse(r.output.substr(0, r.output.find('\n')));
  EXPECT_EQ(got["sequence"], text);

  // The pairs' ids, padded into one batch for forward.
  std::string pairs;
  for (const std::string& l : labels) pairs += text + "\tThis example is " + l + ".\n";
  r = RunCli("tokenize --model " + model + " --padding longest", pairs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json batch{{"input_ids", nlohmann::json::array()}, {"attention_mask", nlohmann::json::array()}};
  std::istringstream rows(r.output);
  for (std::string line; std::getline(rows, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    batch["input_ids"].push_back(row["input_ids"]);
    batch["attention_mask"].push_back(row["attention_mask"]);
  }
  const std::string inputs = (dir_ / "pairs.json").string(), out = (dir_ / "pairs.safetensors").string();
  std::ofstream(inputs) << batch.dump();
  r = RunCli("forward --model " + model + " --inputs " + inputs + " --output " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto file = SafetensorsFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorView* logits = (*file)->Find("logits");
  ASSERT_NE(logits, nullptr);
  std::vector<float> l(logits->numel());
  std::memcpy(l.data(), logits->data, logits->nbytes);
  double z = 0;
  for (int k = 0; k < 3; ++k) z += std::exp(double(l[k * 3 + 2]));
  ASSERT_EQ(got["labels"].size(), 3u);
  for (size_t j = 0; j < 3; ++j) {
    const int k = static_cast<int>(std::find(labels.begin(), labels.end(), got["labels"][j].get<std::string>()) -
                                   labels.begin());
    ASSERT_LT(k, 3);
    EXPECT_NEAR(got["scores"][j].get<double>(), std::exp(double(l[k * 3 + 2])) / z, 1e-5) << labels[k];
  }

  // A text of several windows, embedded whole.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i % 5) + " ";
  r = RunCli("embed --model " + model + " --max-length 64 --whole-input", long_text + "\nshort\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  std::getline(lines, line);
  const nlohmann::json whole = nlohmann::json::parse(line);
  EXPECT_GT(whole["windows"].get<int>(), 1);
  EXPECT_EQ(whole["embedding"].size(), 32u);
  std::getline(lines, line);
  EXPECT_EQ(nlohmann::json::parse(line)["windows"], 1);
  // Without --whole-input the long text is cut, as embed does by default.
  r = RunCli("embed --model " + model + " --max-length 64", long_text + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(nlohmann::json::parse(r.output)["embedding"], whole["embedding"]);
  // Sparse vectors need a sparse head.
  r = RunCli("embed --model " + model + " --sparse", "hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("has no sparse head"));
  // And zero-shot an entailment label.
  r = RunCli("zero-shot --model " + kData + "/reference/deberta_v3_cls --labels a,b", "hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("no entailment label"));
}

// embed as SentenceTransformer.encode: max_seq_length cuts (or, with --no-truncate, refuses),
// do_lower_case lowers, --prompt-name (else default_prompt_name) puts the prompt first.
TEST_F(CliTest, EmbedFollowsTheSentenceTransformersFiles) {
  const std::string model = (dir_ / "st").string();
  Result r = RunCli("create --family deberta-v3 --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab-file " + kData +
                    "/reference/tokenizer/spm.model --sentence-transformers --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto embed = [&](const std::string& flags, const std::string& text) {
    Result e = RunCli("embed --model " + model + " " + flags, text + "\n");
    EXPECT_EQ(e.exit_code, 0) << flags << ": " << e.output;
    return e.exit_code == 0 ? nlohmann::json::parse(e.output)["embedding"] : nlohmann::json();
  };
  const std::string long_text = "a sentence about relative attention that goes on and on and on for a while";
  const nlohmann::json whole = embed("", long_text);
  const nlohmann::json plain_lower = embed("", "hello world");
  const nlohmann::json query_by_hand = embed("", "query: hello world");
  std::ofstream(model + "/sentence_bert_config.json") << R"({"max_seq_length": 16, "do_lower_case": true})";
  std::ofstream(model + "/config_sentence_transformers.json")
      << R"({"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query"})";
  // The default prompt, lower-cased text.
  EXPECT_EQ(embed("", "Hello WORLD"), query_by_hand);
  EXPECT_EQ(embed("--prompt-name document", "Hello WORLD"), plain_lower);
  EXPECT_NE(embed("--prompt-name document", long_text), whole);  // cut at 16 tokens
  r = RunCli("embed --model " + model + " --prompt-name x", "hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("prompt_name \"x\" is not one of the model's prompts: document, query"));
  r = RunCli("embed --model " + model + " --no-truncate --prompt-name document", long_text + "\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("more than max_length 16"));
  r = RunCli("embed --model " + model + " --max-length 32", "hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("max_length 32 exceeds the model's max_seq_length 16"));
  const SplitResult info = RunCliSplit("info --model " + model);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const nlohmann::json i = nlohmann::json::parse(info.out);
  EXPECT_EQ(i["max_length"], 16);
  EXPECT_EQ(i["default_prompt_name"], "query");
}

// create --family xlm-roberta with XLM-R's SentencePiece model: fairseq's vocabulary (two more
// than the pieces), a directory relserve reads text for, and the same ids from
// tokenizer.json alone.
TEST_F(CliTest, CreateXlmRobertaWithItsSentencePieceModel) {
  const std::string fixture = kData + "/tokenizer_json/xlm_roberta";
  const std::string model = (dir_ / "xlmr").string();
  Result r = RunCli("create --family xlm-roberta --hidden 32 --layers 1 --heads 2 --intermediate 64 --vocab-file " +
                    fixture + "/sentencepiece.bpe.model --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  SplitResult info = RunCliSplit("info --model " + model);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const nlohmann::json i = nlohmann::json::parse(info.out);
  EXPECT_EQ(i["vocab_size"], 1002);
  EXPECT_EQ(i["tokenizer_file"], "sentencepiece.bpe.model");

  r = RunCli("tokenize --model " + model, "Hello world\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json slow = nlohmann::json::parse(r.output);
  EXPECT_EQ(slow["input_ids"].front(), 0);
  EXPECT_EQ(slow["input_ids"].back(), 2);
  r = RunCli("embed --model " + model, "Hello world\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["embedding"].size(), 32u);

  fs::remove(fs::path(model) / "sentencepiece.bpe.model");
  fs::copy_file(fixture + "/tokenizer.json", fs::path(model) / "tokenizer.json");
  r = RunCli("tokenize --model " + model, "Hello world\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["input_ids"], slow["input_ids"]);

  // A tokenizer class relserve has none of: the model still loads and takes token ids, and
  // says why it has no tokenizer.
  std::ofstream(fs::path(model) / "tokenizer_config.json") << R"({"tokenizer_class": "ByT5Tokenizer"})";
  info = RunCliSplit("info --model " + model);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const nlohmann::json without = nlohmann::json::parse(info.out);
  EXPECT_EQ(without["has_tokenizer"], false);
  EXPECT_THAT(without["no_tokenizer_reason"].get<std::string>(), HasSubstr("\"ByT5Tokenizer\""));
  r = RunCli("embed --model " + model, "Hello world\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("\"ByT5Tokenizer\", which relserve has no tokenizer for"));
}

// The SentencePiece module comes from --sentencepiece-module, or from RELSERVE_SENTENCEPIECE_MODULE
// through the flag table, for every command that reads a SentencePiece vocabulary (create,
// tokenize, the engine's commands); a module named there is the only one tried.
TEST_F(CliTest, TheSentencePieceModuleComesFromItsFlagOrItsVariable) {
  const std::string spm = kData + "/reference/tokenizer/spm.model";
  const std::string model = (dir_ / "deberta").string();
  const std::string missing = (dir_ / "no_such_module.so").string();
  const std::string create =
      "create --family deberta-v3 --hidden 32 --layers 1 --heads 2 --intermediate 64 --vocab-file " + spm + " --out " +
      model;
  SplitResult r = RunCliSplit(create + " --sentencepiece-module " + missing);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr(missing));
  ASSERT_EQ(RunCliSplit(create).exit_code, 0);
  for (const std::string command : {"tokenize", "info"}) {
    r = RunCliSplit(command + " --model " + model + " --sentencepiece-module " + missing);
    EXPECT_EQ(r.exit_code, 1) << command << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(missing)) << command;
    EXPECT_THAT(r.err, HasSubstr("--sentencepiece-module")) << command;
    r = RunCliSplit(command + " --model " + model, "RELSERVE_SENTENCEPIECE_MODULE=" + missing);
    EXPECT_EQ(r.exit_code, 1) << command << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(missing)) << command;
    EXPECT_THAT(r.err, HasSubstr("RELSERVE_SENTENCEPIECE_MODULE")) << command;
  }
  // Without either, the module beside the binary (the build tree's) reads the vocabulary.
  r = RunCliSplit("info --model " + model);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tokenizer_file"], "spm.model");
}

// The BERT family from the command line: create with a family option, info, forward with
// token_type_ids and attention_mask (a padded row equals the row alone), bench, and text
// commands refused clearly without a tokenizer.
TEST_F(CliTest, BertFamilyCreateInfoForwardBench) {
  const std::string model = (dir_ / "roberta").string();
  Result r = RunCli("create --family roberta --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab 100 --labels 2 "
                    "--position-embedding-type relative_key_query --init-std 0.2 --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto config = nlohmann::json::parse(std::ifstream(model + "/config.json"));
  EXPECT_EQ(config["position_embedding_type"], "relative_key_query");
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"RobertaForSequenceClassification"}));

  r = RunCli("info --model " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto info = nlohmann::json::parse(r.output);
  EXPECT_EQ(info["model_type"], "roberta");
  EXPECT_EQ(info["max_length"], 514);  // relative positions: the distance table's M, no padding offset

  const std::string padded = (dir_ / "padded.json").string(), alone = (dir_ / "alone.json").string();
  std::ofstream(padded) << R"({"input_ids": [[0, 5, 6, 7, 2], [0, 8, 2, 1, 1]],
                               "attention_mask": [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]],
                               "token_type_ids": [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]})";
  std::ofstream(alone) << R"({"input_ids": [[0, 8, 2]], "attention_mask": [[1, 1, 1]]})";
  const std::string out_padded = (dir_ / "padded.safetensors").string(), out_alone = (dir_ / "alone.safetensors").string();
  r = RunCli("forward --model " + model + " --inputs " + padded + " --output " + out_padded);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCli("forward --model " + model + " --inputs " + alone + " --output " + out_alone);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto a = SafetensorsFile::Open(out_padded);
  auto b = SafetensorsFile::Open(out_alone);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const char* name : {"logits", "last_hidden_state", "hidden_state_0", "hidden_state_2"}) {
    const TensorView* x = (*a)->Find(name);
    const TensorView* y = (*b)->Find(name);
    ASSERT_TRUE(x != nullptr && y != nullptr) << name;
    const int64_t per_row = y->numel();  // row 1 of the padded batch against the row alone
    const int64_t stride = x->numel() / 2;
    std::vector<float> got(x->numel()), want(per_row);
    std::memcpy(got.data(), x->data, x->nbytes);
    std::memcpy(want.data(), y->data, y->nbytes);
    const int64_t inner = std::string(name) == "logits" ? per_row : per_row / 3;  // values per token
    for (int64_t i = 0; i < per_row; ++i) {
      const int64_t t = i / inner, k = i % inner;
      const int64_t at = std::string(name) == "logits" ? stride + i : stride + t * (x->shape[2]) + k;
      EXPECT_NEAR(got[at], want[i], 1e-4) << name << "[" << i << "]";
    }
  }
  // A token type the table (type_vocab_size 1) lacks names the position.
  std::ofstream(padded, std::ios::trunc) << R"({"input_ids": [[0, 5, 2]], "token_type_ids": [[0, 1, 0]]})";
  r = RunCli("forward --model " + model + " --inputs " + padded + " --output " + out_padded);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("token_type_ids[0][1] = 1 is outside [0, 1)"));

  r = RunCli("bench --model " + model + " --batch 2 --seq 16 --iters 1 --warmup 0 --gemm-size 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(nlohmann::json::parse(r.output)["gflops_per_token"].get<double>(), 0);

  r = RunCli("embed --model " + model, "hello\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("takes token ids only"));

  // Family options belong to their families, and their values are checked.
  r = RunCli("create --family t5 --position-embedding-type relative_key --out " + (dir_ / "t5").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--position-embedding-type is not an option of family t5"));
  r = RunCli("create --family electra --position-embedding-type relative --out " + (dir_ / "e").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("position_embedding_type"));
}

// An MPNet directory made by create: info, and forward with logits; an input past the positions
// (max_position_embeddings 514 - padding_idx 1 - 1 = 512 tokens) is refused naming the key.
TEST_F(CliTest, CreateMpnetInfoForward) {
  const std::string model = (dir_ / "mpnet").string();
  Result r = RunCli("create --family mpnet --hidden 32 --layers 2 --heads 4 --intermediate 64 --vocab 100 --labels 2 "
                    "--sentence-transformers --out " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = RunCli("info --model " + model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto info = nlohmann::json::parse(r.output);
  EXPECT_EQ(info["model_type"], "mpnet");
  EXPECT_EQ(info["architecture"], "MPNetForSequenceClassification");
  EXPECT_EQ(info["max_length"], 512);
  EXPECT_EQ(info["labels"].size(), 2u);
  EXPECT_EQ(info["normalizes"], true);

  const std::string inputs = (dir_ / "inputs.json").string();
  const std::string out = (dir_ / "out.safetensors").string();
  std::ofstream(inputs) << R"({"input_ids": [[0, 5, 1, 7, 2], [0, 9, 2, 1, 1]],
                                "attention_mask": [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]})";
  r = RunCli("forward --model " + model + " --inputs " + inputs + " --output " + out + " --pooled");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto got = SafetensorsFile::Open(out);
  ASSERT_TRUE(got.ok()) << got.status();
  const TensorView* logits = (*got)->Find("logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{2, 2}));
  const TensorView* last = (*got)->Find("last_hidden_state");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->shape, (std::vector<int64_t>{2, 5, 32}));
  EXPECT_NE((*got)->Find("hidden_state_2"), nullptr);

  nlohmann::json long_inputs = {{"input_ids", {std::vector<int>(513, 5)}}};
  std::ofstream(inputs, std::ios::trunc) << long_inputs.dump();
  r = RunCli("forward --model " + model + " --inputs " + inputs + " --output " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("max_position_embeddings 514"));
}

// Hostile numbers exit 1 with the file and the field named, never abort (exit 134): in
// config.json, in the inputs of forward, in create's --config.
TEST_F(CliTest, HostileNumbersExitOneNamingTheField) {
  const std::string model = (dir_ / "model").string();
  Result r = RunCli("create --family deberta-v3 --hidden 32 --layers 1 --heads 4 --intermediate 64 --vocab 100 --out " +
                    model);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string config_path = model + "/config.json";
  std::string config;
  {
    std::ifstream in(config_path);
    std::stringstream ss;
    ss << in.rdbuf();
    config = ss.str();
  }
  nlohmann::json hostile = nlohmann::json::parse(config);
  hostile["layer_norm_eps"] = "@X@";
  std::string text = hostile.dump(2);
  text.replace(text.find("\"@X@\""), 5, "1e400");
  std::ofstream(config_path, std::ios::trunc) << text;
  r = RunCli("info --model " + model);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("config.json: invalid JSON at \"layer_norm_eps\""), HasSubstr("1e400")));
  std::ofstream(config_path, std::ios::trunc) << config;

  const std::string inputs = (dir_ / "inputs.json").string();
  const std::string out = (dir_ / "out.safetensors").string();
  // 2^64 - 1 was reported as -1.
  std::ofstream(inputs) << R"({"input_ids": [[1, 18446744073709551615]]})";
  r = RunCli("forward --model " + model + " --inputs " + inputs + " --output " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input_ids[0][1] = 18446744073709551615 is outside the vocabulary [0, 100)"));
  std::ofstream(inputs, std::ios::trunc) << R"({"input_ids": [[1, 2]], "attention_mask": [[1, 9223372036854775808]]})";
  r = RunCli("forward --model " + model + " --inputs " + inputs + " --output " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("attention_mask[0][1] = 9223372036854775808 is outside {0, 1}"));
  std::ofstream(inputs, std::ios::trunc) << R"({"input_ids": [[1, 1e400]]})";
  r = RunCli("forward --model " + model + " --inputs " + inputs + " --output " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("inputs.json: invalid JSON at \"input_ids\""));

  r = RunCli("create --family deberta-v3 --out " + (dir_ / "c1").string() + " --config '{\"hidden_size\": 1e400}'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("--config: invalid JSON at \"hidden_size\""), HasSubstr("1e400")));
  r = RunCli("create --family t5 --out " + (dir_ / "c2").string() + " --config '{\"d_model\": 18446744073709551615}'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"d_model\" must be at most 65536, got 18446744073709551615"));
}


std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteAll(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// Every tensor of `a` is in `b` with the same dtype, shape and bytes, and nothing else is.
void ExpectSameTensors(const std::string& a, const std::string& b) {
  auto from = OpenModelCheckpoint(a);
  auto to = OpenModelCheckpoint(b);
  ASSERT_TRUE(from.ok()) << from.status();
  ASSERT_TRUE(to.ok()) << to.status();
  ASSERT_EQ((*from)->Names(), (*to)->Names());
  for (const std::string& name : (*from)->Names()) {
    const TensorView* x = (*from)->Find(name);
    const TensorView* y = (*to)->Find(name);
    EXPECT_EQ(x->dtype, y->dtype) << name;
    EXPECT_EQ(x->shape, y->shape) << name;
    ASSERT_EQ(x->nbytes, y->nbytes) << name;
    EXPECT_EQ(std::memcmp(x->data, y->data, x->nbytes), 0) << name;
  }
}

// A model directory as older Hub repositories hold it: pytorch_model.bin shards and their index
// (written by Python's torch.save, tests/data/pytorch_bin), tokenizer and sentence-transformers
// files with a Dense module in pytorch_model.bin, and files relserve has no use for.
void WriteBinModel(const fs::path& d) {
  const std::string bins = kData + "/pytorch_bin/";
  for (const char* name : {"pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin",
                           "pytorch_model.bin.index.json"}) {
    WriteAll(d / name, ReadAll(bins + "sharded/" + name));
  }
  WriteAll(d / "config.json", ReadAll(kData + "/reference/deberta_v3_like/config.json"));
  WriteAll(d / "spm.model", ReadAll(kData + "/reference/tokenizer/spm.model"));
  WriteAll(d / "tokenizer_config.json", R"({"do_lower_case": false})");
  WriteAll(d / "modules.json", "[]");
  WriteAll(d / "README.md", "# a model");
  WriteAll(d / "1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true})");
  WriteAll(d / "2_Dense/config.json", R"({"in_features": 2})");
  WriteAll(d / "2_Dense/pytorch_model.bin", ReadAll(bins + "protocol4.bin"));
  WriteAll(d / "training_args.bin", "not weights");
  WriteAll(d / ".gitattributes", "*.bin filter=lfs");
  WriteAll(d / "onnx/model.onnx", "onnx");
}

TEST_F(CliTest, ConvertWritesSafetensorsBesideCopiesOfTheOtherFiles) {
  const fs::path model = dir_ / "model";
  const fs::path out = dir_ / "converted";
  WriteBinModel(model);
  const SplitResult r = RunCliSplit("convert --model " + model.string() + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["written"], nlohmann::json({"model.safetensors", "2_Dense/model.safetensors"}));
  EXPECT_EQ(summary["tensors"], 5);
  EXPECT_EQ(summary["copied"], nlohmann::json({"README.md", "modules.json", "spm.model", "tokenizer_config.json",
                                               "1_Pooling/config.json", "2_Dense/config.json", "config.json"}));
  EXPECT_EQ(summary["skipped"],
            nlohmann::json({".gitattributes", "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin",
                            "pytorch_model.bin.index.json", "training_args.bin", "2_Dense/pytorch_model.bin",
                            "onnx/model.onnx"}));
  ExpectSameTensors(model.string(), out.string());
  ExpectSameTensors((model / "2_Dense").string(), (out / "2_Dense").string());
  auto file = SafetensorsFile::Open((out / "model.safetensors").string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata().at("format"), "pt");  // what transformers expects
  for (const char* copied : {"config.json", "spm.model", "tokenizer_config.json", "2_Dense/config.json"}) {
    EXPECT_EQ(ReadAll(out / copied), ReadAll(model / copied)) << copied;
  }
  for (const char* skipped : {"pytorch_model.bin.index.json", "training_args.bin", ".gitattributes", "onnx"}) {
    EXPECT_FALSE(fs::exists(out / skipped)) << skipped;
  }

  // An existing output is replaced only when asked.
  const SplitResult again = RunCliSplit("convert --model " + model.string() + " --out " + out.string());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_THAT(again.err, HasSubstr(out.string() + ": exists and is not empty; pass --overwrite"));
  EXPECT_EQ(RunCliSplit("convert --model " + model.string() + " --out " + out.string() + " --overwrite").exit_code, 0);
  const SplitResult inside = RunCliSplit("convert --model " + model.string() + " --out " + (model / "st").string());
  EXPECT_EQ(inside.exit_code, 1);
  EXPECT_THAT(inside.err, HasSubstr("is the model directory or inside it"));
}

TEST_F(CliTest, ConvertRefusesWhatItCannotRead) {
  const fs::path model = dir_ / "model";
  WriteAll(model / "config.json", "{}");
  WriteAll(model / "pytorch_model.bin", ReadAll(kData + "/pytorch_bin/malicious_system.bin"));
  SplitResult r = RunCliSplit("convert --model " + model.string() + " --out " + (dir_ / "a").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("refused global \"posix.system\""));
  EXPECT_FALSE(fs::exists(dir_ / "a" / "config.json"));
  WriteAll(model / "pytorch_model.bin", ReadAll(kData + "/pytorch_bin/legacy.bin"));
  r = RunCliSplit("convert --model " + model.string() + " --out " + (dir_ / "b").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("legacy serialization format"));
  fs::remove(model / "pytorch_model.bin");
  r = RunCliSplit("convert --model " + model.string() + " --out " + (dir_ / "c").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("holds no weights"));
  r = RunCliSplit("convert --model " + model.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--out is required"));
}

}  // namespace
}  // namespace relserve
