// Hostile values in every field of every JSON file of a model directory: each load must fail
// with INVALID_ARGUMENT naming the file and the field (or succeed where the value is valid),
// never abort, allocate toward the value, or pass a wrong-typed value off as another problem.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/model_config/model_limits.h"
#include "server/tools/model_creator.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

// Small models with every kind of file, made once per process:
//   embedder    DeBERTa-v3, tokenizer files, sentence-transformers Pooling + Dense + Normalize
//   classifier  DeBERTa-v2 (convolution), absolute positions, token types, 3 labels
//   t5          T5 v1.1 (gated feed-forward) with tokenizer files
//   sharded     the embedder's weights behind model.safetensors.index.json
class HostileModels {
 public:
  static const HostileModels& Get() {
    static const HostileModels* models = new HostileModels();
    return *models;
  }
  std::string dir(const std::string& name) const { return root_ + "/" + name; }

 private:
  HostileModels() {
    std::string tmpl = (fs::temp_directory_path() / "relserve-hostile-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
    root_ = tmpl;
    const std::string spm = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/tokenizer/spm.model";
    auto create = [&](const std::string& name, const std::string& family, auto&& adjust) {
      CreateModelOptions o;
      o.family = family;
      o.hidden = 32;
      o.layers = 2;
      o.heads = 4;
      o.intermediate = 64;
      o.seed = 3;
      adjust(o);
      absl::Status s = CreateModelDirectory(o, dir(name));
      if (!s.ok()) throw std::runtime_error(std::string(s.message()));
    };
    create("embedder", "deberta-v3", [&](CreateModelOptions& o) {
      o.vocab_file = spm;
      o.sentence_transformers = true;
      o.dense_out = 16;
    });
    create("classifier", "deberta-v2", [&](CreateModelOptions& o) {
      o.vocab = 100;
      o.num_labels = 3;
      o.config_overrides = {{"position_biased_input", true}, {"type_vocab_size", 2}};
    });
    create("t5", "t5-v1.1", [&](CreateModelOptions& o) { o.vocab_file = spm; });
    create("mpnet", "mpnet", [&](CreateModelOptions& o) {
      o.vocab = 100;
      o.num_labels = 2;
    });
    create("sharded", "deberta-v3", [&](CreateModelOptions& o) { o.vocab = 100; });
    const std::string shard = "model-00001-of-00001.safetensors";
    fs::rename(dir("sharded") + "/model.safetensors", dir("sharded") + "/" + shard);
    json index = {{"metadata", {{"total_size", 1}}}, {"weight_map", json::object()}};
    for (const char* tensor : {"embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
                               "embeddings.LayerNorm.bias"}) {
      index["weight_map"][tensor] = shard;
    }
    std::ofstream(dir("sharded") + "/model.safetensors.index.json") << index.dump(2);
    std::atexit([] { fs::remove_all(Get().root_); });
  }
  std::string root_;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// The whole model directory as the server loads it: the tokenizer beside the engine.
absl::Status LoadStatus(const std::string& dir, EngineOptions options = {}, bool load_tokenizer = true) {
  return LoadModel(dir, options, load_tokenizer).status();
}

// Sets the value at `pointer` of a JSON file to `raw` (JSON text, written as is, so that it may
// be 1e400, which no JSON value holds), or removes it when raw is empty; restores the file when
// it goes out of scope.
class FileEdit {
 public:
  FileEdit(const std::string& path, const std::string& pointer, const std::string& raw)
      : path_(path), original_(ReadText(path)) {
    json j = json::parse(original_);
    const json::json_pointer ptr(pointer);
    if (raw.empty()) {
      j[ptr.parent_pointer()].erase(ptr.back());
      WriteText(path_, j.dump(2));
      return;
    }
    j[ptr] = "@HOSTILE@";
    std::string text = j.dump(2);
    const std::string placeholder = "\"@HOSTILE@\"";
    text.replace(text.find(placeholder), placeholder.size(), raw);
    WriteText(path_, text);
  }
  ~FileEdit() { WriteText(path_, original_); }

 private:
  std::string path_;
  std::string original_;
};

enum class Kind { kInt, kFloat, kBool, kString, kToken };

// What a hostile tester writes into a field of each kind. 1e400 is beyond double range: the JSON
// parser reports it differently from a syntax error.
const std::vector<std::string>& HostileValues(Kind kind) {
  static const std::map<Kind, std::vector<std::string>> kValues = {
      {Kind::kInt,
       {"-1", "0", "1000000000", "1e20", "18446744073709551615", "2.5", "\"32\"", "[]", "[32]", "{}", "true",
        "1e400"}},
      {Kind::kFloat, {"-1", "0", "1000000000", "\"1e-7\"", "[]", "{}", "true", "1e400", "-1e400"}},
      {Kind::kBool, {"1", "0", "\"true\"", "[]", "{}", "1e400"}},
      {Kind::kString, {"1", "true", "[]", "[\"gelu\"]", "{}", "1e400"}},
      {Kind::kToken, {"1", "true", "[]", "{}", "{\"content\": 5}", "1e400"}},
  };
  return kValues.at(kind);
}

struct Field {
  std::string model;
  std::string file;     // relative to the model directory
  std::string pointer;  // JSON pointer of the field
  Kind kind;
  std::set<std::string> valid = {};  // hostile values that are legitimate for this field
  std::string name = "";            // what the message must name; default: the pointer's last key
  bool null_is_absent = true;       // config semantics; not for the index or id2label's entries
};

std::vector<Field> Fields() {
  using K = Kind;
  const std::string c = "config.json";
  std::vector<Field> f = {
      // DeBERTa-v3 config.json.
      {"embedder", c, "/vocab_size", K::kInt},
      {"embedder", c, "/hidden_size", K::kInt},
      {"embedder", c, "/num_hidden_layers", K::kInt},
      {"embedder", c, "/num_attention_heads", K::kInt},
      {"embedder", c, "/intermediate_size", K::kInt},
      {"embedder", c, "/max_position_embeddings", K::kInt},
      {"embedder", c, "/type_vocab_size", K::kInt, {"0"}},
      {"embedder", c, "/max_relative_positions", K::kInt, {"-1", "0"}},
      {"embedder", c, "/position_buckets", K::kInt},
      {"embedder", c, "/pad_token_id", K::kInt, {"0"}},
      {"embedder", c, "/conv_kernel_size", K::kInt, {"0"}},
      {"embedder", c, "/conv_groups", K::kInt},
      {"embedder", c, "/attention_head_size", K::kInt},
      {"embedder", c, "/embedding_size", K::kInt},
      {"embedder", c, "/pooler_hidden_size", K::kInt},
      {"embedder", c, "/layer_norm_eps", K::kFloat},
      {"embedder", c, "/relative_attention", K::kBool},
      {"embedder", c, "/position_biased_input", K::kBool},
      {"embedder", c, "/share_att_key", K::kBool},
      {"embedder", c, "/model_type", K::kString},
      {"embedder", c, "/hidden_act", K::kString},
      {"embedder", c, "/pooler_hidden_act", K::kString},
      {"embedder", c, "/conv_act", K::kString},
      {"embedder", c, "/norm_rel_ebd", K::kString},
      {"embedder", c, "/torch_dtype", K::kString},
      {"embedder", c, "/pos_att_type", K::kString, {"[]"}},  // a list of none is valid
      {"embedder", c, "/architectures", K::kString},
      // DeBERTa-v2 with a head, absolute positions, token types and the convolution.
      {"classifier", c, "/num_labels", K::kInt},
      {"classifier", c, "/id2label", K::kString},
      {"classifier", c, "/id2label/1", K::kString, {}, "id2label", false},
      {"classifier", c, "/problem_type", K::kString},
      {"classifier", c, "/max_position_embeddings", K::kInt},
      {"classifier", c, "/type_vocab_size", K::kInt},
      {"classifier", c, "/conv_kernel_size", K::kInt},
      {"classifier", c, "/conv_groups", K::kInt},
      {"classifier", c, "/pooler_hidden_size", K::kInt},
      {"classifier", c, "/pad_token_id", K::kInt, {"0"}},
      // T5 config.json.
      {"t5", c, "/vocab_size", K::kInt},
      {"t5", c, "/d_model", K::kInt},
      {"t5", c, "/d_kv", K::kInt},
      {"t5", c, "/d_ff", K::kInt},
      {"t5", c, "/num_layers", K::kInt},
      {"t5", c, "/num_heads", K::kInt},
      {"t5", c, "/relative_attention_num_buckets", K::kInt},
      // Any distance above a quarter of the buckets is a valid (if unusual) setting.
      {"t5", c, "/relative_attention_max_distance", K::kInt, {"1000000000"}},
      {"t5", c, "/pad_token_id", K::kInt, {"0"}},
      {"t5", c, "/eos_token_id", K::kInt, {"0"}},
      {"t5", c, "/layer_norm_epsilon", K::kFloat},
      {"t5", c, "/feed_forward_proj", K::kString},
      {"t5", c, "/dense_act_fn", K::kString},
      {"t5", c, "/is_gated_act", K::kBool},
      {"t5", c, "/model_type", K::kString},
      // MPNet config.json, with a classification head.
      {"mpnet", c, "/vocab_size", K::kInt},
      {"mpnet", c, "/hidden_size", K::kInt},
      {"mpnet", c, "/num_hidden_layers", K::kInt},
      {"mpnet", c, "/num_attention_heads", K::kInt},
      {"mpnet", c, "/intermediate_size", K::kInt},
      {"mpnet", c, "/max_position_embeddings", K::kInt},
      {"mpnet", c, "/relative_attention_num_buckets", K::kInt},
      {"mpnet", c, "/pad_token_id", K::kInt, {"0"}},  // not what positions skip (padding_idx is 1)
      {"mpnet", c, "/layer_norm_eps", K::kFloat},
      {"mpnet", c, "/hidden_act", K::kString},
      {"mpnet", c, "/num_labels", K::kInt},
      {"mpnet", c, "/architectures", K::kString},
      // Tokenizer files. model_max_length only bounds truncation; past 2^31 it is transformers'
      // "no limit" sentinel (int(1e30)).
      {"embedder", "tokenizer_config.json", "/do_lower_case", K::kBool},
      {"embedder", "tokenizer_config.json", "/model_max_length", K::kInt,
       {"1000000000", "1e20", "18446744073709551615"}},
      {"t5", "tokenizer_config.json", "/model_max_length", K::kInt, {"1000000000", "1e20", "18446744073709551615"}},
      {"embedder", "tokenizer_config.json", "/pad_token", K::kToken},
      {"embedder", "tokenizer_config.json", "/unk_token", K::kToken},
      {"embedder", "tokenizer_config.json", "/cls_token", K::kToken},
      {"embedder", "tokenizer_config.json", "/sep_token", K::kToken},
      {"t5", "tokenizer_config.json", "/eos_token", K::kToken},
      {"embedder", "special_tokens_map.json", "/cls_token", K::kToken},
      {"embedder", "special_tokens_map.json", "/pad_token", K::kToken},
      {"t5", "special_tokens_map.json", "/unk_token", K::kToken},
      // sentence-transformers.
      {"embedder", "modules.json", "/1/type", K::kString},
      {"embedder", "modules.json", "/1/path", K::kString},
      {"embedder", "1_Pooling/config.json", "/word_embedding_dimension", K::kInt},
      {"embedder", "1_Pooling/config.json", "/pooling_mode_mean_tokens", K::kBool},
      {"embedder", "1_Pooling/config.json", "/pooling_mode_cls_token", K::kBool},
      {"embedder", "1_Pooling/config.json", "/pooling_mode_max_tokens", K::kBool},
      {"embedder", "1_Pooling/config.json", "/pooling_mode_mean_sqrt_len_tokens", K::kBool},
      {"embedder", "1_Pooling/config.json", "/pooling_mode_weightedmean_tokens", K::kBool},
      {"embedder", "1_Pooling/config.json", "/pooling_mode_lasttoken", K::kBool},
      {"embedder", "1_Pooling/config.json", "/include_prompt", K::kBool},
      // A max_seq_length past the model's own limit is cut to it.
      {"embedder", "sentence_bert_config.json", "/max_seq_length", K::kInt, {"1000000000"}},
      {"embedder", "sentence_bert_config.json", "/do_lower_case", K::kBool},
      {"embedder", "2_Dense/config.json", "/in_features", K::kInt},
      {"embedder", "2_Dense/config.json", "/out_features", K::kInt},
      {"embedder", "2_Dense/config.json", "/bias", K::kBool},
      {"embedder", "2_Dense/config.json", "/activation_function", K::kString},
      // The shard index.
      {"sharded", "model.safetensors.index.json", "/weight_map", K::kString, {}, "", false},
      {"sharded", "model.safetensors.index.json", "/weight_map/embeddings.LayerNorm.bias", K::kString, {},
       "embeddings.LayerNorm.bias", false},
  };
  return f;
}

std::string NameOf(const Field& f) {
  if (!f.name.empty()) return f.name;
  return json::json_pointer(f.pointer).back();
}

// Every hostile value of every field: not OK (unless valid), INVALID_ARGUMENT, the file and the
// field named; and a valid value loads.
TEST(HostileConfigTest, EveryFieldOfEveryFileRefusesHostileValuesNamingTheField) {
  const HostileModels& models = HostileModels::Get();
  int checked = 0;
  for (const Field& f : Fields()) {
    const std::string dir = models.dir(f.model);
    const std::string path = dir + "/" + f.file;
    ASSERT_TRUE(LoadStatus(dir).ok()) << f.model << " " << LoadStatus(dir);
    for (const std::string& value : HostileValues(f.kind)) {
      SCOPED_TRACE(f.model + " " + f.file + " " + f.pointer + " = " + value);
      FileEdit edit(path, f.pointer, value);
      const absl::Status s = LoadStatus(dir);
      ++checked;
      if (f.valid.count(value)) {
        EXPECT_TRUE(s.ok()) << s;
        continue;
      }
      ASSERT_FALSE(s.ok());
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      const std::string message(s.message());
      EXPECT_THAT(message, AllOf(HasSubstr(fs::path(f.file).filename().string()), HasSubstr(NameOf(f))));
      if (value == "18446744073709551615") {
        EXPECT_THAT(message, HasSubstr(value));
      }
    }
  }
  EXPECT_GT(checked, 500);
}

// null is transformers' "not given": the same result as leaving the key out, whatever that is
// (the default may disagree with the checkpoint, which is then the error).
TEST(HostileConfigTest, NullMeansAbsent) {
  const HostileModels& models = HostileModels::Get();
  for (const Field& f : Fields()) {
    if (!f.null_is_absent) continue;
    SCOPED_TRACE(f.model + " " + f.file + " " + f.pointer);
    const std::string dir = models.dir(f.model);
    const std::string path = dir + "/" + f.file;
    absl::Status with_null, without;
    {
      FileEdit edit(path, f.pointer, "null");
      with_null = LoadStatus(dir);
    }
    {
      FileEdit edit(path, f.pointer, "");
      without = LoadStatus(dir);
    }
    EXPECT_EQ(with_null, without);
  }
}

// A number beyond double range at the top of each file, and nested in the index's metadata.
TEST(HostileConfigTest, NumberBeyondDoubleRangeInAnyFileIsAnErrorNotAnAbort) {
  const HostileModels& models = HostileModels::Get();
  const std::vector<std::pair<std::string, std::string>> files = {
      {"embedder", "config.json"},          {"embedder", "tokenizer_config.json"},
      {"embedder", "special_tokens_map.json"}, {"embedder", "1_Pooling/config.json"},
      {"embedder", "2_Dense/config.json"},   {"t5", "config.json"},
      {"sharded", "model.safetensors.index.json"}};
  for (const auto& [model, file] : files) {
    SCOPED_TRACE(file);
    FileEdit edit(models.dir(model) + "/" + file, "/unknown_key", "1e400");
    const absl::Status s = LoadStatus(models.dir(model));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(file), HasSubstr("\"unknown_key\""), HasSubstr("1e400")));
  }
  FileEdit edit(models.dir("sharded") + "/model.safetensors.index.json", "/metadata/total_size", "1e400");
  EXPECT_THAT(std::string(LoadStatus(models.dir("sharded")).message()), HasSubstr("\"metadata.total_size\""));
  FileEdit modules(models.dir("embedder") + "/modules.json", "/0/idx", "-1e400");
  EXPECT_THAT(std::string(LoadStatus(models.dir("embedder")).message()),
              AllOf(HasSubstr("modules.json: invalid JSON at \"idx\""), HasSubstr("1e400")));
}

