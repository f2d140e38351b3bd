#!/usr/bin/env bash
# Generates the Python modules for relserve's API into ${1:-client/python/gen} with Debian's
# protoc and gRPC Python plugin (packages protobuf-compiler, protobuf-compiler-grpc).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/client/python/gen}"
mkdir -p "$out"
protoc -I "$root/proto" --python_out="$out" --grpc_out="$out" \
  --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" "$root/proto/relserve/v1/encoder.proto"
touch "$out/relserve/__init__.py" "$out/relserve/v1/__init__.py"
