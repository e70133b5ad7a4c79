# Lab serving image (TEST FIXTURE): the stand-in vLLM server from the lab's upstream lock on the lab base image.
# Each upstream's patched tree arrives as a directory of the build context (roles/image_build).
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG COMPILE_JOBS=1
COPY standin/ /opt/standin/
COPY launcher/bin/ /usr/local/bin/
RUN ln -s /opt/standin/vllm /usr/local/bin/vllm \
 && PYTHONPATH=/opt/standin python3 -c "import standin_vllm.config" \
 && grep -q 'sparkfleet image_build' /opt/standin/BUILD-INFO
# Entry point `vllm serve`, like the vllm-openai images: serve.json's command runs unchanged.
ENTRYPOINT ["vllm", "serve"]