absl::Status LoadWith(const std::string& model, const std::string& file,
                      const std::vector<std::pair<std::string, std::string>>& edits) {
  const std::string path = HostileModels::Get().dir(model) + "/" + file;
  std::vector<std::unique_ptr<FileEdit>> applied;
  for (const auto& [pointer, raw] : edits) applied.push_back(std::make_unique<FileEdit>(path, pointer, raw));
  absl::Status s = LoadStatus(HostileModels::Get().dir(model));
  while (!applied.empty()) applied.pop_back();  // restored in reverse order
  return s;
}

void ExpectInvalid(const absl::Status& s, const std::vector<std::string>& mentions) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  for (const std::string& m : mentions) EXPECT_THAT(std::string(s.message()), HasSubstr(m));
}

// Sizes are bounded by relserve's limits before anything is allocated, with the limit named.
TEST(HostileConfigTest, SizesAboveTheLimitsSayTheLimit) {
  // max_position_embeddings backs no tensor in DeBERTa-v3 (relative positions only): it is the
  // model's maximum length, which the server's warm-up used to allocate toward.
  ExpectInvalid(LoadWith("embedder", "config.json", {{"/max_position_embeddings", "1000000000"}}),
                {"\"max_position_embeddings\" must be at most 32768, got 1000000000"});
  ExpectInvalid(LoadWith("embedder", "config.json", {{"/hidden_size", "1000000000"}}),
                {"\"hidden_size\" must be at most 65536, got 1000000000"});
  ExpectInvalid(LoadWith("embedder", "config.json", {{"/hidden_size", "18446744073709551615"}}),
                {"\"hidden_size\" must be at most 65536, got 18446744073709551615"});
  // Without id2label, num_labels names as many labels as it says.
  ExpectInvalid(LoadWith("classifier", "config.json", {{"/id2label", ""}, {"/num_labels", "2000000000"}}),
                {"\"num_labels\" must be at most 65536"});
  ExpectInvalid(LoadWith("embedder", "config.json", {{"/num_attention_heads", "2"}, {"/attention_head_size", "65536"}}),
                {"attention_head_size", "must be at most 65536"});
  // The maximum length asked for is bounded too (the T5 encoder has no position table).
  EngineOptions options;
  options.max_length = 100000;
  ExpectInvalid(LoadStatus(HostileModels::Get().dir("t5"), options), {"max_length 100000", "32768"});
  options.max_length = kMaxSequenceLength;
  EXPECT_TRUE(LoadStatus(HostileModels::Get().dir("t5"), options).ok());
}

