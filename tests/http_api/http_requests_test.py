#!/usr/bin/env python3
"""Every route of relserve's HTTP API called with Python's requests, as RAG frameworks call it.

Arguments: the server's base URL, relserve-client's (gRPC) JSON answer for one text, and
relserve-model's offline embedding of the same text.
"""
import base64
import json
import struct
import sys
import unittest

import requests

URL = GRPC = OFFLINE = None
TEXT = "What is relserve?"


def close(a, b, tol=1e-6):
    return len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) <= tol


class HttpRoutes(unittest.TestCase):
    def post(self, path, body, status=200):
        r = requests.post(URL + path, json=body, timeout=60)
        self.assertEqual(r.status_code, status, r.text)
        self.assertEqual(r.headers["Content-Type"], "application/json")
        return r.json()

    def test_embeddings_equal_grpc_and_offline(self):
        grpc = GRPC["embeddings"][0]["values"]
        tei = self.post("/embed", {"inputs": TEXT})[0]
        self.assertTrue(close(tei, grpc), (tei[:4], grpc[:4]))
        self.assertTrue(close(tei, OFFLINE, 1e-5))
        openai = self.post("/v1/embeddings", {"input": [TEXT], "model": "embedder"})
        self.assertEqual(set(openai), {"object", "data", "model", "usage"})
        self.assertTrue(close(openai["data"][0]["embedding"], grpc))
        b64 = self.post("/v1/embeddings", {"input": TEXT, "encoding_format": "base64"})
        raw = base64.b64decode(b64["data"][0]["embedding"])
        floats = list(struct.unpack("<%df" % (len(raw) // 4), raw))
        self.assertEqual(floats, [struct.unpack("<f", struct.pack("<f", x))[0] for x in openai["data"][0]["embedding"]])

    def test_rerank_shapes(self):
        docs = ["a model server", "a recipe for soup", "relative attention"]
        cohere = self.post("/v1/rerank", {"model": "reranker", "query": "what is relserve?", "documents": docs,
                                          "return_documents": True})
        self.assertEqual(len(cohere["results"]), 3)
        scores = [r["relevance_score"] for r in cohere["results"]]
        self.assertEqual(scores, sorted(scores, reverse=True))
        for r in cohere["results"]:
            self.assertEqual(r["document"]["text"], docs[r["index"]])
        # TEI's /rerank goes to the default model (an embedder here): no classification head.
        err = self.post("/rerank", {"query": "q", "texts": ["d"]}, status=424)
        self.assertEqual(err["error_type"], "Backend")

    def test_tokenize_info_models_health(self):
        tokens = self.post("/tokenize", {"inputs": [TEXT]})[0]
        self.assertEqual("".join(t["text"] for t in tokens if not t["special"]), TEXT)
        info = requests.get(URL + "/info", timeout=10).json()
        self.assertEqual(info["served_model_name"], "embedder")
        self.assertTrue(info["model_id"].endswith("/embedder"), info["model_id"])  # as --model gave it
        models = requests.get(URL + "/v1/models", timeout=10).json()
        self.assertEqual([m["id"] for m in models["data"]], ["embedder", "reranker"])
        health = requests.get(URL + "/health", timeout=10)
        self.assertEqual((health.status_code, health.text), (200, ""))

    def test_drop_in_routes(self):
        """The routes TEI's, OpenAI's, Cohere's and Infinity's clients call, as those clients send them."""
        grpc = GRPC["embeddings"][0]["values"]
        # TEI's POST / and SageMaker's /invocations embed with an embedding model; GET / and /ping.
        for path in ("/", "/invocations"):
            self.assertTrue(close(self.post(path, {"inputs": TEXT})[0], grpc))
        for path in ("/", "/ping"):
            self.assertEqual(requests.get(URL + path, timeout=10).status_code, 200)
        # An OpenAI client whose base URL is the server's root.
        root = self.post("/embeddings", {"input": [TEXT], "model": "embedder"})
        self.assertTrue(close(root["data"][0]["embedding"], grpc))
        # TEI's headers, in whole milliseconds.
        r = requests.post(URL + "/embed", json={"inputs": TEXT}, timeout=60)
        for h in ("x-compute-time", "x-compute-characters", "x-compute-tokens", "x-total-time",
                  "x-tokenization-time", "x-queue-time", "x-inference-time"):
            self.assertTrue(r.headers[h].isdigit(), (h, r.headers.get(h)))
        self.assertEqual(r.headers["x-compute-characters"], str(len(TEXT)))
        # /tokenize and /decode round trip ("?" is the test vocabulary's [UNK], special, so skipped).
        ids = [t["id"] for t in self.post("/tokenize", {"inputs": "what is a model server"})[0]]
        self.assertEqual(self.post("/decode", {"ids": [ids, ids[1:-1]]}), ["what is a model server"] * 2)
        # Cohere v2 and Infinity.
        docs = ["a model server", "a recipe for soup"]
        v2 = self.post("/v2/rerank", {"model": "reranker", "query": "what is relserve?", "documents": docs})
        self.assertEqual(sorted(r["index"] for r in v2["results"]), [0, 1])
        emb = self.post("/v2/embed", {"model": "embedder", "texts": [TEXT], "input_type": "search_query",
                                      "embedding_types": ["float", "ubinary"]})
        self.assertTrue(close(emb["embeddings"]["float"][0], grpc))
        self.assertEqual(len(emb["embeddings"]["ubinary"][0]), (len(grpc) + 7) // 8)
        inf = self.post("/rerank", {"model": "reranker", "query": "what is relserve?", "documents": docs})
        self.assertEqual(inf["object"], "rerank")
        self.assertEqual(requests.get(URL + "/api-doc/openapi.json", timeout=10).json()["openapi"], "3.0.3")
        self.assertIn("relserve_requests_total", requests.get(URL + "/metrics", timeout=10).text)

    def test_bad_inputs(self):
        r = requests.post(URL + "/embed", data=b'{"inputs": "\xff"}', timeout=10)
        self.assertEqual(r.status_code, 400)
        self.assertIn("UTF-8", r.json()["error"])
        self.assertEqual(self.post("/embed", {"inputs": []}, status=400)["error_type"], "Empty")
        err = self.post("/v1/embeddings", {"input": "x", "dimensions": "8"}, status=422)["error"]
        self.assertEqual(err["param"], "dimensions")
        self.assertEqual(err["type"], "invalid_request_error")
        r = requests.post(URL + "/embed", data=b'{"inputs": "a", "dimensions": 1e400}', timeout=10)
        self.assertEqual(r.status_code, 400)
        r = requests.post(URL + "/embed", data=b" " * (17 << 20), timeout=30)
        self.assertEqual(r.status_code, 413)
        self.assertIn("--max-message-bytes", r.json()["error"])


if __name__ == "__main__":
    URL = sys.argv[1]
    GRPC = json.load(open(sys.argv[2]))
    OFFLINE = json.loads(open(sys.argv[3]).readline())["embedding"]
    unittest.main(argv=sys.argv[:1], verbosity=2)
