# Recipe of the small base image the nodes' own Docker engines hold (the serving image is built FROM it
# in later stages; the stand-in vLLM server runs in it). Run by lab/build-image.sh inside a
# container of the debootstrap'ed bookworm minbase; exported with `docker save` and loaded into every node.
# image-cmd: ["/bin/bash"]
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3 python3-aiohttp ca-certificates >/dev/null
apt-get clean
# Small is the point: it is copied into every node's engine at each lab start.
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /tmp/* /var/tmp/* /usr/share/doc/* /usr/share/man/*
