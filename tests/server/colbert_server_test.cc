// ColBERT checkpoints served end to end (tests/data/colbert: PyLate and Stanford layouts, with
// every query x document MaxSim score of the reference): MaxSim scores from TEI's /rerank,
// /v1/rerank, /v2/rerank and gRPC Rerank, sorted as each route sorts; the query and document
// multi-vectors from /embed_multi_vector and gRPC Embed, which give the same scores.
#include <httplib.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/tokenizer.h"
#include "tests/server/server_test_env.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;
using testing::Connect;
using testing::TestModels;
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
      worst = std::max(worst, testing::AbsDiff(mv.values(k), d.body[1][k / dim][k % dim].get<double>()));
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


// A DeBERTa-v3 backbone (the test embedder, SentencePiece vocabulary) in PyLate's layout, with
// the switches the fixtures leave at one value, each as pylate/models/colbert.py reads it: empty
// prefixes (no marker), no query expansion (a query is its own tokens, all scored), the default
// skiplist (string.punctuation, each word converted as one token, the unknown token where the
// vocabulary lacks it), lengths 12 and 20 (texts cut with [SEP] kept), a Dense with a bias. The
// expected scores are computed here in double: the model's token states for those ids (gRPC
// EmbedTokens), through the projection, L2-normalised, MaxSim.
void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::vector<float> Pattern(size_t n, double phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(0.3 * std::sin(0.37 * static_cast<double>(i) + phase));
  return v;
}

// A safetensors file of float32 tensors, as safetensors.torch.save_file writes it.
void WriteSafetensors(const std::string& path,
                      const std::vector<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>>& t) {
  json header = json::object();
  size_t offset = 0;
  for (const auto& [name, tensor] : t) {
    const size_t bytes = tensor.second.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", tensor.first}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out << h;
  for (const auto& [name, tensor] : t) {
    out.write(reinterpret_cast<const char*>(tensor.second.data()),
              static_cast<std::streamsize>(tensor.second.size() * sizeof(float)));
  }
}

TEST(ColbertOtherBackboneTest, DebertaInPyLatesLayoutWithoutMarkersOrExpansion) {
  constexpr int kHidden = 32, kDim = 8, kQueryLength = 12, kDocumentLength = 20;
  const std::string dir = (fs::temp_directory_path() / ("relserve-colbert-deberta-" + std::to_string(getpid()))).string();
  fs::remove_all(dir);
  fs::copy(TestModels::Get().dir("embedder"), dir, fs::copy_options::recursive);
  WriteText(dir + "/modules.json", R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}])");
  WriteText(dir + "/config_sentence_transformers.json",
            R"({"model_type": "ColBERT", "similarity_fn_name": "MaxSim", "query_prefix": "", "document_prefix": "",
                "query_length": 12, "document_length": 20, "do_query_expansion": false})");
  fs::create_directories(dir + "/1_Dense");
  WriteText(dir + "/1_Dense/config.json", R"({"in_features": 32, "out_features": 8, "bias": true,
    "activation_function": "torch.nn.modules.linear.Identity", "use_residual": false})");
  const std::vector<float> weight = Pattern(kDim * kHidden, 0.1), bias = Pattern(kDim, 2.0);
  WriteSafetensors(dir + "/1_Dense/model.safetensors",
                   {{"linear.weight", {{kDim, kHidden}, weight}}, {"linear.bias", {{kDim}, bias}}});

  ServerConfig config = TestServerConfig();
  config.models = {{"cb_deberta", dir}};
  auto server = RelserveServer::Start(config);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Connect((*server)->grpc_port());
  auto tokenizer = Tokenizer::Load(dir, TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::vector<int32_t> skiplist;
  for (char ch : std::string("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")) {
    const int id = (*tokenizer)->TokenToId(std::string(1, ch));
    skiplist.push_back(id >= 0 ? id : (*tokenizer)->unk_id());
  }

  // A side's ids by PyLate's rule, its kept positions' unit vectors, in double.
  auto vectors = [&](const std::string& text, int length, bool document) {
    std::vector<int32_t> ids = *(*tokenizer)->EncodeRaw(text);
    ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(length - 2)));
    ids.insert(ids.begin(), (*tokenizer)->cls_id());
    ids.push_back((*tokenizer)->sep_id());
    v1::EmbedTokensRequest req;
    req.set_model("cb_deberta");
    auto* t = req.add_inputs()->mutable_tokens();
    for (int32_t id : ids) t->add_ids(id);
    v1::EmbedTokensResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub->EmbedTokens(&ctx, req, &resp).ok());
    std::vector<std::vector<double>> out;
    const auto& states = resp.sequences(0);
    for (size_t p = 0; p < ids.size(); ++p) {
      if (document && std::find(skiplist.begin(), skiplist.end(), ids[p]) != skiplist.end()) continue;
      std::vector<double> v(kDim);
      double norm = 0;
      for (int o = 0; o < kDim; ++o) {
        double x = bias[o];
        for (int k = 0; k < kHidden; ++k) x += double(weight[o * kHidden + k]) * states.values(static_cast<int>(p) * kHidden + k);
        v[o] = x;
        norm += x * x;
      }
      for (double& x : v) x /= std::sqrt(norm);
      out.push_back(std::move(v));
    }
    return out;
  };
  auto maxsim = [](const std::vector<std::vector<double>>& q, const std::vector<std::vector<double>>& d) {
    double total = 0;
    for (const auto& a : q) {
      double best = -INFINITY;
      for (const auto& b : d) {
        double dot = 0;
        for (size_t k = 0; k < a.size(); ++k) dot += a[k] * b[k];
        best = std::max(best, dot);
      }
      total += best;
    }
    return total;
  };
  const std::vector<std::string> queries = {"which model reads positions as distances?",
                                            "a long request about serving many small encoder models on one card"};
  const std::vector<std::string> documents = {"A lazy dog sleeps, in the warm sun!",
                                              "Shaw et al. clip relative distances at k; Transformer-XL re-parameterises it.",
                                              "50% off!!! [sale] ~ today & tomorrow"};
  for (const std::string& query : queries) {
    const auto q = vectors(query, kQueryLength, false);
    const Reply r = Post((*server)->http_port(), "/v1/rerank",
                         {{"model", "cb_deberta"}, {"query", query}, {"documents", documents}});
    ASSERT_EQ(r.status, 200) << r.raw;
    ASSERT_EQ(r.body["results"].size(), documents.size());
    double previous = INFINITY;
    for (const json& hit : r.body["results"]) {
      const int index = hit["index"].get<int>();
      const double want = maxsim(q, vectors(documents[index], kDocumentLength, true));
      EXPECT_NEAR(hit["relevance_score"].get<double>(), want, kTolerance) << query << " x " << index;
      EXPECT_LE(hit["relevance_score"].get<double>(), previous);
      previous = hit["relevance_score"].get<double>();
    }
    // The query's own vectors: one per token, nothing padded.
    const Reply mv = Post((*server)->http_port(), "/embed_multi_vector",
                          {{"model", "cb_deberta"}, {"inputs", query}, {"input_type", "search_query"}});
    ASSERT_EQ(mv.status, 200) << mv.raw;
    EXPECT_EQ(mv.body[0].size(), q.size());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace relserve
