"""The collection's version pins, once: kernel, driver, Memory Saver, serving image sources and model.

Every role default that carries a pin reads it from here (lookup sparkfleet.spark.spark_pin), and so do the
controller-side filters and the doctor, so a driver or kernel bump is one edit in this file. Inventories set
the variable itself only as a deliberate site override. Values: host-kernel-driver.md section 1 and
image-model-serve.md sections 2 and 4.
"""
from __future__ import annotations

import copy
from typing import Any, Dict

KERNEL_FALLBACK = "7.0.0-1019-nvidia"
KERNEL_CANDIDATE = "7.0.0-1019-nvidia-64k"
KERNEL_PACKAGE_VERSION = "7.0.0-1019.19~24.04.2"
DRIVER_BRANCH = "580"
DRIVER_VERSION = "580.178.04"
DRIVER_PACKAGE_VERSION = "580.178.04-0ubuntu0.24.04.1"
MEMORY_SAVER_VERSION = "0.2.0"
MEMORY_SAVER_REVISION = "2dd6ef107616ef13f1c7f87817c07e5aabc9199e"
MEMORY_SAVER_REPOSITORY = "https://github.com/christopherowen/dgx-spark-memory-saver.git"
# srcversion of the loaded nvidia_uvm that Memory Saver 0.2.0 builds (the promotion gate compares it).
MEMORY_SAVER_SRCVERSION = "34683B82C2D3339BBD2EEC9"
MODEL_NAME = "deepseek-v4.1-flash"

# The precompiled NVIDIA modules carry a "+1" on top of the kernel's version (reference section 1).
_NVIDIA_MODULES = f"linux-modules-nvidia-{DRIVER_BRANCH}-open-{KERNEL_CANDIDATE}"
_DRIVER_SOURCE = {f"nvidia-kernel-source-{DRIVER_BRANCH}-open": DRIVER_PACKAGE_VERSION}
# The reference does not confirm the metapackage's version: empty makes the driver role list what apt offers.
_DRIVER_PACKAGES = {f"nvidia-driver-{DRIVER_BRANCH}-open": "", **_DRIVER_SOURCE}

PINS: Dict[str, Any] = {
    # Kernel pair: the 64 KiB candidate is tried once, the 4 KiB fallback stays installed.
    "spark_kernel_fallback_release": KERNEL_FALLBACK,
    "spark_kernel_candidate_release": KERNEL_CANDIDATE,
    "spark_kernel_packages": {
        f"linux-image-{KERNEL_CANDIDATE}": KERNEL_PACKAGE_VERSION,
        f"linux-modules-{KERNEL_CANDIDATE}": KERNEL_PACKAGE_VERSION,
        f"linux-headers-{KERNEL_CANDIDATE}": KERNEL_PACKAGE_VERSION,
        f"linux-tools-{KERNEL_CANDIDATE}": KERNEL_PACKAGE_VERSION,
        _NVIDIA_MODULES: KERNEL_PACKAGE_VERSION + "+1",
        f"linux-image-{KERNEL_FALLBACK}": KERNEL_PACKAGE_VERSION,
        f"linux-modules-{KERNEL_FALLBACK}": KERNEL_PACKAGE_VERSION,
    },
    "spark_kernel_driver_version": DRIVER_VERSION,
    "spark_kernel_memory_saver_srcversion": MEMORY_SAVER_SRCVERSION,
    # NVIDIA driver, open kernel modules (avoid 590.x, and R610 on 64 KiB).
    "spark_nvidia_driver_version": DRIVER_VERSION,
    "spark_nvidia_driver_packages": dict(_DRIVER_PACKAGES),
    # Memory Saver 0.2.0, built for the candidate kernel against the pinned driver.
    "spark_memory_saver_version": MEMORY_SAVER_VERSION,
    "spark_memory_saver_repository": MEMORY_SAVER_REPOSITORY,
    "spark_memory_saver_revision": MEMORY_SAVER_REVISION,
    "spark_memory_saver_kernel_release": KERNEL_CANDIDATE,
    "spark_memory_saver_running_releases": [KERNEL_FALLBACK, KERNEL_CANDIDATE],
    "spark_memory_saver_built_module_location": f".work/nvidia-{DRIVER_VERSION}-uvm-pool",
    "spark_memory_saver_dest_module_location": f"/kernel/nvidia-{DRIVER_BRANCH}-open",
    "spark_memory_saver_kernel_packages": {
        f"linux-image-{KERNEL_CANDIDATE}": KERNEL_PACKAGE_VERSION,
        f"linux-headers-{KERNEL_CANDIDATE}": KERNEL_PACKAGE_VERSION,
        _NVIDIA_MODULES: KERNEL_PACKAGE_VERSION + "+1",
    },
    # The build input the reference's environment check pins (the module package is among the kernel's).
    "spark_memory_saver_driver_packages": dict(_DRIVER_SOURCE),
    "spark_memory_saver_driver_version": DRIVER_VERSION,
    # The 64 KiB host keeps the 4 KiB host's reserve.
    "spark_host_baseline_min_free_kbytes_64k": 45166,
    # Serving image: tag repository, release and the upstream lock (the reference's r6d commits).
    "spark_image_repository": "sparkfleet/vllm-ds41f",
    "spark_image_release": "r6d",
    "spark_image_upstreams": [
        {"name": "vllm", "repository": "https://github.com/local-inference-lab/vllm.git",
         "commit": "19f2c20ed4d64ae22bd009ceacadd85e2a81e354", "patches": []},   # integration/karmic-kraken-beta, r6d
        {"name": "nccl", "repository": "https://github.com/NVIDIA/nccl.git",
         "commit": "73cf112295c33aee2b895f329f592f2a9b4b0f97", "patches": []},   # v2.30.7-1
    ],
    # Model weights: identity and the same local-NVMe directory on every node.
    "spark_model_name": MODEL_NAME,
    "spark_model_repo": "deepseek-ai/DeepSeek-V4.1-Flash",
    "spark_model_revision": "dba1be0a40aa45a94ad051997016db3960a90277",
    "spark_model_dir": f"/var/lib/sparkfleet/models/{MODEL_NAME}",
    # The router in front of the serving groups (the vLLM project's vllm-router); its hash lock is
    # roles/router/files/vllm-router-<version>.txt (tools/router_lock.py).
    "spark_router_version": "0.1.17",
}


def pin(name: str) -> Any:
    """The pinned value of one variable (a fresh copy); KeyError names the unknown variable."""
    if name not in PINS:
        raise KeyError(f"no pin named {name!r} (known: {', '.join(sorted(PINS))})")
    return copy.deepcopy(PINS[name])


def host_value(hostvars: Any, name: str) -> Any:
    """A host's own value of a pinned variable (inventory override) or the pin."""
    return hostvars[name] if name in hostvars else pin(name)
