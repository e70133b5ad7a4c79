# Broken serving image (TEST DOUBLE for the replace fault): the lab base image with a `vllm` that exits 3.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
# It prints its environment first, as an engine that logs its settings would: the secrets fault checks that
# what serve.yml prints and saves of these logs is redacted.
RUN printf '#!/bin/sh\nenv | sort\necho "broken test image: vllm exits" >&2\nexit 3\n' > /usr/local/bin/vllm \
 && chmod 0755 /usr/local/bin/vllm
ENTRYPOINT ["vllm", "serve"]
