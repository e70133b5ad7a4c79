# Benchmark image (TEST FIXTURE for make bench-distribution): the lab serving image plus five ~110 MB layers
# of incompressible data, and a last small layer that BENCH_UPDATE changes (the "update" case).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG BENCH_LAYER_MB=110
RUN head -c ${BENCH_LAYER_MB}M /dev/urandom >/opt/bench-layer-1
RUN head -c ${BENCH_LAYER_MB}M /dev/urandom >/opt/bench-layer-2
RUN head -c ${BENCH_LAYER_MB}M /dev/urandom >/opt/bench-layer-3
RUN head -c ${BENCH_LAYER_MB}M /dev/urandom >/opt/bench-layer-4
RUN head -c ${BENCH_LAYER_MB}M /dev/urandom >/opt/bench-layer-5
COPY standin/ /opt/standin/
ARG BENCH_UPDATE=1
RUN echo "update ${BENCH_UPDATE}" >/opt/bench-update