// A size within the limits that disagrees with the checkpoint names the key, its value and the
// tensor's real shape.
TEST(HostileConfigTest, SizesThatDisagreeWithTheCheckpointNameKeyAndTensor) {
  struct Case {
    std::string model;
    std::string pointer;
    std::string raw;
    std::vector<std::string> mentions;
  };
  for (const Case& c : std::vector<Case>{
           {"embedder", "/vocab_size", "5000", {"\"vocab_size\" 5000", "embeddings.word_embeddings.weight", "[1001, 32]"}},
           {"embedder", "/hidden_size", "64", {"\"hidden_size\" 64", "embeddings.LayerNorm.weight", "[32]"}},
           {"embedder", "/embedding_size", "16", {"\"embedding_size\" 16", "embeddings.word_embeddings.weight"}},
           {"embedder", "/num_hidden_layers", "3", {"\"num_hidden_layers\" 3", "2 blocks", "encoder.layer.1"}},
           {"embedder", "/num_hidden_layers", "1", {"\"num_hidden_layers\" 1", "2 blocks"}},
           {"embedder", "/intermediate_size", "128", {"\"intermediate_size\" 128", "intermediate.dense.weight"}},
           {"embedder", "/attention_head_size", "16", {"\"attention_head_size\" 16", "query_proj.weight", "[32, 32]"}},
           {"embedder", "/position_buckets", "128", {"\"position_buckets\" 128", "encoder.rel_embeddings.weight"}},
           {"embedder", "/relative_attention", "false", {"\"relative_attention\" false", "encoder.rel_embeddings.weight"}},
           {"classifier", "/type_vocab_size", "0", {"\"type_vocab_size\" 0", "token_type_embeddings"}},
           {"classifier", "/type_vocab_size", "3", {"\"type_vocab_size\" 3", "token_type_embeddings", "[2, 32]"}},
           {"classifier", "/max_position_embeddings", "1024", {"\"max_position_embeddings\" 1024", "position_embeddings"}},
           {"classifier", "/conv_kernel_size", "0", {"\"conv_kernel_size\" 0", "encoder.conv.conv.weight"}},
           {"classifier", "/conv_kernel_size", "5", {"\"conv_kernel_size\" 5", "encoder.conv.conv.weight"}},
           {"classifier", "/pooler_hidden_size", "64", {"\"pooler_hidden_size\" 64", "pooler.dense.weight"}},
           {"classifier", "/id2label", "{\"0\": \"a\", \"1\": \"b\"}", {"\"num_labels\" 2", "classifier.weight", "[3, 32]"}},
           {"t5", "/d_model", "64", {"\"d_model\" 64", "encoder.final_layer_norm.weight"}},
           {"t5", "/vocab_size", "5000", {"\"vocab_size\" 5000", "shared.weight"}},
           {"t5", "/num_layers", "4", {"\"num_layers\" 4", "encoder.block."}},
           {"t5", "/num_heads", "8", {"\"num_heads\" 8", "relative_attention_bias"}},
           {"t5", "/d_kv", "16", {"\"d_kv\" 16", "SelfAttention.q.weight"}},
           {"t5", "/d_ff", "128", {"\"d_ff\" 128", "DenseReluDense.wi_0.weight"}},
           {"t5", "/relative_attention_num_buckets", "64", {"\"relative_attention_num_buckets\" 64", "relative_attention_bias"}},
       }) {
    SCOPED_TRACE(c.model + c.pointer + " = " + c.raw);
    ExpectInvalid(LoadWith(c.model, "config.json", {{c.pointer, c.raw}}), c.mentions);
  }
}

