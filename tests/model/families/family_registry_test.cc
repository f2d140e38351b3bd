// Every registered family: a model loader beside its descriptor, model_types and create
// variants that name one family each, and a directory `create` writes for every variant that
// the engine loads with nothing left over (the layout the creator writes is the loader's).
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/model/families/family_models.h"
#include "server/model/families/family_registry.h"
#include "server/tools/model_creator.h"
#include "tests/model/switch_test_support.h"

namespace relserve {
namespace {

TEST(FamilyRegistryTest, EveryDescriptorHasAModelAndUniqueNames) {
  std::set<std::string> names, model_types, variants;
  for (const FamilyDescriptor* family : AllFamilies()) {
    EXPECT_TRUE(names.insert(family->name()).second) << family->name();
    EXPECT_TRUE(HasFamilyModel(*family)) << family->name() << " has no loader in family_models.cc";
    for (const std::string& t : family->model_types()) {
      EXPECT_TRUE(model_types.insert(t).second) << t;
      EXPECT_EQ(FindFamilyByModelType(t), family) << t;
      EXPECT_FALSE(family->architectures(t).empty()) << t;
    }
    EXPECT_FALSE(family->create_variants().empty()) << family->name();
    for (const std::string& v : family->create_variants()) {
      EXPECT_TRUE(variants.insert(v).second) << v;
      EXPECT_EQ(FindFamilyByCreateVariant(v), family) << v;
    }
  }
  EXPECT_EQ(FindFamilyByModelType("gpt2"), nullptr);
  EXPECT_EQ(FindFamilyByCreateVariant("gpt2"), nullptr);
}

// The registry is the family folders (server/model/families/CMakeLists.txt finds them): each
// folder with a CMakeLists.txt is one family, named as its folder with '-' for '_'.
TEST(FamilyRegistryTest, EveryFamilyFolderIsRegistered) {
  const std::filesystem::path families =
      std::filesystem::path(RELSERVE_TEST_DATA_DIR) / ".." / ".." / "server" / "model" / "families";
  std::set<std::string> folders, registered;
  for (const auto& entry : std::filesystem::directory_iterator(families)) {
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "CMakeLists.txt")) {
      std::string name = entry.path().filename().string();
      std::replace(name.begin(), name.end(), '_', '-');
      folders.insert(name);
    }
  }
  for (const FamilyDescriptor* family : AllFamilies()) registered.insert(family->name());
  EXPECT_GE(folders.size(), 5u);
  EXPECT_EQ(folders, registered);
}

TEST(FamilyRegistryTest, EveryCreateVariantLoadsWithItsLayout) {
  testing::ScratchDir scratch;
  for (const FamilyDescriptor* family : AllFamilies()) {
    for (const std::string& variant : family->create_variants()) {
      for (int labels : {0, 3}) {
        CreateModelOptions o;
        o.family = variant;
        o.hidden = 16;
        o.layers = 1;
        o.heads = 2;
        o.intermediate = 32;
        o.vocab = 64;
        o.num_labels = labels;
        auto config = BuildModelConfig(o);
        if (labels > 0 && !config.ok()) continue;  // a family without a classification head
        ASSERT_TRUE(config.ok()) << variant << ": " << config.status();
        const std::string dir = scratch.Path(variant + std::to_string(labels));
        ASSERT_TRUE(CreateModelDirectory(o, dir).ok()) << variant;
        auto parsed = LoadModelConfig(dir);
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        EXPECT_EQ(parsed->family, family) << variant;
        EXPECT_EQ(parsed->hidden_size, 16) << variant;
        EXPECT_EQ(parsed->num_layers, 1) << variant;
        EXPECT_EQ(parsed->vocab_size, 64) << variant;
        EXPECT_GT(family->FlopsPerToken(*parsed, 8), 0) << variant;
        auto engine = Engine::Load(dir, EngineOptions{});
        ASSERT_TRUE(engine.ok()) << variant << ": " << engine.status();
        EXPECT_EQ((*engine)->info().labels.size(), static_cast<size_t>(labels)) << variant;
        auto out = (*engine)->ForwardPadded(testing::MakeBatch({5, 3}, 64, 1), false);
        ASSERT_TRUE(out.ok()) << variant << ": " << out.status();
      }
    }
  }
}

// The BERT family's count: projections, feed-forward, q.k and p.v per layer; the relative terms
// over the 2L - 1 distance rows a length reaches (once for relative_key, twice for
// relative_key_query); ELECTRA's embeddings_project once per token.
TEST(FamilyRegistryTest, BertFlopsPerToken) {
  auto flops = [](const nlohmann::json& overrides) {
    nlohmann::json j = {{"model_type", "bert"}, {"hidden_size", 32}, {"num_attention_heads", 4},
                        {"num_hidden_layers", 2}, {"intermediate_size", 64}, {"vocab_size", 100}};
    j.update(overrides);
    auto config = ParseModelConfig(j, "config.json");
    EXPECT_TRUE(config.ok()) << config.status();
    return config.ok() ? config->family->FlopsPerToken(*config, 10) : 0.0;
  };
  const double per_layer = 2 * 32 * 3 * 32 + 2 * 32 * 32 + 2 * 2 * 32 * 64 + 2 * 2 * 10 * 32;
  const double relative = 2 * 32 * 19;  // 2L - 1 = 19 distance rows
  EXPECT_DOUBLE_EQ(flops(nlohmann::json::object()), 2 * per_layer);
  EXPECT_DOUBLE_EQ(flops({{"position_embedding_type", "relative_key"}}), 2 * (per_layer + relative));
  EXPECT_DOUBLE_EQ(flops({{"position_embedding_type", "relative_key_query"}}), 2 * (per_layer + 2 * relative));
  EXPECT_DOUBLE_EQ(flops({{"model_type", "electra"}, {"embedding_size", 16}}), 2 * per_layer + 2 * 16 * 32);
}

// vLLM's reading of config.json: is_matryoshka, and matryoshka_dimensions, which makes the
// model Matryoshka-trained; nothing said leaves both unset.
TEST(FamilyRegistryTest, MatryoshkaKeys) {
  auto parse = [](const nlohmann::json& overrides) {
    nlohmann::json j = {{"model_type", "bert"}, {"hidden_size", 32}, {"num_attention_heads", 4},
                        {"num_hidden_layers", 2}, {"intermediate_size", 64}, {"vocab_size", 100}};
    j.update(overrides);
    return ParseModelConfig(j, "config.json");
  };
  auto unsaid = parse(nlohmann::json::object());
  ASSERT_TRUE(unsaid.ok()) << unsaid.status();
  EXPECT_FALSE(unsaid->is_matryoshka.has_value());
  EXPECT_TRUE(unsaid->matryoshka_dimensions.empty());
  auto no = parse({{"is_matryoshka", false}});
  ASSERT_TRUE(no.ok()) << no.status();
  EXPECT_EQ(no->is_matryoshka, std::optional<bool>(false));
  auto listed = parse({{"matryoshka_dimensions", {64, 128}}});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->is_matryoshka, std::optional<bool>(true));
  EXPECT_EQ(listed->matryoshka_dimensions, (std::vector<int>{64, 128}));
  for (const nlohmann::json& bad : {nlohmann::json{{"matryoshka_dimensions", {0}}},
                                    nlohmann::json{{"matryoshka_dimensions", "64"}},
                                    nlohmann::json{{"is_matryoshka", "yes"}}}) {
    auto r = parse(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad.dump();
    EXPECT_NE(std::string(r.status().message()).find("matryoshka"), std::string::npos) << r.status();
  }
}

}  // namespace
}  // namespace relserve
