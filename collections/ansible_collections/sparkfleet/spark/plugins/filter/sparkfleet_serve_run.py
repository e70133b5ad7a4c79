"""Pure planning of which docker run options of a serve spec a host can back (devices, GPUs, pinned memory).

The profile is written for a DGX Spark. A host without a device the profile names (no /dev/infiniband, no
NVIDIA runtime, no DRM card, a pinned-memory limit the engine cannot raise) cannot run those options: with
spark_device_policy `require` that is a refusal naming the host and the option, with `available` the
option is dropped and reported. The decision reads host facts only, never what kind of host it is.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_policy as _POLICY

UNLIMITED = -1
# Bit numbers of the capabilities serving profiles add (linux/capability.h); others are not judged.
CAPABILITY_BITS = {"NET_ADMIN": 12, "IPC_LOCK": 14, "SYS_PTRACE": 19, "SYS_ADMIN": 21, "SYS_NICE": 23, "SYS_RESOURCE": 24}


def _device_path(spec: str) -> str:
    return spec.split(":", 1)[0]


def _memlock(ulimit: str) -> int | None:
    """The hard limit of a `memlock:soft:hard` ulimit string, None for other ulimits."""
    parts = ulimit.split(":")
    if parts[0] != "memlock" or len(parts) != 3:
        return None
    return int(parts[2])


def _memlock_fits(wanted: int, host_hard: int | None) -> bool:
    if host_hard is None:
        return False
    if host_hard == UNLIMITED:
        return True
    return wanted != UNLIMITED and wanted <= host_hard


def _fit_list(key: str, values: list[Any], backed: Any, describe: Any) -> tuple[list[Any], list[str]]:
    kept, missing = [], []
    for value in values:
        if backed(value):
            kept.append(value)
        else:
            missing.append(f"{key} {describe(value)}")
    return kept, missing


def spark_serve_fit_run(run: Mapping[str, Any], facts: Mapping[str, Any], policy: str, host: str) -> dict[str, Any]:
    """{"run": options the host backs, "missing": what it lacks}; raises under `require` when something lacks.

    facts: {"paths": {path: exists}, "runtimes": [docker runtime names], "memlock_hard": bytes or -1 or None,
            "cap_bounding": CapBnd hex of /proc/self/status or None}.
    """
    try:
        _POLICY.check(policy, host)
    except _POLICY.PolicyError as exc:
        raise AnsibleFilterError(str(exc)) from exc
    paths = facts.get("paths") or {}
    fitted = dict(run)
    missing: list[str] = []
    if run.get("device_requests"):
        drivers = sorted({str(r.get("driver")) for r in run["device_requests"]})
        absent = [d for d in drivers if d not in (facts.get("runtimes") or [])]
        if absent:
            missing.append(f"device_requests (no {', '.join(absent)} runtime in docker info)")
            fitted.pop("device_requests")
    for key, path_of in (("devices", _device_path), ("mounts", lambda m: str(m.get("source")))):
        if run.get(key):
            kept, lacking = _fit_list(key, list(run[key]), lambda v, p=path_of: bool(paths.get(p(v))),
                                      lambda v, p=path_of: f"{p(v)} (does not exist)")
            missing += lacking
            fitted[key] = kept
    if run.get("capabilities") and facts.get("cap_bounding") is not None:
        bounding = int(str(facts["cap_bounding"]), 16)
        kept, lacking = _fit_list(
            "capabilities", list(run["capabilities"]),
            lambda c: str(c).upper() not in CAPABILITY_BITS or bool(bounding >> CAPABILITY_BITS[str(c).upper()] & 1),
            lambda c: f"{c} (not in the host's capability bounding set)")
        missing += lacking
        fitted["capabilities"] = kept
    if run.get("ulimits"):
        host_hard = facts.get("memlock_hard")
        kept, lacking = _fit_list(
            "ulimits", list(run["ulimits"]),
            lambda u: _memlock(u) is None or _memlock_fits(_memlock(u), host_hard),
            lambda u: f"{u} (the host's locked-memory hard limit is {host_hard})")
        missing += lacking
        fitted["ulimits"] = kept
    if missing and policy == _POLICY.REQUIRE:
        raise AnsibleFilterError(f"host {host}: the serving profile needs what this host lacks: {'; '.join(missing)} "
                                 "(install the device/runtime, or set spark_device_policy=available to drop them)")
    return {"run": {k: v for k, v in fitted.items() if v != []}, "missing": missing}


def spark_serve_device_paths(run: Mapping[str, Any]) -> list[str]:
    """Host paths the run options need (devices and bind-mount sources), for the role to stat."""
    paths = [_device_path(d) for d in run.get("devices") or []]
    paths += [str(m.get("source")) for m in run.get("mounts") or []]
    return sorted(set(paths))


def spark_serve_memlock(limits: str) -> int | None:
    """Hard 'Max locked memory' of /proc/<pid>/limits in bytes (-1 = unlimited), None when absent."""
    for line in limits.splitlines():
        if line.startswith("Max locked memory"):
            hard = line[len("Max locked memory"):].split()[1]
            return UNLIMITED if hard == "unlimited" else int(hard)
    return None


def spark_serve_cap_bounding(status: str) -> str | None:
    """CapBnd (hex) of /proc/<pid>/status, None when absent."""
    for line in status.splitlines():
        if line.startswith("CapBnd:"):
            return line.split()[1]
    return None


class FilterModule:
    """sparkfleet serve launch filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_serve_fit_run": spark_serve_fit_run,
            "spark_serve_device_paths": spark_serve_device_paths,
            "spark_serve_memlock": spark_serve_memlock,
            "spark_serve_cap_bounding": spark_serve_cap_bounding,
        }
