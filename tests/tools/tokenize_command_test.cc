// relserve-model tokenize on WordPiece (BERT, MPNet) and XLNet model directories: the ids, token
// types and attention masks transformers 4.40.2 gives (tests/data/reference/tokenizer_*/
// cases.json), padded batches included, XLNet's on the left.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

const std::string kBinary = RELSERVE_MODEL_BINARY;
const fs::path kData = RELSERVE_TEST_DATA_DIR;

struct Result {
  int exit_code;
  std::vector<json> lines;
  std::string output;
};

Result RunTokenize(const fs::path& model, const std::string& flags, const std::string& input) {
  const fs::path in = fs::temp_directory_path() / ("relserve-tokenize-in-" + std::to_string(getpid()));
  std::ofstream(in, std::ios::binary) << input;
  const std::string cmd = "OMP_WAIT_POLICY=PASSIVE " + kBinary + " tokenize --model " + model.string() + " " +
                          flags + " < " + in.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  fs::remove(in);
  Result result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, {}, out};
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] == '{') result.lines.push_back(json::parse(line));
  }
  return result;
}

json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

bool OneLine(const std::string& text) { return text.find_first_of("\t\n\r") == std::string::npos; }

// The input lines of a case (a text, or a pair separated by a tab); none when a text holds a
// tab or a line break, which a line cannot carry.
std::vector<std::string> CaseLines(const json& c) {
  std::vector<std::string> lines;
  auto add_pair = [&](const json& pair) {
    lines.push_back(pair[0].get<std::string>() + "\t" + pair[1].get<std::string>());
  };
  if (c.contains("text")) lines.push_back(c["text"].get<std::string>());
  if (c.contains("text_pair")) add_pair(c["text_pair"]);
  if (c.contains("texts")) {
    for (const json& t : c["texts"]) lines.push_back(t.get<std::string>());
  }
  if (c.contains("text_pairs")) {
    for (const json& pair : c["text_pairs"]) add_pair(pair);
  }
  for (const std::string& line : lines) {
    const bool pair = c.contains("text_pair") || c.contains("text_pairs");
    const std::string check = pair ? line.substr(0, line.find('\t')) + line.substr(line.find('\t') + 1) : line;
    if (!OneLine(check)) return {};
  }
  return lines;
}

std::vector<json> Rows(const json& field) {
  if (!field.empty() && field[0].is_array()) return field.get<std::vector<json>>();
  return {field};
}

void ExpectRows(const json& c, const std::string& name, const std::vector<json>& got, size_t first) {
  const std::string id = c["id"].get<std::string>();
  const json& expected = c[name];
  const std::vector<json> ids = Rows(expected["input_ids"]);
  const std::vector<json> masks = Rows(expected["attention_mask"]);
  if (got.size() < first + ids.size()) {
    ADD_FAILURE() << id << ": no output line for it";
    return;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const json& line = got[first + i];
    EXPECT_EQ(line["input_ids"], ids[i]) << id << " row " << i << ": " << line;
    EXPECT_EQ(line["attention_mask"], masks[i]) << id << " row " << i;
    if (expected.contains("token_type_ids")) {
      EXPECT_EQ(line["token_type_ids"], Rows(expected["token_type_ids"])[i]) << id << " row " << i;
    }
  }
}

// Runs every case that fits on lines through the CLI, the single texts and pairs in one run,
// each batch on its own with the padding it was made with, and compares with the expected
// rows. Returns how many cases ran.
int ExpectCases(const fs::path& model, const json& reference, const std::string& name) {
  int ran = 0;
  std::string unpadded_input;
  std::vector<std::pair<const json*, size_t>> unpadded;  // case, its first output line
  size_t next_line = 0;
  for (const json& c : reference["cases"]) {
    const std::vector<std::string> lines = CaseLines(c);
    if (lines.empty()) continue;
    ++ran;
    const json& call = c["call"];
    if (!call.contains("padding")) {
      unpadded.emplace_back(&c, next_line);
      for (const std::string& line : lines) unpadded_input += line + "\n";
      next_line += lines.size();
      continue;
    }
    std::string flags = call["padding"] == "max_length" ? "--padding max_length" : "--padding longest";
    if (call.contains("max_length")) flags += " --max-length " + std::to_string(call["max_length"].get<int>());
    std::string input;
    for (const std::string& line : lines) input += line + "\n";
    const Result r = RunTokenize(model, flags, input);
    EXPECT_EQ(r.exit_code, 0) << c["id"] << ": " << r.output;
    EXPECT_EQ(r.lines.size(), lines.size()) << c["id"] << ": " << r.output;
    ExpectRows(c, name, r.lines, 0);
  }
  const Result r = RunTokenize(model, "", unpadded_input);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.lines.size(), next_line) << r.output;
  for (const auto& [c, first] : unpadded) ExpectRows(*c, name, r.lines, first);
  return ran;
}

class TokenizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("relserve-tokenize-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path MakeModel(const std::string& name, const std::string& config, const fs::path& vocab,
                     const std::string& vocab_name, const std::string& tokenizer_config = "") {
    const fs::path model = dir_ / name;
    fs::create_directories(model);
    std::ofstream(model / "config.json") << config;
    fs::copy_file(vocab, model / vocab_name);
    if (!tokenizer_config.empty()) std::ofstream(model / "tokenizer_config.json") << tokenizer_config;
    return model;
  }

  fs::path dir_;
};

TEST_F(TokenizeCommandTest, WordPieceDirectories) {
  const fs::path data = kData / "reference/tokenizer_wordpiece";
  const json reference = ReadJson(data / "cases.json");
  const fs::path uncased = MakeModel("bert_uncased", R"({"model_type": "bert", "max_position_embeddings": 512})",
                                     data / "vocab_uncased.txt", "vocab.txt");
  EXPECT_GE(ExpectCases(uncased, reference, "bert_uncased"), 20);
  const fs::path cased = MakeModel("bert_cased", R"({"model_type": "bert"})", data / "vocab_cased.txt", "vocab.txt",
                                   R"({"do_lower_case": false})");
  EXPECT_GE(ExpectCases(cased, reference, "bert_cased"), 20);
  const fs::path mpnet = MakeModel("mpnet", R"({"model_type": "mpnet", "max_position_embeddings": 514})",
                                   data / "vocab_mpnet.txt", "vocab.txt");
  EXPECT_GE(ExpectCases(mpnet, reference, "mpnet"), 20);
}

TEST_F(TokenizeCommandTest, XlnetDirectoryPadsOnTheLeft) {
  const fs::path data = kData / "reference/tokenizer_xlnet";
  const json reference = ReadJson(data / "cases.json");
  const fs::path xlnet = MakeModel("xlnet", R"({"model_type": "xlnet"})", data / "spiece.model", "spiece.model");
  EXPECT_GE(ExpectCases(xlnet, reference, "xlnet"), 20);
}

// Directories whose tokenizer is only tokenizer.json (tests/data/tokenizer_json) give the
// same reference rows.
TEST_F(TokenizeCommandTest, TokenizerJsonOnlyDirectories) {
  const json wordpiece = ReadJson(kData / "reference/tokenizer_wordpiece/cases.json");
  const fs::path bert = MakeModel("bert_json", R"({"model_type": "bert"})",
                                  kData / "tokenizer_json/bert_uncased/tokenizer.json", "tokenizer.json");
  EXPECT_GE(ExpectCases(bert, wordpiece, "bert_uncased"), 20);
  const fs::path mpnet = MakeModel("mpnet_json", R"({"model_type": "mpnet"})",
                                   kData / "tokenizer_json/mpnet/tokenizer.json", "tokenizer.json");
  EXPECT_GE(ExpectCases(mpnet, wordpiece, "mpnet"), 20);
  const json xlnet_cases = ReadJson(kData / "reference/tokenizer_xlnet/cases.json");
  const fs::path xlnet = MakeModel("xlnet_json", R"({"model_type": "xlnet"})",
                                   kData / "tokenizer_json/xlnet/tokenizer.json", "tokenizer.json");
  EXPECT_GE(ExpectCases(xlnet, xlnet_cases, "xlnet"), 20);
}

