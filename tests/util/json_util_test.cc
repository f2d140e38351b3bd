// JSON files from model directories: every failure a status naming the file, the key, the value
// as given and the limit; never an exception.
#include "server/util/json_util.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

// nlohmann reports a number beyond double range as out_of_range, not parse_error: it used to
// escape ParseJson and abort the process.
TEST(ParseJsonTest, NumberBeyondDoubleRangeIsAnErrorNamingTheKey) {
  auto j = ParseJson(R"({"hidden_size": 32, "layer_norm_eps": 1e400})", "config.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(j.status()), AllOf(HasSubstr("config.json: invalid JSON"), HasSubstr("\"layer_norm_eps\""),
                                         HasSubstr("1e400"), HasSubstr("64-bit float"),
                                         Not(HasSubstr("json.exception"))));

  // Nested: the keys above the value; a key of a closed object is not reported.
  j = ParseJson(R"({"a": {"b": 1}, "metadata": {"total_size": -1e999}})", "index.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(Message(j.status()), HasSubstr("at \"metadata.total_size\""));
  j = ParseJson(R"({"input_ids": [[1, 2], [3, 1e400]]})", "inputs.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(Message(j.status()), HasSubstr("at \"input_ids\""));
  j = ParseJson("[1e400]", "list.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(Message(j.status()), AllOf(HasSubstr("list.json: invalid JSON: number overflow"), HasSubstr("1e400")));
}

TEST(ParseJsonTest, SyntaxErrorsGiveTheirPosition) {
  auto j = ParseJson("{\"a\": 1,\n \"b\": tru}", "f.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(j.status()), AllOf(HasSubstr("f.json: invalid JSON at \"b\""), HasSubstr("line 2")));
  EXPECT_FALSE(ParseJson("", "empty.json").ok());
  EXPECT_TRUE(ParseJson(R"({"big": 18446744073709551615, "small": -9223372036854775808, "f": 1e308})", "ok").ok());
}

// `depth` arrays one inside another around a 1.
std::string NestedArrays(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

// Parsed, a value nested 200,000 deep overflows the stack of whatever copies, compares or prints
// it (JsonValueForMessage in the type error of the key that holds it): refused at parse, naming
// the file, the key and the limit.
TEST(ParseJsonTest, NestingDeeperThanTheLimitIsAnErrorNamingTheKey) {
  static_assert(kMaxJsonDepth == 128, "the messages tested name 128");
  for (const std::string& value : {NestedArrays(200000), std::string(200000, '[')}) {
    auto j = ParseJson("{\"model_type\": \"bert\", \"hidden_size\": " + value + "}", "config.json");
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Message(j.status()), AllOf(HasSubstr("config.json: invalid JSON at \"hidden_size\""),
                                           HasSubstr("nest deeper than 128 levels")));
    EXPECT_LT(Message(j.status()).size(), 200u);
  }
  // Inside an array of objects, and at the top.
  auto j = ParseJson("{\"added_tokens\": [{\"content\": " + NestedArrays(200000) + "}]}", "tokenizer.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(Message(j.status()), HasSubstr("tokenizer.json: invalid JSON at \"added_tokens.content\""));
  j = ParseJson(NestedArrays(200000), "modules.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(Message(j.status()), HasSubstr("modules.json: invalid JSON: arrays and objects nest deeper"));
  // Objects in objects: the keys above are many, their path is quoted short.
  std::string objects;
  for (int i = 0; i < 200000; ++i) objects += "{\"weight_map\":";
  j = ParseJson(objects + "1" + std::string(200000, '}'), "model.safetensors.index.json");
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(Message(j.status()),
              AllOf(HasSubstr("model.safetensors.index.json: invalid JSON at \"weight_map.weight_map."),
                    HasSubstr("nest deeper than 128 levels")));
  EXPECT_LT(Message(j.status()).size(), 400u);
}

