#!/usr/bin/python3
"""Times named entities for a batch against the same texts' plain forward on a running relserve
(bench-ner.sh starts it). Each pair runs alternately, A B A B, ROUNDS times; medians and their
ratio. A: POST /token-classification (16 texts in one request; aggregation simple, then first);
B: POST /embed with the same 16 texts (the same sequences through the same encoder). Besides the
wall time, each answer's own headers split it: x-inference-time (the batch the texts ran in),
x-queue-time and x-tokenization-time; the rest of x-total-time ("other") is what the call does
around the model, the entities' grouping for A, pooling's copy-out for B. Prints one JSON line
per comparison.
"""
import json
import statistics
import sys
import time

import requests

URL = sys.argv[1]
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5


def post(path, body):
    r = requests.post(URL + path, json=body, timeout=600)
    r.raise_for_status()
    return r


HEADERS = ["x-total-time", "x-inference-time", "x-queue-time", "x-tokenization-time"]
parts = {}  # path -> header -> [ms]


def timed(path, body, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        r = post(path, body)
        ms = {h: float(r.headers[h]) for h in HEADERS}
        ms["other"] = ms["x-total-time"] - ms["x-inference-time"] - ms["x-queue-time"] - ms["x-tokenization-time"]
        for h, v in ms.items():
            parts.setdefault(path, {}).setdefault(h, []).append(v)
    return (time.perf_counter() - start) / repeat


def compare(name, a, b, repeat, work):
    post(*a)
    post(*b)  # warm both
    parts.clear()
    ta, tb = [], []
    for _ in range(ROUNDS):
        ta.append(timed(a[0], a[1], repeat))
        tb.append(timed(b[0], b[1], repeat))
    ma, mb = statistics.median(ta), statistics.median(tb)
    print(json.dumps({"benchmark": name, "a": a[0], "b": b[0], "a_ms": round(ma * 1e3, 2), "b_ms": round(mb * 1e3, 2),
                      "a_over_b": round(ma / mb, 3), "a_min_max_ms": [round(min(ta) * 1e3, 2), round(max(ta) * 1e3, 2)],
                      "b_min_max_ms": [round(min(tb) * 1e3, 2), round(max(tb) * 1e3, 2)], "work": work,
                      "a_per_s": round(work["units"] / ma, 1),
                      "a_headers_median_ms": {h: round(statistics.median(v), 2) for h, v in parts[a[0]].items()},
                      "b_headers_median_ms": {h: round(statistics.median(v), 2) for h, v in parts[b[0]].items()}}),
          flush=True)


people = ["Marie Curie", "Pierre Curie", "Grace Hopper", "Alan Turing", "Ada Lovelace", "Ngozi Okonjo-Iweala",
          "Charles Babbage", "Katherine Johnson"]
places = ["Paris", "Geneva", "London", "Singapore", "New York", "Lagos", "Turin", "Kyoto"]
orgs = ["the United Nations", "the World Trade Organization", "Goldman Sachs", "the BBC", "CERN", "the Royal Society"]
texts = []
for i in range(16):
    p, q, l, o = people[i % 8], people[(i + 3) % 8], places[i % 8], orgs[i % 6]
    texts.append(f"{p} met {q} in {l} on {i + 2} March to discuss a report for {o}, which had asked both of them "
                 f"to review the findings before the meeting in {places[(i + 5) % 8]} next spring.")
tokens = sum(len(t) for t in post("/tokenize", {"model": "ner", "inputs": texts}).json())
for strategy in ["simple", "first"]:
    compare(f"entities ({strategy}) vs plain forward, 16 texts",
            ("/token-classification", {"model": "ner", "inputs": texts, "parameters": {"aggregation_strategy": strategy}}),
            ("/embed", {"model": "ner", "inputs": texts}),
            1, {"units": tokens, "unit": "tokens", "texts": len(texts)})