// Values with a valid type and size that the reference implementation cannot compute with.
TEST(HostileConfigTest, ValuesOutsideTheirValidRange) {
  // layer_norm_eps <= 0 used to load and serve NaN.
  for (const char* eps : {"-1", "0", "-1e-7", "2"}) {
    ExpectInvalid(LoadWith("embedder", "config.json", {{"/layer_norm_eps", eps}}), {"\"layer_norm_eps\""});
    ExpectInvalid(LoadWith("t5", "config.json", {{"/layer_norm_epsilon", eps}}), {"\"layer_norm_epsilon\""});
  }
  // T5 divides by log(max_distance / (buckets / 4)).
  ExpectInvalid(LoadWith("t5", "config.json", {{"/relative_attention_max_distance", "8"}}),
                {"\"relative_attention_max_distance\"", "above relative_attention_num_buckets / 4 = 8"});
  // DeBERTa's log buckets divide by log((max_relative_positions - 1) / (position_buckets / 2)).
  ExpectInvalid(LoadWith("embedder", "config.json", {{"/max_relative_positions", "100"}}),
                {"\"max_relative_positions\"", "129"});
  ExpectInvalid(LoadWith("embedder", "config.json", {{"/pad_token_id", "1001"}}),
                {"\"pad_token_id\" is 1001, outside the vocabulary [0, 1001)"});
  ExpectInvalid(LoadWith("classifier", "config.json", {{"/id2label", "{\"0\": \"a\", \"00\": \"b\", \"2\": \"c\"}"}}),
                {"\"id2label\"", "\"00\""});
  ExpectInvalid(LoadWith("embedder", "modules.json", {{"/1/path", "\"../1_Pooling\""}}), {"\"path\"", "../1_Pooling"});
  ExpectInvalid(LoadWith("embedder", "modules.json", {{"/1/path", "\"/etc\""}}), {"\"path\""});
  ExpectInvalid(LoadWith("embedder", "1_Pooling/config.json",
                         {{"/pooling_mode_mean_tokens", "false"}}), {"no pooling mode is enabled"});
}