TEST(ParseJsonTest, NestingAtTheLimitParses) {
  // The top object is level 1: 127 arrays inside it reach the limit, 128 go beyond.
  auto j = ParseJson("{\"a\": " + NestedArrays(kMaxJsonDepth - 1) + "}", "f.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_THAT(JsonValueForMessage((*j)["a"]), HasSubstr("[[[["));
  EXPECT_FALSE(ParseJson("{\"a\": " + NestedArrays(kMaxJsonDepth) + "}", "f.json").ok());
  EXPECT_TRUE(ParseJson(NestedArrays(kMaxJsonDepth), "f.json").ok());
  EXPECT_FALSE(ParseJson(NestedArrays(kMaxJsonDepth + 1), "f.json").ok());
  // Brackets inside strings are text.
  EXPECT_TRUE(ParseJson("{\"a\": \"" + std::string(1000, '[') + "\"}", "f.json").ok());
}

TEST(JsonNestingBeyondTest, CountsBracketsOutsideStrings) {
  constexpr size_t kNone = absl::string_view::npos;
  EXPECT_EQ(JsonNestingBeyond("[[1]]", 2), kNone);
  EXPECT_EQ(JsonNestingBeyond("[[1]]", 1), 1u);
  EXPECT_EQ(JsonNestingBeyond("{\"a\": [{}]}", 3), kNone);
  EXPECT_EQ(JsonNestingBeyond("{\"a\": [{}]}", 2), 7u);
  EXPECT_EQ(JsonNestingBeyond("[[], [], [[]]]", 3), kNone);
  EXPECT_EQ(JsonNestingBeyond("[[], [], [[]]]", 2), 10u);
  EXPECT_EQ(JsonNestingBeyond("", 0), kNone);
  EXPECT_EQ(JsonNestingBeyond("1", 0), kNone);
  EXPECT_EQ(JsonNestingBeyond("[", 0), 0u);
  // Strings, with escaped quotes and backslashes.
  EXPECT_EQ(JsonNestingBeyond(R"(["[[[[", "{{"])", 1), kNone);
  EXPECT_EQ(JsonNestingBeyond(R"(["\"[[[[", "\\", [1]])", 1), 17u);
  EXPECT_EQ(JsonNestingBeyond(R"(["\\"])", 1), kNone);
  // Unbalanced closers do not go below zero.
  EXPECT_EQ(JsonNestingBeyond("]]]][[", 1), 5u);
}

// Messages quote values through JsonValueForMessage: only its first characters are written, so
// a value of any size or depth (a parse without ParseJson's limit) costs little and cannot
// overflow the stack.
TEST(JsonValueForMessageTest, WritesOnlyWhatItShows) {
  const nlohmann::json deep = nlohmann::json::parse(NestedArrays(200000));
  const std::string text = JsonValueForMessage(deep);
  EXPECT_EQ(text, std::string(60, '[') + "...");
  nlohmann::json wide = nlohmann::json::array();
  for (int i = 0; i < 100000; ++i) wide.push_back(i);
  EXPECT_EQ(JsonValueForMessage(wide), "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,...");
  EXPECT_EQ(JsonValueForMessage(nlohmann::json(std::string(1000000, 'x'))), "\"" + std::string(59, 'x') + "...");
  const nlohmann::json keyed = {{std::string(1000000, 'k'), 1}};
  EXPECT_EQ(JsonValueForMessage(keyed), "{\"" + std::string(58, 'k') + "...");
  // Short values whole, as dump() writes them; a cut never splits a UTF-8 character.
  EXPECT_EQ(JsonValueForMessage(nlohmann::json::parse(R"({"a": [1, 2.5, null, true, "x\"y"]})")),
            R"({"a":[1,2.5,null,true,"x\"y"]})");
  std::string e_acute;
  for (int i = 0; i < 35; ++i) e_acute += "\xc3\xa9";
  const std::string accents = JsonValueForMessage(nlohmann::json(e_acute));
  EXPECT_EQ(accents, "\"" + e_acute.substr(0, 58) + "...");
}

class JsonFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("json-util-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

// A sparse file costs no disk: the size alone must refuse it, before anything is read.
TEST_F(JsonFileTest, ReadJsonFileRefusesHugeFilesBeforeReadingThem) {
  const fs::path big = dir_ / "config.json";
  std::ofstream(big) << "{}";
  fs::resize_file(big, kMaxJsonFileBytes + 1);
  auto j = ReadJsonFile(big.string());
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(j.status()), AllOf(HasSubstr("config.json"), HasSubstr("limit for a JSON file")));
  fs::resize_file(big, 2);
  EXPECT_TRUE(ReadJsonFile(big.string()).ok());
}

TEST_F(JsonFileTest, ReadJsonFileOfADeepValueNamesTheFile) {
  const fs::path config = dir_ / "config.json";
  std::ofstream(config) << "{\"model_type\": \"bert\", \"vocab_size\": " << NestedArrays(200000) << "}";
  auto j = ReadJsonFile(config.string());
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(j.status()), AllOf(HasSubstr(config.string() + ": invalid JSON at \"vocab_size\""),
                                         HasSubstr("deeper than 128 levels")));
}

TEST_F(JsonFileTest, OptionalFileExistsTellsAbsentFromNotAFile) {
  const std::string file = (dir_ / "spm.model").string();
  EXPECT_EQ(OptionalFileExists(file).value(), false);
  EXPECT_EQ(OptionalFileExists((dir_ / "missing" / "x").string()).value(), false);
  std::ofstream(file) << "x";
  EXPECT_EQ(OptionalFileExists(file).value(), true);
  fs::create_symlink(file, dir_ / "link.model");
  EXPECT_EQ(OptionalFileExists((dir_ / "link.model").string()).value(), true);

  fs::create_directory(dir_ / "dir.model");
  auto dir = OptionalFileExists((dir_ / "dir.model").string());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(dir.status()), AllOf(HasSubstr("dir.model"), HasSubstr("is a directory")));
  fs::create_symlink(dir_ / "nothing", dir_ / "dangling.model");
  auto dangling = OptionalFileExists((dir_ / "dangling.model").string());
  EXPECT_EQ(dangling.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(dangling.status()), HasSubstr("symbolic link to nothing"));
}

struct IntCase {
  const char* value;
  bool ok;
  int64_t want;           // when ok
  const char* message;  // when not
};

TEST(JsonFieldReaderTest, IntegersInRange) {
  for (const IntCase& c : std::vector<IntCase>{
           {"32", true, 32, ""},
           {"32.0", true, 32, ""},  // Python may write an integer as a float
           {"1", true, 1, ""},
           {"65536", true, 65536, ""},
           {"0", false, 0, "\"n\" must be at least 1, got 0"},
           {"-1", false, 0, "\"n\" must be at least 1, got -1"},
           {"65537", false, 0, "\"n\" must be at most 65536, got 65537"},
           {"1e9", false, 0, "\"n\" must be at most 65536, got 1000000000.0"},
           {"1e300", false, 0, "must be at most 65536, got 1e+300"},
           {"-1e300", false, 0, "must be at least 1, got -1e+300"},
           // Not -1, and not "out of range (minimum 1)": the value as written and the real limit.
           {"18446744073709551615", false, 0, "\"n\" must be at most 65536, got 18446744073709551615"},
           {"9223372036854775808", false, 0, "must be at most 65536, got 9223372036854775808"},
           {"-9223372036854775808", false, 0, "must be at least 1, got -9223372036854775808"},
           {"2.5", false, 0, "\"n\" must be an integer, got 2.5"},
           {"\"32\"", false, 0, "\"n\" must be an integer, got \"32\""},
           {"true", false, 0, "\"n\" must be an integer, got true"},
           {"[32]", false, 0, "\"n\" must be an integer, got [32]"},
           {"{}", false, 0, "\"n\" must be an integer, got {}"},
       }) {
    const nlohmann::json j = nlohmann::json::parse(std::string("{\"n\": ") + c.value + "}");
    JsonFieldReader r(j, "cfg.json");
    int64_t out = -7;
    absl::Status s = r.Int64("n", &out, 1, 65536);
    if (c.ok) {
      EXPECT_TRUE(s.ok()) << c.value << ": " << s;
      EXPECT_EQ(out, c.want) << c.value;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.value;
      EXPECT_THAT(Message(s), AllOf(HasSubstr("cfg.json: "), HasSubstr(c.message))) << c.value;
      EXPECT_EQ(out, -7) << c.value << ": output written on error";
    }
  }
}

TEST(JsonFieldReaderTest, IntClampsToTheIntRangeAndKeepsDefaults) {
  const nlohmann::json j = nlohmann::json::parse(R"({"big": 4294967297, "neg": -2147483649, "null": null})");
  JsonFieldReader r(j, "cfg.json");
  int out = 5;
  // 2^32 + 1 must not wrap to 1.
  EXPECT_THAT(Message(r.Int("big", &out, 0, std::numeric_limits<int64_t>::max())),
              HasSubstr("must be at most 2147483647, got 4294967297"));
  EXPECT_THAT(Message(r.Int("neg", &out, std::numeric_limits<int64_t>::min(), 0)),
              HasSubstr("must be at least -2147483648, got -2147483649"));
  EXPECT_TRUE(r.Int("null", &out, 0, 10).ok());
  EXPECT_TRUE(r.Int("absent", &out, 0, 10).ok());
  EXPECT_EQ(out, 5);
  EXPECT_FALSE(r.Has("null"));
  EXPECT_FALSE(JsonFieldReader(nlohmann::json::array(), "x").Has("a"));
}

TEST(JsonFieldReaderTest, DoublesBoolsAndStrings) {
  const nlohmann::json j = nlohmann::json::parse(
      R"({"eps": 1e-7, "neg": -1, "zero": 0, "big": 2, "text": "1e-7", "yes": true, "one": 1, "name": "gelu", "list": ["a"]})");
  JsonFieldReader r(j, "cfg.json");
  double eps = 0;
  EXPECT_TRUE(r.Double("eps", &eps, 0, 1, /*min_exclusive=*/true).ok());
  EXPECT_EQ(eps, 1e-7);
  EXPECT_THAT(Message(r.Double("neg", &eps, 0, 1, true)), HasSubstr("\"neg\" must be a number above 0 and at most 1, got -1"));
  EXPECT_THAT(Message(r.Double("zero", &eps, 0, 1, true)), HasSubstr("got 0"));
  EXPECT_TRUE(r.Double("zero", &eps, 0, 1).ok());
  EXPECT_THAT(Message(r.Double("big", &eps, 0, 1)), HasSubstr("\"big\" must be a number from 0 to 1, got 2"));
  EXPECT_THAT(Message(r.Double("text", &eps, 0, 1)), HasSubstr("\"text\" must be a number, got \"1e-7\""));

  bool flag = false;
  EXPECT_TRUE(r.Bool("yes", &flag).ok());
  EXPECT_TRUE(flag);
  EXPECT_THAT(Message(r.Bool("one", &flag)), HasSubstr("\"one\" must be true or false, got 1"));
  std::string name;
  EXPECT_TRUE(r.String("name", &name).ok());
  EXPECT_EQ(name, "gelu");
  EXPECT_THAT(Message(r.String("list", &name)), HasSubstr("\"list\" must be a string, got [\"a\"]"));
  EXPECT_THAT(Message(r.String("yes", &name)), HasSubstr("got true"));
}

TEST(JsonFieldReaderTest, LongValuesAreCutShortInMessages) {
  nlohmann::json j;
  j["ids"] = std::vector<int>(1000, 12345);
  JsonFieldReader r(j, "cfg.json");
  int out = 0;
  const std::string m = Message(r.Int("ids", &out, 0, 1));
  EXPECT_THAT(m, HasSubstr("..."));
  EXPECT_LT(m.size(), 200u);
}

}  // namespace
}  // namespace relserve