// XLM-RoBERTa reads sentencepiece.bpe.model with fairseq's ids (<s> 0, </s> 2, pieces one up),
// and its tokenizer.json alone gives the same rows.
TEST_F(TokenizeCommandTest, XlmRobertaDirectories) {
  const fs::path fixture = kData / "tokenizer_json/xlm_roberta";
  const fs::path slow = MakeModel("xlmr", R"({"model_type": "xlm-roberta"})", fixture / "sentencepiece.bpe.model",
                                  "sentencepiece.bpe.model");
  const fs::path fast = MakeModel("xlmr_json", R"({"model_type": "xlm-roberta"})", fixture / "tokenizer.json",
                                  "tokenizer.json");
  const std::string input = "Hello world\tthe second text\nnumbers 1,000 and 2,5\n";
  const Result a = RunTokenize(slow, "--padding longest", input);
  const Result b = RunTokenize(fast, "--padding longest", input);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  ASSERT_EQ(a.lines.size(), 2u);
  EXPECT_EQ(a.lines, b.lines);
  const std::vector<int> ids = a.lines[0]["input_ids"].get<std::vector<int>>();
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 3);  // <s> A </s></s> B </s>
  EXPECT_EQ(a.lines[1]["input_ids"].back(), 6);          // padded with the model's <pad>
  EXPECT_EQ(a.lines[0]["token_type_ids"], json(std::vector<int>(ids.size(), 0)));
}

// A BERT model that comes with XLM-RoBERTa's tokenizer (tokenizer_class in
// tokenizer_config.json) is tokenized as XLM-RoBERTa, as AutoTokenizer does.
TEST_F(TokenizeCommandTest, TokenizerClassPicksTheTokenizer) {
  const fs::path fixture = kData / "tokenizer_json/xlm_roberta";
  const fs::path xlmr = MakeModel("xlmr_type", R"({"model_type": "xlm-roberta"})", fixture / "sentencepiece.bpe.model",
                                  "sentencepiece.bpe.model");
  const fs::path bert = MakeModel("bert_with_xlmr", R"({"model_type": "bert"})", fixture / "sentencepiece.bpe.model",
                                  "sentencepiece.bpe.model", R"({"tokenizer_class": "XLMRobertaTokenizerFast"})");
  const std::string input = "Hello world\tand a pair\n";
  const Result a = RunTokenize(xlmr, "", input);
  const Result b = RunTokenize(bert, "", input);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(a.lines, b.lines);
  const fs::path unknown = MakeModel("bert_unknown_class", R"({"model_type": "bert"})",
                                     kData / "reference/tokenizer_wordpiece/vocab_uncased.txt", "vocab.txt",
                                     R"({"tokenizer_class": "BertJapaneseTokenizer"})");
  const Result c = RunTokenize(unknown, "", input);
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_THAT(c.output, HasSubstr("\"BertJapaneseTokenizer\", which relserve has no tokenizer for"));
}

TEST_F(TokenizeCommandTest, MaxLengthTruncatesPairsAndPads) {
  const fs::path data = kData / "reference/tokenizer_wordpiece";
  const fs::path model = MakeModel("bert", R"({"model_type": "bert"})", data / "vocab_uncased.txt", "vocab.txt");
  // "one two three four" and "a b c" (4 + 3 tokens) in 8 with 3 special tokens: longest first
  // cuts the longer text to 3, then the tie cuts the second.
  const Result r = RunTokenize(model, "--max-length 8 --padding max_length", "one two three four\ta b c\nx\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.lines.size(), 2u);
  EXPECT_EQ(r.lines[0]["input_ids"], json({2, 228, 487, 725, 3, 35, 36, 3}));
  EXPECT_EQ(r.lines[0]["token_type_ids"], json({0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(r.lines[0]["truncated"], true);
  EXPECT_EQ(r.lines[1]["input_ids"], json({2, 58, 3, 0, 0, 0, 0, 0}));
  EXPECT_EQ(r.lines[1]["attention_mask"], json({1, 1, 1, 0, 0, 0, 0, 0}));
}

TEST_F(TokenizeCommandTest, BadPaddingAndMissingVocabularyAreErrors) {
  const fs::path data = kData / "reference/tokenizer_wordpiece";
  const fs::path model = MakeModel("bert", R"({"model_type": "bert"})", data / "vocab_uncased.txt", "vocab.txt");
  // --padding's values are its flag's: another one is a usage error (exit 2).
  Result r = RunTokenize(model, "--padding left", "x\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--padding: \"left\" is not one of longest, max_length"));
  // A RoBERTa directory with a WordPiece vocabulary has none of the files its family reads.
  const fs::path roberta = MakeModel("roberta", R"({"model_type": "roberta"})", data / "vocab_uncased.txt", "vocab.txt");
  r = RunTokenize(roberta, "", "x\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("has no tokenizer (vocab.json and merges.txt, or tokenizer.json): the model takes token ids only"));
}

}  // namespace
}  // namespace relserve
