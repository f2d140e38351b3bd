// ColBERT checkpoints served end to end (tests/data/colbert: PyLate and Stanford layouts, with
// every query x document MaxSim score of the reference): MaxSim scores from TEI's /rerank,
// /v1/rerank, /v2/rerank and gRPC Rerank, sorted as each route sorts; the query and document
// multi-vectors from /embed_multi_vector and gRPC Embed, which give the same scores.
#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;
using testing::Connect;
using testing::TestServerConfig;

constexpr double kTolerance = 1e-5;  // a float32 implementation against the float64 reference

const json& Expected() {
  static const json* expected = [] {
    std::ifstream in(RELSERVE_TEST_DATA_DIR "/colbert/colbert_expected.json");
    return new json(json::parse(in));
  }();
  return *expected;
}

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
    out.raw = "transport error";
    return out;
  }
  out.status = r->status;
  out.raw = r->body;
  out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  return out;
}

// Served under the names of colbert_expected.json's "models".
const std::vector<std::pair<std::string, std::string>> kModels = {{"cb_pylate", "colbert_pylate"},
                                                                  {"cb_stanford", "colbert_stanford"}};

class ColbertServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerConfig config = TestServerConfig();
    config.models.clear();
    for (const auto& [name, dir] : kModels) {
      config.models.emplace_back(name, std::string(RELSERVE_TEST_DATA_DIR "/colbert/") + dir);
    }
    auto server = RelserveServer::Start(config);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  int http() const { return server_->http_port(); }
  static const json& Model(const std::string& name) { return Expected()["models"][name]; }
  static std::vector<std::string> Texts(const char* side) { return Expected()[side].get<std::vector<std::string>>(); }
  static RelserveServer* server_;
};
RelserveServer* ColbertServerTest::server_ = nullptr;

// Each query against every document, on every rerank route: the reference's scores, best first
// (the reference's ranking).
TEST_F(ColbertServerTest, RerankRoutesAnswerMaxSimScores) {
  const std::vector<std::string> queries = Texts("queries"), documents = Texts("documents");
  for (const auto& [name, dir] : kModels) {
    const json& scores = Model(name)["scores"];
    const json& ranking = Model(name)["ranking"];
    for (size_t q = 0; q < queries.size(); ++q) {
      const std::string what = name + " query " + std::to_string(q);
      std::vector<std::pair<int, double>> got;
      const Reply tei = Post(http(), "/rerank", {{"model", name}, {"query", queries[q]}, {"texts", documents}});
      ASSERT_EQ(tei.status, 200) << what << ": " << tei.raw;
      for (const json& hit : tei.body) got.emplace_back(hit["index"].get<int>(), hit["score"].get<double>());
      for (const char* path : {"/v1/rerank", "/v2/rerank"}) {
        const Reply r = Post(http(), path, {{"model", name}, {"query", queries[q]}, {"documents", documents}});
        ASSERT_EQ(r.status, 200) << what << " " << path << ": " << r.raw;
        for (const json& hit : r.body["results"]) {
          got.emplace_back(hit["index"].get<int>(), hit["relevance_score"].get<double>());
        }
      }
      v1::RerankRequest req;
      req.set_model(name);
      req.set_query(queries[q]);
      for (const std::string& d : documents) req.add_documents(d);
      v1::RerankResponse resp;
      grpc::ClientContext ctx;
      ASSERT_TRUE(Connect(server_->grpc_port())->Rerank(&ctx, req, &resp).ok()) << what;
      for (const auto& hit : resp.results()) got.emplace_back(hit.index(), hit.score());
      ASSERT_EQ(got.size(), 4 * documents.size()) << what;
      for (size_t k = 0; k < got.size(); ++k) {
        const size_t rank = k % documents.size();
        EXPECT_EQ(got[k].first, ranking[q][rank].get<int>()) << what << ", answer " << k / documents.size();
        EXPECT_NEAR(got[k].second, scores[q][got[k].first].get<double>(), kTolerance) << what;
      }
    }
    // top_n and return_documents as for a cross-encoder.
    const Reply top = Post(http(), "/v1/rerank", {{"model", name}, {"query", queries[0]}, {"documents", documents},
                                                  {"top_n", 2}, {"return_documents", true}});
    ASSERT_EQ(top.status, 200) << top.raw;
    ASSERT_EQ(top.body["results"].size(), 2u);
    const int best = ranking[0][0].get<int>();
    EXPECT_EQ(top.body["results"][0]["index"], best);
    EXPECT_EQ(top.body["results"][0]["document"]["text"], documents[best]);
  }
}

