#!/usr/bin/python3
"""Times zero-shot classification, long inputs embedded whole and sparse output against a
baseline doing the same model work another way, on a running relserve (bench-capabilities.sh
starts it). Each pair runs alternately, A B A B, ROUNDS times; medians and their ratio.

  zero-shot: POST /zero-shot-classification, one text x 10 labels, against TEI's POST /predict
             with the same 10 (text, hypothesis) pairs in one request (the same 10 sequences).
  long:      an 8k-token text, POST /embed with whole_input, against /embed of the same windows
             sent as token ids in one request (the same sequences, tokenized by hand).
  sparse:    POST /embed_sparse against /embed on the same SPLADE (BertForMaskedLM) model and
             inputs: what the masked-LM head costs.
Prints one JSON line per comparison.
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


def timed(path, body, repeat):
    start = time.perf_counter()
    for _ in range(repeat):
        post(path, body)
    return (time.perf_counter() - start) / repeat


def compare(name, a, b, repeat, note, work):
    post(*a)
    post(*b)  # warm both
    ta, tb = [], []
    for _ in range(ROUNDS):
        ta.append(timed(a[0], a[1], repeat))
        tb.append(timed(b[0], b[1], repeat))
    ma, mb = statistics.median(ta), statistics.median(tb)
    print(json.dumps({"benchmark": name, "a": a[0], "b": b[0], "a_ms": round(ma * 1e3, 2), "b_ms": round(mb * 1e3, 2),
                      "a_over_b": round(ma / mb, 3), "a_min_max_ms": [round(min(ta) * 1e3, 2), round(max(ta) * 1e3, 2)],
                      "b_min_max_ms": [round(min(tb) * 1e3, 2), round(max(tb) * 1e3, 2)], "work": work,
                      "a_per_s": round(work["units"] / ma, 1), "note": note}), flush=True)


text = ("The city council approved a new budget on Tuesday that raises spending on public transport "
        "and cuts the cost of parking permits for residents.")
labels = ["politics", "economy", "sports", "technology", "health", "travel", "music", "science", "weather", "food"]
pairs = [[text, "This example is %s." % l] for l in labels]
compare("zero-shot 10 labels",
        ("/zero-shot-classification", {"model": "nli", "inputs": text, "parameters": {"candidate_labels": labels}}),
        ("/predict", {"model": "nli", "inputs": pairs}),
        3, "the same 10 pairs; b: one TEI /predict batch", {"units": 10, "unit": "pairs"})

words = ["report", "budget", "council", "transport", "market", "river", "energy", "school", "health", "museum"]
def document(items):
    return " ".join("%s %d," % (words[i % len(words)], i) for i in range(items))


# About 8192 tokens: the items it takes, from the tokens of a first guess.
per_item = len(post("/tokenize", {"model": "embedder", "inputs": document(1000)}).json()[0]) / 1000
doc = document(int(8192 / per_item))
tokens = post("/tokenize", {"model": "embedder", "inputs": doc}).json()[0]
ids = [t["id"] for t in tokens]
cls, sep, body = ids[0], ids[-1], ids[1:-1]
info = requests.get(URL + "/v1/models", timeout=60).json()
room = 512 - 2
windows = [[cls] + body[i:i + room] + [sep] for i in range(0, len(body), room)]
compare("8k-token document",
        ("/embed", {"model": "embedder", "inputs": doc, "whole_input": True}),
        ("/embed", {"model": "embedder", "inputs": windows}),
        1, "b: the same windows as token ids in one request", {"units": len(ids), "unit": "tokens",
                                                                 "windows": len(windows)})

splade_inputs = [[101] + [1000 + (7 * i + 13 * j) % 28000 for j in range(126)] + [102] for i in range(8)]
compare("SPLADE sparse vs dense",
        ("/embed_sparse", {"model": "splade", "inputs": splade_inputs}),
        ("/embed", {"model": "splade", "inputs": splade_inputs}),
        1, "8 x 128 token ids; the same model's /embed", {"units": 8 * 128, "unit": "tokens"})
