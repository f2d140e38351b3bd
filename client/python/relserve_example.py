#!/usr/bin/env python3
"""A short relserve client: lists the models, embeds two texts, and reranks documents when a
cross-encoder is served. Prints one JSON object.

    client/python/generate.sh                 # once: generates relserve/v1/encoder_pb2*.py into gen/
    PYTHONPATH=client/python/gen python3 client/python/relserve_example.py --target 127.0.0.1:50051
"""
import argparse
import json
import sys

import grpc

from relserve.v1 import encoder_pb2, encoder_pb2_grpc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051", help="host:port of relserve")
    parser.add_argument("--timeout", type=float, default=30.0, help="deadline of each call, seconds")
    args = parser.parse_args()

    with grpc.insecure_channel(args.target) as channel:
        stub = encoder_pb2_grpc.EncoderStub(channel)
        out = {}
        models = stub.ListModels(encoder_pb2.ListModelsRequest(), timeout=args.timeout)
        out["models"] = [{"name": m.name, "architecture": m.architecture, "labels": list(m.labels)}
                         for m in models.models]

        embedder = next((m for m in models.models if m.has_tokenizer), None)
        if embedder is not None:
            response = stub.Embed(
                encoder_pb2.EmbedRequest(
                    model=embedder.name,
                    inputs=[encoder_pb2.Input(text="relserve serves relative-attention encoders"),
                            encoder_pb2.Input(text="DeBERTa and T5, batched by length")],
                    normalize=True),
                timeout=args.timeout)
            out["embed"] = {
                "model": response.model,
                "dimensions": [len(e.values) for e in response.embeddings],
                "tokens": response.usage.tokens,
                "first_values": list(response.embeddings[0].values[:4]),
            }

        reranker = next((m for m in models.models if m.labels and m.has_tokenizer), None)
        if reranker is not None:
            response = stub.Rerank(
                encoder_pb2.RerankRequest(
                    model=reranker.name, query="what does relserve serve?",
                    documents=["transformer encoders", "soup recipes", "relative attention models"],
                    top_n=2, return_documents=True),
                timeout=args.timeout)
            out["rerank"] = [{"index": r.index, "score": r.score, "document": r.document}
                             for r in response.results]

        try:
            stub.Embed(encoder_pb2.EmbedRequest(model="no-such-model",
                                                inputs=[encoder_pb2.Input(text="x")]),
                       timeout=args.timeout)
        except grpc.RpcError as error:  # errors carry a gRPC status code and a message
            out["unknown_model_error"] = {"code": error.code().name, "message": error.details()}

    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