// The wrong-typed dimension used to be ignored and reported as "no pooling mode is enabled".
TEST(HostileConfigTest, WrongTypedPoolingDimensionIsReportedAsSuch) {
  const absl::Status s = LoadWith("embedder", "1_Pooling/config.json", {{"/word_embedding_dimension", "\"32\""}});
  ExpectInvalid(s, {"1_Pooling/config.json", "\"word_embedding_dimension\" must be an integer, got \"32\""});
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("no pooling mode")));
}

// A directory (or a dangling link) where a file belongs is an error naming it; a directory named
// spm.model used to make the model load silently without its tokenizer.
TEST(HostileConfigTest, DirectoriesWhereFilesBelongAreErrors) {
  const HostileModels& models = HostileModels::Get();
  for (const auto& [model, file] : std::vector<std::pair<std::string, std::string>>{
           {"embedder", "spm.model"},
           {"t5", "spiece.model"},
           {"embedder", "tokenizer_config.json"},
           {"embedder", "special_tokens_map.json"},
           {"embedder", "modules.json"},
           {"embedder", "model.safetensors"},
           {"embedder", "2_Dense/model.safetensors"},
           {"sharded", "model.safetensors.index.json"},
       }) {
    SCOPED_TRACE(file);
    const std::string path = models.dir(model) + "/" + file;
    const std::string saved = path + ".saved";
    fs::rename(path, saved);
    fs::create_directory(path);
    const absl::Status s = LoadStatus(models.dir(model));
    fs::remove(path);
    fs::create_symlink(models.dir(model) + "/nothing-here", path);
    const absl::Status dangling = LoadStatus(models.dir(model));
    fs::remove(path);
    fs::rename(saved, path);
    ExpectInvalid(s, {file, "is a directory"});
    ExpectInvalid(dangling, {file, "symbolic link to nothing"});
  }
  // Absent files stay optional.
  EXPECT_TRUE(LoadStatus(models.dir("embedder"), EngineOptions{}, /*load_tokenizer=*/false).ok());
}