double MaxSimOf(const json& query, const json& document) {
  double total = 0;
  for (const json& q : query) {
    double best = -INFINITY;
    for (const json& d : document) {
      double dot = 0;
      for (size_t k = 0; k < q.size(); ++k) dot += q[k].get<double>() * d[k].get<double>();
      best = std::max(best, dot);
    }
    total += best;
  }
  return total;
}

// The multi-vectors themselves: a query's (prompt_name "query") and a document's (input_type
// "document"), as many as the reference scores, unit vectors of the projection's width, whose
// MaxSim is the reference's score; gRPC Embed gives the same.
TEST_F(ColbertServerTest, QueryAndDocumentMultiVectors) {
  const std::vector<std::string> queries = Texts("queries"), documents = Texts("documents");
  for (const auto& [name, dir] : kModels) {
    const json& model = Model(name);
    const int dim = model["settings"]["dim"].get<int>();
    const Reply q = Post(http(), "/embed_multi_vector", {{"model", name}, {"inputs", queries}, {"prompt_name", "query"}});
    ASSERT_EQ(q.status, 200) << q.raw;
    const Reply d = Post(http(), "/embed_multi_vector",
                         {{"model", name}, {"inputs", documents}, {"input_type", "document"}});
    ASSERT_EQ(d.status, 200) << d.raw;
    for (size_t i = 0; i < queries.size(); ++i) {
      ASSERT_EQ(q.body[i].size(), model["queries"][i]["scored_positions"].size()) << name << " query " << i;
      for (const json& v : q.body[i]) {
        ASSERT_EQ(v.size(), static_cast<size_t>(dim));
        double norm = 0;
        for (const json& x : v) norm += x.get<double>() * x.get<double>();
        EXPECT_NEAR(norm, 1.0, 1e-5);
      }
    }
    for (size_t j = 0; j < documents.size(); ++j) {
      EXPECT_EQ(d.body[j].size(), model["documents"][j]["scored_positions"].size()) << name << " document " << j;
    }
    for (size_t i = 0; i < queries.size(); ++i) {
      for (size_t j = 0; j < documents.size(); ++j) {
        EXPECT_NEAR(MaxSimOf(q.body[i], d.body[j]), model["scores"][i][j].get<double>(), kTolerance)
            << name << " " << i << " x " << j;
      }
    }
    // gRPC: the same vectors for the same side.
    v1::EmbedRequest req;
    req.set_model(name);
    req.set_return_multi_vector(true);
    req.set_prompt_name("document");
    req.add_inputs()->set_text(documents[1]);
    v1::EmbedResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(Connect(server_->grpc_port())->Embed(&ctx, req, &resp).ok());
    const auto& mv = resp.embeddings(0).multi_vector();
    ASSERT_EQ(mv.dim(), dim);
    ASSERT_EQ(static_cast<size_t>(mv.count()), d.body[1].size());
    double worst = 0;
    for (int k = 0; k < mv.values_size(); ++k) {
      worst = std::max(worst, std::fabs(mv.values(k) - d.body[1][k / dim][k % dim].get<double>()));
    }
    EXPECT_LT(worst, 1e-6);
  }
  // A side that is neither is refused, naming the field.
  const Reply bad = Post(http(), "/embed_multi_vector",
                         {{"model", "cb_pylate"}, {"inputs", "x"}, {"input_type", "classification"}});
  EXPECT_EQ(bad.status, 422) << bad.raw;
  EXPECT_THAT(bad.raw, HasSubstr("classification"));
}

// Chunked rerank is a cross-encoder's: asked of a ColBERT model it is refused, naming the field.
TEST_F(ColbertServerTest, ChunkingIsForCrossEncoders) {
  const Reply r = Post(http(), "/v2/rerank", {{"model", "cb_stanford"}, {"query", "q"}, {"documents", {"d"}},
                                              {"chunk_documents", true}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_THAT(r.raw, HasSubstr("chunk_documents"));
}

}  // namespace
}  // namespace relserve
