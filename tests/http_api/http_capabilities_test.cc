// Zero-shot classification, long inputs embedded whole and the sparse and multi-vector routes,
// end to end over loopback against a RelserveServer with small models: each HTTP answer against
// the gRPC API's, and against what the pipeline's formulas give for the model's own logits and
// embeddings of the same inputs.
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::Connect;
using testing::TestModels;
using testing::TestServerConfig;

struct Reply {
  int status = 0;
  json body;
  std::string raw;
};

Reply Post(int port, const std::string& path, const json& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto r = client.Post(path.c_str(), body.dump(), "application/json");
  Reply out;
  if (!r) {
    out.raw = "transport error: " + httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.raw = r->body;
  if (!r->body.empty()) out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

class HttpCapabilitiesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerConfig config = TestServerConfig();
    // The NLI model first: TEI's routes without a model name go to it.
    config.models.insert(config.models.begin(), {"nli", TestModels::Get().dir("nli")});
    config.models.emplace_back("splade", TestModels::Get().dir("splade"));
    config.max_input_length = 64;  // long inputs are a few windows long
    auto server = RelserveServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  int http() const { return server_->http_port(); }

  // The NLI model's logits for (text, hypothesis) through gRPC Classify.
  std::vector<float> PairLogits(const std::string& text, const std::string& hypothesis) {
    v1::ClassifyRequest req;
    req.set_model("nli");
    req.add_inputs()->mutable_pair()->set_first(text);
    req.mutable_inputs(0)->mutable_pair()->set_second(hypothesis);
    v1::ClassifyResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Classify(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {resp.results(0).logits().begin(), resp.results(0).logits().end()};
  }
  // transformers' ZeroShotClassificationPipeline.postprocess over those logits: label -> score.
  std::map<std::string, double> PipelineScores(const std::string& text, const std::vector<std::string>& labels,
                                               const std::string& templ, bool multi) {
    std::vector<std::vector<float>> logits;
    for (const std::string& l : labels) {
      std::string h = templ;
      h.replace(h.find("{}"), 2, l);
      logits.push_back(PairLogits(text, h));
    }
    std::map<std::string, double> out;
    double z = 0;
    for (const auto& lg : logits) z += std::exp(double(lg[2]));
    for (size_t k = 0; k < labels.size(); ++k) {
      const double e = logits[k][2], c = logits[k][0];
      out[labels[k]] = (multi || labels.size() == 1) ? std::exp(e) / (std::exp(e) + std::exp(c)) : std::exp(e) / z;
    }
    return out;
  }

  std::unique_ptr<v1::Encoder::Stub> stub_ = Connect(server_->grpc_port());
  static RelserveServer* server_;
};
RelserveServer* HttpCapabilitiesTest::server_ = nullptr;

TEST_F(HttpCapabilitiesTest, ZeroShotRouteAnswersAsThePipeline) {
  const std::string text = "The new phone has a great camera and a long battery life.";
  const std::vector<std::string> labels = {"technology", "sports", "politics", "food"};
  for (bool multi : {false, true}) {
    const Reply r = Post(http(), "/zero-shot-classification",
                         {{"inputs", text}, {"parameters", {{"candidate_labels", labels}, {"multi_label", multi}}}});
    ASSERT_EQ(r.status, 200) << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw;
    EXPECT_EQ(r.body["sequence"], text);
    const auto want = PipelineScores(text, labels, "This example is {}.", multi);
    ASSERT_EQ(r.body["labels"].size(), labels.size());
    double previous = 2, total = 0;
    for (size_t j = 0; j < labels.size(); ++j) {
      const std::string label = r.body["labels"][j];
      const double score = r.body["scores"][j];
      EXPECT_NEAR(score, want.at(label), 1e-5) << label;
      EXPECT_LE(score, previous);
      previous = score;
      total += score;
    }
    if (!multi) {
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
}

TEST_F(HttpCapabilitiesTest, ZeroShotAtTheRootListsCommaLabelsAndEqualsGrpc) {
  // TEI's POST / serves the NLI model; candidate_labels make it zero-shot. A comma-separated
  // string is split and stripped as the pipeline does; a list of inputs answers a list.
  const Reply r = Post(http(), "/", {{"inputs", {"Il pleut depuis ce matin.", "Le marché a chuté."}},
                                     {"parameters", {{"candidate_labels", "weather , finance"},
                                                     {"hypothesis_template", "Ce texte parle de {}."}}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_TRUE(r.body.is_array()) << r.raw;
  ASSERT_EQ(r.body.size(), 2u);
  v1::ZeroShotClassifyRequest req;
  req.add_sequences("Il pleut depuis ce matin.");
  req.add_sequences("Le marché a chuté.");
  req.add_candidate_labels("weather");
  req.add_candidate_labels("finance");
  req.set_hypothesis_template("Ce texte parle de {}.");
  v1::ZeroShotClassifyResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub_->ZeroShotClassify(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.model(), "nli");
  for (int i = 0; i < 2; ++i) {
    const auto want = PipelineScores(req.sequences(i), {"weather", "finance"}, "Ce texte parle de {}.", false);
    ASSERT_EQ(resp.results(i).labels_size(), 2);
    for (int j = 0; j < 2; ++j) {
      const v1::LabelScore& l = resp.results(i).labels(j);
      EXPECT_EQ(r.body[i]["labels"][j], l.label());
      EXPECT_NEAR(r.body[i]["scores"][j].get<double>(), l.score(), 1e-6);
      EXPECT_NEAR(l.score(), want.at(l.label()), 1e-5);
      EXPECT_EQ(req.candidate_labels(l.index()), l.label());
    }
  }
  // Without candidate labels POST / still classifies the text (TEI's /predict).
  const Reply predict = Post(http(), "/", {{"inputs", "Il pleut."}});
  ASSERT_EQ(predict.status, 200) << predict.raw;
  EXPECT_TRUE(predict.body[0].contains("label")) << predict.raw;
}

TEST_F(HttpCapabilitiesTest, ZeroShotRefusalsAreClear) {
  auto bad = [&](const json& body, int status, const std::string& says) {
    const Reply r = Post(http(), "/zero-shot-classification", body);
    EXPECT_EQ(r.status, status) << body.dump() << " -> " << r.raw;
    EXPECT_THAT(r.raw, HasSubstr(says)) << body.dump();
  };
  bad({{"inputs", "x"}, {"parameters", {{"candidate_labels", json::array()}}}}, 400, "candidate_labels is empty");
  bad({{"inputs", "x"}, {"parameters", {{"candidate_labels", " , "}}}}, 400, "candidate_labels is empty");
  bad({{"inputs", "x"}}, 422, "parameters");
  bad({{"inputs", "x"}, {"parameters", {{"candidate_labels", {"a"}}, {"hypothesis_template", "no field"}}}}, 422,
      "has no {} for the label");
  bad({{"inputs", "x"}, {"parameters", {{"candidate_labels", {"a", 3}}}}}, 422, "candidate_labels[1] must be a string");
  bad({{"inputs", "x"}, {"model", "classifier"}, {"parameters", {{"candidate_labels", {"a"}}}}}, 424,
      "no entailment label");
  bad({{"inputs", "x"}, {"model", "embedder"}, {"parameters", {{"candidate_labels", {"a"}}}}}, 424,
      "no classification head");
}

TEST_F(HttpCapabilitiesTest, LongTextEmbeddedWholeIsTheTokenWeightedMeanOfItsWindows) {
  // The T5 encoder (mean pooling, no Normalize): a text of about 3 windows.
  std::string text;
  for (int i = 0; i < 120; ++i) text += "word" + std::to_string(i % 9) + " ";
  // Its tokens, whole, from TEI's /tokenize (no truncation there): ids then "</s>".
  const Reply tokens = Post(http(), "/tokenize", {{"inputs", text}, {"model", "t5"}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  std::vector<int32_t> ids;
  for (const json& t : tokens.body[0]) ids.push_back(t["id"]);
  v1::ListModelsResponse models;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  }
  int max_length = 0;
  for (const auto& m : models.models()) {
    if (m.name() == "t5") max_length = m.max_length();
  }
  ASSERT_GT(static_cast<int>(ids.size()), 2 * max_length);
  // Windows by hand: runs of max_length - 1 text tokens, each followed by </s>.
  const int32_t eos = ids.back();
  const int room = max_length - 1;
  std::vector<double> want;
  double total = 0;
  const int text_tokens = static_cast<int>(ids.size()) - 1;
  for (int start = 0; start < text_tokens; start += room) {
    v1::EmbedRequest req;
    req.set_model("t5");
    auto* t = req.add_inputs()->mutable_tokens();
    for (int i = start; i < std::min(start + room, text_tokens); ++i) t->add_ids(ids[i]);
    t->add_ids(eos);
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Embed(&ctx, req, &resp).ok());
    const double n = t->ids_size();
    if (want.empty()) want.assign(resp.embeddings(0).values_size(), 0.0);
    for (int j = 0; j < resp.embeddings(0).values_size(); ++j) want[j] += n * resp.embeddings(0).values(j);
    total += n;
  }
  for (double& x : want) x /= total;

  const Reply whole = Post(http(), "/embed", {{"inputs", text}, {"model", "t5"}, {"normalize", false},
                                              {"whole_input", true}});
  ASSERT_EQ(whole.status, 200) << whole.raw;
  const std::vector<float> got = whole.body[0];
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(got[j], want[j], 2e-5) << j;
  // Without whole_input the over-long text is refused (--auto-truncate false), as before: 413,
  // TEI's status for it.
  EXPECT_EQ(Post(http(), "/embed", {{"inputs", text}, {"model", "t5"}}).status, 413);
  // OpenAI's route takes the same extension.
  const Reply openai = Post(http(), "/v1/embeddings", {{"input", text}, {"model", "t5"}, {"whole_input", true}});
  ASSERT_EQ(openai.status, 200) << openai.raw;
  EXPECT_EQ(openai.body["usage"]["prompt_tokens"].get<int64_t>(), static_cast<int64_t>(total));
}

TEST_F(HttpCapabilitiesTest, SparseAndMultiVectorRoutesWithoutHeads) {
  // A model without a sparse head: TEI's 424.
  const Reply sparse = Post(http(), "/embed_sparse", {{"inputs", "hello"}, {"model", "embedder"}});
  EXPECT_EQ(sparse.status, 424) << sparse.raw;
  EXPECT_THAT(sparse.raw, HasSubstr("has no sparse head"));
  // Without a projection, multi-vector output is every token's last hidden state, normalised.
  const Reply mv = Post(http(), "/embed_multi_vector", {{"inputs", {"hello world"}}, {"model", "t5"}});
  ASSERT_EQ(mv.status, 200) << mv.raw;
  const Reply all = Post(http(), "/embed_all", {{"inputs", {"hello world"}}, {"model", "t5"}});
  ASSERT_EQ(all.status, 200) << all.raw;
  ASSERT_EQ(mv.body[0].size(), all.body[0].size());
  for (size_t t = 0; t < all.body[0].size(); ++t) {
    const std::vector<float> raw = all.body[0][t], unit = mv.body[0][t];
    double norm = 0;
    for (float x : raw) norm += double(x) * x;
    norm = std::sqrt(norm);
    for (size_t j = 0; j < raw.size(); ++j) EXPECT_NEAR(unit[j], raw[j] / norm, 1e-5);
  }
  // gRPC refuses the outputs a model has no head for, before computing.
  v1::EmbedRequest req;
  req.set_model("embedder");
  req.add_inputs()->set_text("hello");
  req.set_return_sparse(true);
  v1::EmbedResponse resp;
  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->Embed(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(HttpCapabilitiesTest, SpladeSparseVectorsOverHttpAndGrpcAndWholeInputsTakeTheMaxOverWindows) {
  const std::vector<std::string> texts = {"the quick brown fox", "jumps over the lazy dog again and again"};
  const Reply r = Post(http(), "/embed_sparse", {{"inputs", texts}, {"model", "splade"}});
  ASSERT_EQ(r.status, 200) << r.raw;
  v1::EmbedRequest req;
  req.set_model("splade");
  for (const std::string& t : texts) req.add_inputs()->set_text(t);
  req.set_return_sparse(true);
  v1::EmbedResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Embed(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(r.body.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const v1::Embedding& e = resp.embeddings(i);
    ASSERT_GT(e.sparse_size(), 0);
    ASSERT_EQ(r.body[i].size(), static_cast<size_t>(e.sparse_size()));
    for (int k = 0; k < e.sparse_size(); ++k) {
      EXPECT_EQ(r.body[i][k]["index"], e.sparse(k).index());
      EXPECT_NEAR(r.body[i][k]["value"].get<double>(), e.sparse(k).value(), 1e-6);
      EXPECT_GT(e.sparse(k).value(), 0);
      if (k > 0) {
        EXPECT_LT(e.sparse(k - 1).index(), e.sparse(k).index());
      }
    }
    EXPECT_GT(e.values_size(), 0);  // the dense embedding comes with it
  }
  // A long text in windows: each id's weight is its largest over the windows, computed here
  // from the windows sent one by one as token ids.
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog ";
  const Reply tokens = Post(http(), "/tokenize", {{"inputs", text}, {"model", "splade"}});
  ASSERT_EQ(tokens.status, 200) << tokens.raw;
  std::vector<int32_t> ids;
  for (const json& t : tokens.body[0]) ids.push_back(t["id"]);
  const int room = 64 - 2;
  std::map<int32_t, float> want;
  for (size_t start = 1; start + 1 < ids.size(); start += room) {
    json window = json::array({ids.front()});
    for (size_t i = start; i < std::min(start + room, ids.size() - 1); ++i) window.push_back(ids[i]);
    window.push_back(ids.back());
    const Reply w = Post(http(), "/embed_sparse", {{"inputs", {window}}, {"model", "splade"}});
    ASSERT_EQ(w.status, 200) << w.raw;
    for (const json& v : w.body[0]) {
      float& best = want[v["index"].get<int32_t>()];
      best = std::max(best, v["value"].get<float>());
    }
  }
  const Reply whole = Post(http(), "/embed_sparse", {{"inputs", text}, {"model", "splade"}, {"whole_input", true}});
  ASSERT_EQ(whole.status, 200) << whole.raw;
  ASSERT_EQ(whole.body[0].size(), want.size());
  for (const json& v : whole.body[0]) EXPECT_NEAR(v["value"].get<double>(), want.at(v["index"].get<int32_t>()), 1e-6);
}

TEST_F(HttpCapabilitiesTest, ListModelsNamesTheNewCapabilities) {
  v1::ListModelsResponse models;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
  for (const auto& m : models.models()) {
    EXPECT_EQ(m.entailment_label(), m.name() == "nli" ? "entailment" : "") << m.name();
    EXPECT_EQ(m.sparse(), m.name() == "splade" ? "splade" : "") << m.name();
  }
}

}  // namespace
}  // namespace relserve