// Loads the model and runs one 32768-token batch of two with the address space capped a little
// above what the process holds; exits 0 when that is RESOURCE_EXHAUSTED without a backtrace.
[[noreturn]] void RunOutOfMemoryAndExit(const std::string& dir) {
  SetComputeThreads(1);
  EngineOptions options;
  options.max_length = kMaxSequenceLength;
  auto engine = Engine::Load(dir, options);
  if (!engine.ok()) std::_Exit(10);
  // The relative-position buckets alone of one 32768-token batch take over 1 GB.
  std::ifstream statm("/proc/self/statm");
  long pages = 0;
  statm >> pages;
  const rlim_t cap = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{256} << 20);
  rlimit limit{cap, cap};
  setrlimit(RLIMIT_AS, &limit);
  SequenceInput s;
  s.input_ids.assign(kMaxSequenceLength, 5);
  auto r = (*engine)->Run({s, s}, kOutputPooled);
  const std::string message(r.status().message());
  std::fprintf(stderr, "status: %s\n", r.status().ToString().c_str());
  const bool clean = r.status().code() == absl::StatusCode::kResourceExhausted &&
                     message.find("frame #") == std::string::npos &&
                     message.find("Exception raised from") == std::string::npos;
  std::_Exit(clean ? 0 : 11);
}

// A warm-up (or a batch) that cannot get its memory is RESOURCE_EXHAUSTED with torch's message
// and nothing of its C++ backtrace (which the server used to log as the reason it stopped). Run
// in a child process whose address space is capped.
TEST(HostileConfigDeathTest, AllocationFailureIsAStatusWithoutBacktrace) {
  // The child process re-runs this test from the start: it takes the parent's model directory
  // from the environment rather than making (and leaking) its own.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* inherited = std::getenv("RELSERVE_HOSTILE_EMBEDDER");
  // The T5 encoder: nothing bounds its length (the embedder's sentence_bert_config.json caps it
  // at max_seq_length 512).
  const std::string dir = inherited != nullptr ? inherited : HostileModels::Get().dir("t5");
  setenv("RELSERVE_HOSTILE_EMBEDDER", dir.c_str(), 1);
  EXPECT_EXIT(RunOutOfMemoryAndExit(dir), ::testing::ExitedWithCode(0), "RESOURCE_EXHAUSTED");
}

}  // namespace
}  // namespace relserve
