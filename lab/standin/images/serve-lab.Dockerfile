# Lab-only serving image (TEST DOUBLE): the lab's base image with the stand-in vLLM server installed as `vllm`,
# entry point `vllm serve` like the vllm-openai images, so serve.json's command runs unchanged. BROKEN=1 makes
# a deliberately broken variant whose `vllm` prints its environment and exits (the replace and secrets faults).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG BROKEN=0
COPY standin /opt/standin
RUN if [ "$BROKEN" = 1 ]; then printf '#!/bin/sh\nenv | sort\necho "broken test image: vllm exits" >&2\nexit 3\n' > /opt/standin/vllm; fi \
    && chmod 0755 /opt/standin/vllm && ln -s /opt/standin/vllm /usr/local/bin/vllm
LABEL org.opencontainers.image.title="sparkfleet serve lab test double" sparkfleet.test-double="standin-vllm"
ENTRYPOINT ["vllm", "serve"]
