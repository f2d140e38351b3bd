# relserve, CPU image: a build stage with the full toolchain, and a slim Debian 12 runtime stage
# with only the shared libraries the binaries load. Both stages install their packages through
# scripts/install-deps.sh, the same script the README and CI use.
#
#   scripts/docker-base-image.sh            # once: makes sure debian:bookworm-slim exists locally
#   docker build -t relserve:latest .
#   docker run --rm -p 50051:50051 -p 8080:8080 -p 9090:9090 -v /path/to/models:/models:ro relserve:latest
#
# The default command serves /models/default; pass other flags to serve other models, e.g.
#   docker run ... relserve:latest --model reranker=/models/reranker --grpc-address 0.0.0.0:50051
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
ARG JOBS=2
COPY scripts/install-deps.sh /src/scripts/install-deps.sh
RUN /src/scripts/install-deps.sh --compile && rm -rf /var/lib/apt/lists/*
COPY CMakeLists.txt /src/
COPY proto /src/proto
COPY server /src/server
COPY client /src/client
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRELSERVE_BUILD_TESTS=OFF \
      -DCMAKE_INSTALL_PREFIX=/opt/relserve \
 && cmake --build /build -j "${JOBS}" \
 && cmake --install /build --strip

FROM ${BASE_IMAGE} AS runtime
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh \
 && groupadd --system --gid 10001 relserve \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin relserve \
 && mkdir -p /models /hf-cache && chown 10001:10001 /hf-cache
COPY --from=build /opt/relserve /opt/relserve
# Hub models (--model NAME=org/repo) go to the Hugging Face cache in /hf-cache, writable by the
# server's user; mount a volume there to keep it between containers.
ENV PATH=/opt/relserve/bin:${PATH} \
    HF_HUB_CACHE=/hf-cache
# Models are mounted here (read-only is enough): one Hugging Face model directory per model.
VOLUME ["/models", "/hf-cache"]
# gRPC API, HTTP/JSON API (OpenAI and TEI routes), then Prometheus /metrics and /healthz.
EXPOSE 50051 8080 9090
USER 10001:10001
# gRPC health (grpc.health.v1): healthy once every model has loaded and warmed up. The start
# period covers loading and warm-up of a base-size model on a few cores.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["relserve-client", "health", "--quiet", "--target", "127.0.0.1:50051", "--deadline-ms", "2000"]
ENTRYPOINT ["relserve"]
CMD ["--model", "default=/models/default", "--grpc-address", "0.0.0.0:50051", \
     "--metrics-address", "0.0.0.0", "--metrics-port", "9090", "--shutdown-grace-seconds", "8"]
