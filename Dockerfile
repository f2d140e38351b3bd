# relserve, CPU image: a build stage with the full toolchain, and a slim Debian 12 runtime stage
# with only the shared libraries the binaries load. Both stages install their packages through
# scripts/install-deps.sh, the same script the README and CI use; the runtime stage takes the
# libraries themselves from the build stage (scripts/docker-runtime-libs.sh), not the packages
# Debian's LibTorch depends on (OpenCV, FFmpeg, GDAL, Qt with their data, Mesa and LLVM).
#
#   scripts/docker-build.sh                 # base image, build stage tagged relserve:build-cpu, image
#   (or by hand: scripts/docker-base-image.sh && docker build -t relserve:latest .)
#   docker run --rm -p 50051:50051 -p 8080:8080 -p 9090:9090 -v /path/to/models:/models:ro relserve:latest
#
# By default it serves /models/default (RELSERVE_MODEL below); flags passed after the image name
# are relserve's own and win over the RELSERVE_ defaults, which stay in force for the rest, e.g.
#   docker run ... relserve:latest --model reranker=/models/reranker --metrics-port 9191
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BASE_IMAGE} AS build
# scripts/docker-build.sh tags this stage (relserve:build-cpu) and prunes older untagged ones.
LABEL relserve.stage=build
ARG JOBS=2
COPY scripts/install-deps.sh /src/scripts/install-deps.sh
# The base image's own packages, listed before any install: their libraries stay out of the copy.
RUN dpkg-query -W -f '${Package}\n' > /base-packages.txt \
 && /src/scripts/install-deps.sh --compile && rm -rf /var/lib/apt/lists/*
COPY CMakeLists.txt /src/
COPY proto /src/proto
COPY server /src/server
COPY client /src/client
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DRELSERVE_BUILD_TESTS=OFF \
      -DCMAKE_INSTALL_PREFIX=/opt/relserve \
 && cmake --build /build -j "${JOBS}" \
 && cmake --install /build --strip
# The libraries the installed binaries load, transitively, into /opt/relserve/lib/deps, with
# their Debian copyright files in /opt/relserve/share/doc.
COPY scripts/docker-runtime-libs.sh /src/scripts/docker-runtime-libs.sh
RUN /src/scripts/docker-runtime-libs.sh /opt/relserve /opt/relserve-deps /base-packages.txt \
 && mv /opt/relserve-deps/lib /opt/relserve/lib/deps && mv /opt/relserve-deps/share /opt/relserve/share

FROM ${BASE_IMAGE} AS runtime
LABEL relserve.stage=runtime
COPY scripts/install-deps.sh /tmp/install-deps.sh
# --image: only what the copied libraries do not bring (CA certificates for Hub downloads).
# apt's caches go too: a base image made by debootstrap (scripts/docker-base-image.sh) lacks the
# apt settings that drop them in a registry's debian:bookworm-slim (80 MB).
RUN /tmp/install-deps.sh --image && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /tmp/install-deps.sh \
 && groupadd --system --gid 10001 relserve \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin relserve \
 && mkdir -p /models /hf-cache && chown 10001:10001 /hf-cache \
 && echo /opt/relserve/lib/deps > /etc/ld.so.conf.d/relserve.conf
COPY --from=build /opt/relserve /opt/relserve
RUN ldconfig
COPY scripts/docker-healthcheck.sh /opt/relserve/bin/relserve-healthcheck
# Hub models (--model NAME=org/repo) go to the Hugging Face cache in /hf-cache, writable by the
# server's user; mount a volume there to keep it between containers.
# The defaults are environment variables, not CMD arguments, so that flags given to
# `docker run IMAGE ...` add to them instead of replacing them all: a command line that names
# another model still drains within Docker's 10 s stop timeout (RELSERVE_SHUTDOWN_GRACE_SECONDS;
# raise it together with `docker stop -t` for longer calls). Every relserve flag reads its
# RELSERVE_<FLAG> variable, and a flag on the command line wins over it.
ENV PATH=/opt/relserve/bin:${PATH} \
    HF_HUB_CACHE=/hf-cache \
    RELSERVE_MODEL=default=/models/default \
    RELSERVE_SHUTDOWN_GRACE_SECONDS=8
# Models are mounted here (read-only is enough): one Hugging Face model directory per model.
VOLUME ["/models", "/hf-cache"]
# gRPC API, HTTP/JSON API (OpenAI and TEI routes), then Prometheus /metrics and /healthz.
EXPOSE 50051 8080 9090
USER 10001:10001
# relserve-healthcheck (scripts/docker-healthcheck.sh) reads the ports from the server's own
# flags and RELSERVE_ variables and asks the metrics port's /healthz (else the HTTP API's
# /health): both plain HTTP even when gRPC uses TLS, and both report serving once every model
# has loaded and warmed up. The start period covers loading and warm-up of a base-size model on
# a few cores.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["relserve-healthcheck"]
ENTRYPOINT ["relserve"]
# gRPC on 0.0.0.0:50051, HTTP on 0.0.0.0:8080 and metrics on 0.0.0.0:9090 are relserve's own
# defaults; the rest comes from the environment above.
CMD []
