"""The doctor: judge what every node reported against the plan, the pins and each other (no I/O).

Two halves. The probe parsers turn what `plugins/modules/spark_doctor.py` read on a node (device nodes, sysfs
parameters, `systemctl show`, `docker inspect`, `nvidia-smi`) into plain values. The evaluation takes one
observation per node (the results of spark_host_facts, spark_doctor, spark_fabric_state, spark_fabric_paths,
spark_roce_gid, spark_image_identity, spark_model_manifest and spark_memory_guard in check mode) plus the
cluster context (plan, pins, serving profile, the head's API answer) and returns `doctor.json`: one line per
node and check with a status (ok, fail, skipped), a severity (error, warning, info) and a one-line fix.

Checks and severities follow the reference's doctor list (image-model-serve.md §9, host-kernel-driver.md
§6–§9, hardware-and-fabric.md §6); roles/doctor/README.md lists every check. Hardware a node does not have
(no /dev/nvidia0, no RDMA device, no EFI firmware) makes the checks that need it `skipped: no <device>`;
the device checks themselves are errors unless `device_policy` is `available` (hosts without the hardware).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_serve_profiles import FLAVOURS, backend_errors
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_serve_ready import (
    ContainerState, container_problem, parse_container_state)

SCHEMA = "sparkfleet-doctor/1"
OK, FAIL, SKIPPED = "ok", "fail", "skipped"
ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITIES = (ERROR, WARNING, INFO)
CLUSTER = "cluster"
GPU_DEVICE = "/dev/nvidia0"
NO_GPU = f"no {GPU_DEVICE}"
NO_RDMA = "no RDMA device"
NO_EFI = "no /sys/firmware/efi"
NOT_SERVING = "no running serving container"
MIN_GPU_CLOCK_MHZ = 1000

Observation = Mapping[str, Any]
Context = Mapping[str, Any]


@dataclass(frozen=True)
class Check:
    """One line of the report."""

    node: str
    check: str
    status: str
    severity: str
    message: str
    fix: str

    def as_dict(self) -> Dict[str, str]:
        return asdict(self)


def passed(node: str, check: str, severity: str, message: str, fix: str) -> Check:
    return Check(node, check, OK, severity, message, fix)


def failed(node: str, check: str, severity: str, message: str, fix: str) -> Check:
    return Check(node, check, FAIL, severity, message, fix)


def skipped(node: str, check: str, severity: str, message: str, fix: str) -> Check:
    return Check(node, check, SKIPPED, severity, message, fix)


# --- Probe parsers (node side, pure) --------------------------------------------------------------

def parse_systemctl_properties(text: str) -> Dict[str, str]:
    """`systemctl show -p A -p B unit` -> {"A": value, ...}."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def unit_state(rc: int, text: str) -> Dict[str, Any]:
    """Load, active and enablement state of one unit; a unit systemd does not know is `found: false`."""
    props = parse_systemctl_properties(text) if rc == 0 else {}
    load = props.get("LoadState", "unknown")
    return {"found": load not in ("not-found", "unknown"), "load": load,
            "active": props.get("ActiveState", "unknown"), "enabled": props.get("UnitFileState") or "unknown"}


def parse_container(rc: int, stdout: str) -> Dict[str, Any]:
    """`docker inspect --type container --format '{{json .}}' NAME` -> state, image ID, Cmd, Env, labels."""
    if rc != 0 or not stdout.strip():
        return dict(parse_container_state(rc, stdout).as_dict(), image=None, cmd=None, env={}, labels={},
                    started_at=None, restart_count=None)
    try:
        doc = json.loads(stdout)
    except ValueError:
        return dict(parse_container_state(0, stdout).as_dict(), image=None, cmd=None, env={}, labels={},
                    started_at=None, restart_count=None)
    doc = doc[0] if isinstance(doc, list) and doc else doc
    state = doc.get("State") or {}
    config = doc.get("Config") or {}
    return dict(parse_container_state(0, json.dumps(state)).as_dict(), image=doc.get("Image"),
                cmd=config.get("Cmd"), env=env_map(config.get("Env") or []), labels=config.get("Labels") or {},
                started_at=state.get("StartedAt"), restart_count=doc.get("RestartCount"))


def env_map(entries: Sequence[str]) -> Dict[str, str]:
    """Docker's ["K=V", ...] as a mapping (a later entry wins, as in the container)."""
    return dict(entry.split("=", 1) if "=" in entry else (entry, "") for entry in entries)


def parse_sm_clock(rc: int, stdout: str) -> Tuple[Optional[int], Optional[str]]:
    """`nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits` -> (MHz of the first GPU, reason)."""
    first = stdout.strip().splitlines()[0].strip() if stdout.strip() else ""
    if rc != 0 or not first.isdigit():
        return None, f"nvidia-smi rc {rc}: {first or 'no output'}"
    return int(first), None


# --- Evaluation helpers ---------------------------------------------------------------------------

def _result(obs: Observation, key: str) -> Mapping[str, Any]:
    value = obs.get(key)
    return value if isinstance(value, Mapping) else {}


def _probe_failure(obs: Observation, key: str, required: str) -> Optional[Tuple[str, str]]:
    """(status, message) when the probe `key` did not answer: skipped when it did not run, fail when the
    module failed (the play registers with failed_when: false, so a failure shows as a missing result key)."""
    result = obs.get(key)
    if not isinstance(result, Mapping):
        return SKIPPED, f"no {key} probe"
    if result.get("skipped"):
        return SKIPPED, f"no {key} probe ({result.get('skip_reason') or result.get('false_condition') or 'skipped'})"
    if result.get("failed") or required not in result:
        return FAIL, str(result.get("msg") or "the probe failed without a message")
    return None


def _unprobed(host: str, check: str, severity: str, what: str, failure: Tuple[str, str], fix: str) -> Check:
    status, message = failure
    if status == SKIPPED:
        return skipped(host, check, severity, message, fix)
    return failed(host, check, severity, f"{what}: {message}", fix)


def _facts(obs: Observation) -> Mapping[str, Any]:
    return _result(obs, "host_facts").get("host") or {}


def _why(facts: Mapping[str, Any], key: str) -> str:
    return str((facts.get("unavailable") or {}).get(key) or "not reported")


def has_gpu(obs: Observation) -> bool:
    return bool((_result(obs, "probe").get("devices") or {}).get(GPU_DEVICE))


def rdma_present(obs: Observation) -> List[str]:
    return list(_result(obs, "probe").get("rdma_devices") or [])


def container(obs: Observation) -> Mapping[str, Any]:
    return _result(obs, "probe").get("container") or {}


def running(obs: Observation) -> bool:
    return bool(container(obs).get("running"))


# --- Host checks ----------------------------------------------------------------------------------

def check_tools(host: str, obs: Observation, ctx: Context) -> List[Check]:
    """A tool the probes need and the node lacks is a failed check of its own: without it the checks that
    depend on it would only read as skipped or "not serving"."""
    fix = "install the named tools on the node (docker: playbooks/host.yml; nvidia-smi: the NVIDIA driver)"
    failure = _probe_failure(obs, "probe", "devices")
    if failure:
        return [_unprobed(host, "node.tools", ERROR, "the doctor probe failed", failure, fix)]
    missing = _result(obs, "probe").get("missing_tools") or []
    if not missing:
        return [passed(host, "node.tools", ERROR, "every tool the probes use is installed", fix)]
    message = "; ".join(f"{m.get('tool')} is not installed (needed for {m.get('needed_for')})" for m in missing)
    return [failed(host, "node.tools", ERROR, message, fix)]


def check_gpu_device(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "check the GPU with nvidia-smi; install the pinned driver with playbooks/host.yml and reboot"
    if has_gpu(obs):
        return [passed(host, "host.gpu_device", ERROR, f"{GPU_DEVICE} present", fix)]
    if ctx.get("device_policy") == "available":
        return [skipped(host, "host.gpu_device", ERROR, NO_GPU, fix)]
    return [failed(host, "host.gpu_device", ERROR, NO_GPU, fix)]


def expected_flavour(ctx: Context) -> Tuple[Optional[str], str]:
    """The kernel page flavour the site requires and where that comes from."""
    requires = ctx.get("requires") or {}
    if requires.get("kernel_flavour"):
        return str(requires["kernel_flavour"]), "spark_serve_requires"
    if ctx.get("kernel_flavour"):
        return str(ctx["kernel_flavour"]), "spark_kernel_candidate_release"
    return None, ""


def check_kernel_flavour(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "boot the required kernel flavour: playbooks/host.yml, then playbooks/reboot.yml"
    facts = _facts(obs)
    want, source = expected_flavour(ctx)
    have, release = facts.get("page_size_flavour"), facts.get("kernel_release")
    if want is None:
        return [skipped(host, "host.kernel_flavour", ERROR, "no kernel flavour required (no spark_serve_requires)", fix)]
    if have is None:
        return [failed(host, "host.kernel_flavour", ERROR, f"kernel unknown ({_why(facts, 'kernel_release')})", fix)]
    message = f"kernel {release} is the {have} flavour, {source} wants {want}"
    return [(passed if have == want else failed)(host, "host.kernel_flavour", ERROR, message, fix)]


def check_page_size(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "boot the kernel whose page size the profile requires: playbooks/host.yml, then playbooks/reboot.yml"
    facts = _facts(obs)
    want_flavour, _ = expected_flavour(ctx)
    want = (ctx.get("requires") or {}).get("page_size") or FLAVOURS.get(str(want_flavour))
    have = facts.get("page_size")
    if have is None:
        return [failed(host, "host.page_size", ERROR, f"page size unknown ({_why(facts, 'page_size')})", fix)]
    if facts.get("page_size_matches_flavour") is False:
        return [failed(host, "host.page_size", ERROR, f"page size {have} does not match kernel "
                                                      f"{facts.get('kernel_release')}", fix)]
    if want is None:
        return [passed(host, "host.page_size", ERROR, f"page size {have} (none required)", fix)]
    message = f"page size {have}, required {want}"
    return [(passed if have == want else failed)(host, "host.page_size", ERROR, message, fix)]


def check_kernel_release(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "boot one of the prepared kernels (playbooks/host.yml installs them; playbooks/reboot.yml boots)"
    releases = [r for r in ctx.get("kernel_releases") or [] if r]
    release = _facts(obs).get("kernel_release")
    if not releases:
        return [skipped(host, "host.kernel_release", WARNING, "no prepared kernels pinned (spark_kernel_*_release)", fix)]
    if release in releases:
        return [passed(host, "host.kernel_release", WARNING, f"kernel {release} is a prepared kernel", fix)]
    return [failed(host, "host.kernel_release", WARNING,
                   f"kernel {release} is outside the prepared pair ({', '.join(releases)})", fix)]


def check_kho(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/host.yml (the kernel role adds kho=off to the command line) and reboot"
    facts = _facts(obs)
    if not rdma_present(obs):
        return [skipped(host, "host.kho_off", ERROR, NO_RDMA, fix)]
    if facts.get("kho_off") is True:
        return [passed(host, "host.kho_off", ERROR, "kho=off is on the kernel command line", fix)]
    if facts.get("kho_off") is None:
        return [failed(host, "host.kho_off", ERROR, f"kernel command line unreadable ({_why(facts, 'kho_off')})", fix)]
    return [failed(host, "host.kho_off", ERROR, "kho=off is missing: ibv_reg_mr fails with ENOMEM under pressure", fix)]


def check_driver(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "install the pinned driver with playbooks/host.yml and reboot"
    facts, want = _facts(obs), ctx.get("driver_version")
    if not has_gpu(obs):
        return [skipped(host, "host.driver", ERROR, NO_GPU, fix)]
    have = facts.get("driver_running")
    if have is None:
        return [failed(host, "host.driver", ERROR, f"no driver loaded ({_why(facts, 'driver_running')})", fix)]
    if not want:
        return [passed(host, "host.driver", ERROR, f"driver {have} (no pin set)", fix)]
    message = f"driver {have} running, pinned {want}"
    return [(passed if str(have) == str(want) else failed)(host, "host.driver", ERROR, message, fix)]


def check_memory_saver(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "install the Memory Saver with playbooks/host.yml on the 64 KiB kernel and reboot"
    required = bool((ctx.get("requires") or {}).get("memory_saver"))
    severity = ERROR if required else INFO
    if not has_gpu(obs):
        return [skipped(host, "host.memory_saver", severity, NO_GPU, fix)]
    facts = _facts(obs)
    packing = facts.get("uvm_packing")
    if not required:
        return [passed(host, "host.memory_saver", INFO, f"not required by the profile (packing {packing})", fix)]
    if str(packing).strip() == "Y":
        return [passed(host, "host.memory_saver", ERROR, f"packing Y, nvidia_uvm {facts.get('uvm_srcversion')}", fix)]
    shown = f"uvm_pack_sysmem_leaf_tables={packing}" if packing is not None else _why(facts, "uvm_packing")
    return [failed(host, "host.memory_saver", ERROR, f"memory saver not active ({shown}), the profile requires it", fix)]


def check_memlock(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/host.yml (memlock unlimited in limits.d) and log in again"
    if not rdma_present(obs):
        return [skipped(host, "host.memlock", ERROR, NO_RDMA, fix)]
    soft = (_facts(obs).get("memlock") or {}).get("soft")
    message = f"RLIMIT_MEMLOCK soft limit {soft}"
    return [(passed if soft == "unlimited" else failed)(host, "host.memlock", ERROR, message, fix)]


def check_display(host: str, obs: Observation, ctx: Context) -> List[Check]:
    facts = _facts(obs)
    out = []
    fix = "systemctl disable --now display-manager (playbooks/host.yml does it)"
    active = facts.get("display_manager_active")
    if active is None:
        out.append(failed(host, "host.display_manager", WARNING,
                          f"display manager unreadable ({_why(facts, 'display_manager')})", fix))
    else:
        out.append((failed if active else passed)(host, "host.display_manager", ERROR,
                                                  f"display manager {facts.get('display_manager')}", fix))
    target, want = facts.get("default_target"), ctx.get("default_target") or "multi-user.target"
    fix = f"systemctl set-default {want} (playbooks/host.yml does it)"
    out.append((passed if target == want else failed)(
        host, "host.default_target", WARNING, f"default target {target or _why(facts, 'default_target')}", fix))
    return out


def check_drm(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fixes = {"modeset": "purge nvidia-drm-options-modeset0, update-initramfs -u -k all, reboot",
             "fbdev": "remove fbdev=0 from /etc/modprobe.d, update-initramfs -u -k all, reboot"}
    params = _result(obs, "probe").get("nvidia_drm") or {}
    out = []
    for name, fix in fixes.items():
        check = f"host.drm_{name}"
        if not has_gpu(obs):
            out.append(skipped(host, check, ERROR, NO_GPU, fix))
            continue
        value = params.get(name)
        if value is None:
            out.append(failed(host, check, ERROR, f"nvidia_drm {name} unreadable (module not loaded?)", fix))
        else:
            out.append((passed if value == "Y" else failed)(host, check, ERROR, f"nvidia_drm {name}={value}", fix))
    return out


def check_secure_boot(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "enable Secure Boot in the firmware setup; enrol the fleet MOK (console access)"
    facts, probe = _facts(obs), _result(obs, "probe")
    enabled = facts.get("secure_boot")
    if enabled is None and not probe.get("efi"):
        return [skipped(host, "host.secure_boot", WARNING, NO_EFI, fix)]
    if enabled is None:
        return [failed(host, "host.secure_boot", WARNING, f"Secure Boot state unreadable ({_why(facts, 'secure_boot')})", fix)]
    message = "Secure Boot enabled" if enabled else "Secure Boot disabled (the fleet keeps it enabled)"
    return [(passed if enabled else failed)(host, "host.secure_boot", WARNING, message, fix)]


def check_fan_control(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "install dgx-spark-fan-control and enable dgx-fan-control.service (not managed by sparkfleet)"
    unit_name = ctx.get("fan_unit") or "dgx-fan-control.service"
    if not has_gpu(obs):
        return [skipped(host, "host.fan_control", WARNING, NO_GPU, fix)]
    unit = (_result(obs, "probe").get("units") or {}).get(unit_name) or {}
    if unit.get("active") == "active" and unit.get("enabled") == "enabled":
        return [passed(host, "host.fan_control", WARNING, f"{unit_name} enabled and active", fix)]
    if unit.get("load") == "no systemctl":
        state = "state unknown: systemctl is not installed"
    else:
        state = "not installed" if not unit.get("found") else f"{unit.get('enabled')}, {unit.get('active')}"
    return [failed(host, "host.fan_control", WARNING, f"{unit_name} {state}", fix)]


def check_memory_policy(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/host.yml (64 KiB memory policy: THP never, min_free_kbytes)"
    facts = _facts(obs)
    if facts.get("page_size_flavour") != "64k":
        return [skipped(host, "host.memory_policy", WARNING, "no 64 KiB kernel", fix)]
    want_min_free = ctx.get("min_free_kbytes_64k")
    min_free = (facts.get("sysctls") or {}).get("vm.min_free_kbytes")
    problems = []
    if facts.get("thp") != "never":
        problems.append(f"THP {facts.get('thp')}, want never")
    if want_min_free is not None and min_free != want_min_free:
        problems.append(f"vm.min_free_kbytes {min_free}, want {want_min_free}")
    if problems:
        return [failed(host, "host.memory_policy", WARNING, "; ".join(problems), fix)]
    return [passed(host, "host.memory_policy", WARNING, f"THP never, vm.min_free_kbytes {min_free}", fix)]


def check_gpu_clock(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "a GPU latched at a low clock recovers only after removing AC power for at least a minute"
    if not has_gpu(obs):
        return [skipped(host, "host.gpu_clock", ERROR, NO_GPU, fix)]
    if not running(obs):
        return [skipped(host, "host.gpu_clock", ERROR, NOT_SERVING, fix)]
    gpu = _result(obs, "probe").get("gpu") or {}
    clock = gpu.get("sm_clock_mhz")
    if clock is None:
        return [failed(host, "host.gpu_clock", WARNING, f"SM clock unreadable ({gpu.get('reason')})", fix)]
    message = f"SM clock {clock} MHz while serving (minimum {MIN_GPU_CLOCK_MHZ})"
    return [(passed if clock >= MIN_GPU_CLOCK_MHZ else failed)(host, "host.gpu_clock", ERROR, message, fix)]


# --- Fabric checks --------------------------------------------------------------------------------

def check_rdma_devices(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "check the ConnectX-7 driver (mlx5_ib) and ibv_devinfo; the names must match spark_fabric_ports"
    planned = list(obs.get("planned_rdma") or [])
    present = rdma_present(obs)
    missing = [d for d in planned if d not in present]
    if not present:
        status = skipped if ctx.get("device_policy") == "available" else failed
        return [status(host, "fabric.rdma_devices", ERROR, NO_RDMA, fix)]
    if missing:
        return [failed(host, "fabric.rdma_devices", ERROR, f"RDMA device(s) missing: {', '.join(missing)}", fix)]
    return [passed(host, "fabric.rdma_devices", ERROR, f"{len(planned)} planned RDMA devices present", fix)]


def _mtu_problem(line: str) -> bool:
    return ": MTU " in line


def check_fabric_state(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix_addr = "run playbooks/fabric.yml (stop serving first: a link flap moves the GIDs)"
    fix_mtu = "run playbooks/fabric.yml; every fabric netdev and cable path must carry MTU 9000"
    failure = _probe_failure(obs, "fabric_state", "differences")
    if failure:
        return [_unprobed(host, "fabric.addresses", ERROR, "fabric state unreadable", failure, fix_addr)]
    differences = list(_result(obs, "fabric_state").get("differences") or [])
    count = len(_result(obs, "fabric_state").get("interfaces") or {})
    addr = [d for d in differences if not _mtu_problem(d)]
    mtu = [d for d in differences if _mtu_problem(d)]
    return [
        (failed if addr else passed)(host, "fabric.addresses", ERROR,
                                     "; ".join(addr) or f"{count} fabric netdevs up with their planned addresses", fix_addr),
        (failed if mtu else passed)(host, "fabric.mtu", ERROR, "; ".join(mtu) or f"MTU {ctx.get('mtu', 9000)} on {count} netdevs", fix_mtu),
    ]


def check_paths(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "check the cable and both ends' MTU; playbooks/fabric.yml --tags verify shows the path matrix"
    failure = _probe_failure(obs, "fabric_paths", "paths")
    if failure:
        return [_unprobed(host, "fabric.paths", ERROR, "path probe failed", failure, fix)]
    paths = list(_result(obs, "fabric_paths").get("paths") or [])
    broken = [p for p in paths if not p.get("ok")]
    if broken:
        message = "; ".join(f"{p.get('netdev')} -> {p.get('peer_host')} ({p.get('peer_address')}): "
                            + ", ".join(p.get("problems") or ["no answer"]) for p in broken)
        return [failed(host, "fabric.paths", ERROR, message, fix)]
    size = paths[0].get("size") if paths else None
    return [passed(host, "fabric.paths", ERROR, f"{len(paths)} paths answer don't-fragment pings at {size} bytes", fix)]


def check_gid(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "stop serving, re-activate the netdev of the moved GID while nothing uses RDMA, re-check, then start"
    if not rdma_present(obs):
        return [skipped(host, "fabric.gid", ERROR, NO_RDMA, fix)]
    failure = _probe_failure(obs, "gid", "devices")
    if failure:
        return [_unprobed(host, "fabric.gid", ERROR, "GID check failed", failure, fix)]
    gid = _result(obs, "gid")
    status = passed if gid.get("ok") else failed
    return [status(host, "fabric.gid", ERROR, str(gid.get("msg") or f"GID index {gid.get('gid_index')}"), fix)]


# --- Service checks -------------------------------------------------------------------------------

def serving_mode(nodes: Mapping[str, Observation], ctx: Context) -> str:
    """`required`: every rank must serve; `partial`: some ranks serve, so all must; `idle`: nothing serves."""
    if ctx.get("require_serving"):
        return "required"
    return "partial" if any(running(o) for o in nodes.values()) else "idle"


def _deployed_severity(ctx: Context) -> str:
    """Something serve needs but that was never deployed: an error only when serving is required."""
    return ERROR if ctx.get("require_serving") else WARNING


def check_image(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/image.yml (build once, distribute to every rank)"
    tag = ctx.get("image")
    if not tag:
        return [skipped(host, "serve.image", INFO, "no serving image (no serving profile)", fix)]
    failure = _probe_failure(obs, "image", "present")
    if failure:
        return [_unprobed(host, "serve.image", ERROR, "image inspect failed", failure, fix)]
    image = _result(obs, "image")
    if image.get("present"):
        return [passed(host, "serve.image", ERROR, f"{tag} present ({str(image.get('id'))[:19]})", fix)]
    severity = ERROR if running(obs) else _deployed_severity(ctx)
    return [failed(host, "serve.image", severity, f"{tag} is not on this node (not distributed yet?)", fix)]


def check_container(host: str, obs: Observation, ctx: Context, mode: str) -> List[Check]:
    name = ctx.get("container") or "?"
    fix = "run playbooks/serve.yml (or playbooks/stop.yml to stop every rank)"
    state = container(obs)
    if state.get("running"):
        extra = f", started {state.get('started_at')}, restarts {state.get('restart_count')}"
        return [passed(host, "serve.container", ERROR, f"{name} running{extra}", fix)]
    problem = _container_text(state)
    if mode == "idle":
        return [failed(host, "serve.container", INFO, f"{name}: {problem} (serving not started or stopped)", fix)]
    why = "spark_doctor_require_serving is true" if mode == "required" else "other ranks serve"
    return [failed(host, "serve.container", ERROR, f"{name}: {problem} while {why}", fix)]


CONTAINER_FIELDS = ("exists", "status", "running", "exit_code", "oom_killed", "error")


def _container_text(state: Mapping[str, Any]) -> str:
    """Why the container is not running, in the words the serve role's readiness watch uses."""
    if not state:
        return "container was not inspected"
    fields = {k: state[k] for k in CONTAINER_FIELDS if k in state}
    return container_problem(ContainerState(**fields)) or "container is running"


def check_container_image(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "replace the group with the planned image: playbooks/serve.yml -e spark_serve_replace=true"
    if not running(obs):
        return [skipped(host, "serve.container_image", ERROR, NOT_SERVING, fix)]
    want, have = _result(obs, "image").get("id"), container(obs).get("image")
    message = f"container runs {str(have)[:19]}, {ctx.get('image')} is {str(want)[:19]}"
    return [(passed if want and have == want else failed)(host, "serve.container_image", ERROR, message, fix)]


def check_container_spec(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "replace the group with the planned spec: playbooks/serve.yml -e spark_serve_replace=true"
    spec = obs.get("spec")
    if not running(obs):
        return [skipped(host, "serve.container_spec", ERROR, NOT_SERVING, fix)]
    if not isinstance(spec, Mapping):
        return [skipped(host, "serve.container_spec", ERROR, "no serve spec (no serving profile)", fix)]
    state = container(obs)
    problems = []
    if list(state.get("cmd") or []) != [str(a) for a in spec.get("command") or []]:
        problems.append("engine arguments differ from the serve spec")
    env = state.get("env") or {}
    wrong = sorted(k for k, v in (spec.get("env") or {}).items() if env.get(k) != str(v))
    if wrong:
        problems.append(f"environment differs in {', '.join(wrong)}")
    message = "; ".join(problems) or f"arguments and {len(spec.get('env') or {})} environment variables match the spec"
    return [(failed if problems else passed)(host, "serve.container_spec", ERROR, message, fix)]


def check_kernel_backend(host: str, obs: Observation, ctx: Context) -> List[Check]:
    """The running container's backends, drafter backend and kernel env against the profile's kernel_backend."""
    fix = "replace the group with the planned profile: playbooks/serve.yml -e spark_serve_replace=true"
    backend = ctx.get("kernel_backend")
    if not running(obs):
        return [skipped(host, "serve.kernel_backend", ERROR, NOT_SERVING, fix)]
    if not backend:
        return [skipped(host, "serve.kernel_backend", ERROR, "no kernel backend planned (no serving profile)", fix)]
    state = container(obs)
    problems = backend_errors(backend, [str(a) for a in state.get("cmd") or []], state.get("env") or {})
    message = "; ".join(problems) or f"container runs kernel backend {backend} in every coupled setting"
    return [(failed if problems else passed)(host, "serve.kernel_backend", ERROR, message, fix)]


def check_guard(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "restart the group under its guards: playbooks/serve.yml -e spark_serve_replace=true"
    if not running(obs):
        return [skipped(host, "serve.guard", ERROR, NOT_SERVING, fix)]
    failure = _probe_failure(obs, "guard", "actions")
    if failure:
        return [_unprobed(host, "serve.guard", ERROR, "guard unreadable", failure, fix)]
    guard = _result(obs, "guard")
    params = guard.get("params") or {}
    if guard.get("changed"):
        return [failed(host, "serve.guard", ERROR, f"steady guard not armed as planned: {guard.get('reason')}", fix)]
    return [passed(host, "serve.guard", ERROR, f"steady guard armed ({params.get('threshold')}, "
                                               f"every {params.get('interval')} s)", fix)]


def check_model(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/model.yml (fans out and verifies against the download host's manifest)"
    model = _result(obs, "model")
    if not model.get("manifest_exists"):
        severity = ERROR if running(obs) else _deployed_severity(ctx)
        return [failed(host, "model.files", severity, f"no manifest in {ctx.get('model_dir')} (model not synced?)", fix)]
    failure = _probe_failure(model, "verify", "checked_files")
    if failure:
        return [_unprobed(host, "model.files", ERROR, "manifest check failed", failure, fix)]
    verify = _result(model, "verify")
    want = ctx.get("model_revision")
    if want and verify.get("revision") != want:
        return [failed(host, "model.files", ERROR, f"manifest is for revision {verify.get('revision')}, pinned {want}", fix)]
    problems = verify.get("problems") or []
    if problems:
        shown = "; ".join(f"{p.get('path')}: {p.get('problem')}" for p in problems[:5])
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        return [failed(host, "model.files", ERROR, f"{len(problems)} file(s) differ from the manifest: {shown}{more}", fix)]
    return [passed(host, "model.files", ERROR, f"{verify.get('checked_files')} files match the manifest "
                                               f"(sizes) at revision {str(verify.get('revision'))[:12]}", fix)]


# --- Cluster checks -------------------------------------------------------------------------------

def parity(check: str, values: Mapping[str, Any], fix: str, none_reason: str = "no node reports it") -> Check:
    """Every node must report the same value; unreadable on some nodes is an error too (reference §9)."""
    known = {h: v for h, v in values.items() if v is not None}
    unknown = sorted(h for h, v in values.items() if v is None)
    if not known:
        return skipped(CLUSTER, check, ERROR, none_reason, fix)
    distinct = {json.dumps(v, sort_keys=True) for v in known.values()}
    if len(distinct) > 1:
        shown = ", ".join(f"{h}={_short(v)}" for h, v in sorted(known.items()))
        return failed(CLUSTER, check, ERROR, f"ranks differ: {shown}", fix)
    if unknown:
        return failed(CLUSTER, check, ERROR, f"unreadable on {', '.join(unknown)} "
                                             f"(others: {_short(next(iter(known.values())))})", fix)
    return passed(CLUSTER, check, ERROR, f"{_short(next(iter(known.values())))} on all {len(known)} nodes", fix)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


HOST_PARITY = (
    ("kernel", "kernel_release", False), ("page_size", "page_size", False), ("driver", "driver_running", True),
    ("uvm_srcversion", "uvm_srcversion", True), ("uvm_packing", "uvm_packing", True), ("thp", "thp", False),
    ("secure_boot", "secure_boot", False),
)


def check_host_parity(nodes: Mapping[str, Observation], ctx: Context) -> List[Check]:
    fix = "never upgrade one rank alone: bring every node to the same pins with playbooks/host.yml"
    out = []
    gpus = any(has_gpu(o) for o in nodes.values())
    efi = any(_result(o, "probe").get("efi") for o in nodes.values())
    for name, key, needs_gpu in HOST_PARITY:
        values = {h: _facts(o).get(key) for h, o in nodes.items()}
        reason = f"no node reports {key}"
        if needs_gpu and not gpus:
            reason = NO_GPU
        elif key == "secure_boot" and not efi:
            reason = NO_EFI
        out.append(parity(f"parity.{name}", values, fix, reason))
    min_free = {h: (_facts(o).get("sysctls") or {}).get("vm.min_free_kbytes") for h, o in nodes.items()}
    out.append(parity("parity.min_free_kbytes", min_free, fix))
    return out


def check_image_parity(nodes: Mapping[str, Observation], ctx: Context) -> List[Check]:
    fix = "run playbooks/image.yml: every rank must hold the same image ID under the tag"
    images = {h: _result(o, "image") for h, o in nodes.items()}
    ids = {h: (i.get("id") if i.get("present") else None) for h, i in images.items()}
    labels = {h: (i.get("labels") if i.get("present") else None) for h, i in images.items()}
    reason = f"no node holds {ctx.get('image')}" if ctx.get("image") else "no serving image (no serving profile)"
    return [parity("parity.image_id", ids, fix, reason), parity("parity.image_labels", labels, fix, reason)]


def check_model_parity(nodes: Mapping[str, Observation], ctx: Context) -> List[Check]:
    fix = "run playbooks/model.yml: every rank must hold the download host's manifest"
    digests = {h: _result(o, "model").get("manifest_sha256") for h, o in nodes.items()}
    return [parity("parity.model_manifest", digests, fix, f"no node holds a model manifest in {ctx.get('model_dir')}")]


def check_api(nodes: Mapping[str, Observation], ctx: Context, mode: str) -> List[Check]:
    fix = "read the head's container log (docker logs); restart with playbooks/serve.yml -e spark_serve_replace=true"
    api = ctx.get("api") or {}
    url, model = api.get("url"), ctx.get("model_name")
    if mode == "idle":
        return [skipped(CLUSTER, "serve.api", ERROR, "no serving container runs", fix)]
    models = list(api.get("models") or [])
    if api.get("status") == 200 and model in models:
        return [passed(CLUSTER, "serve.api", ERROR, f"{url} lists {model}", fix)]
    return [failed(CLUSTER, "serve.api", ERROR, f"{url} answered {api.get('status')} with models {models}, "
                                                f"expected {model}", fix)]


def check_router(ctx: Context, mode: str) -> List[Check]:
    """The router (group spark_router), when the inventory has one: it answers and lists every serving group's
    head as healthy. No check without a router."""
    router = ctx.get("router")
    if not router:
        return []
    fix = ("journalctl -u sparkfleet-router on the router host and playbooks/router.yml; a head out of rotation: "
           "playbooks/status.yml")
    url = router.get("url")
    if router.get("error"):
        return [failed(CLUSTER, "router", ERROR, f"the router cannot be planned: {router['error']}", fix)]
    if mode == "idle":
        return [skipped(CLUSTER, "router", ERROR, f"no serving container runs, so {url} has no head to route to", fix)]
    if router.get("status") != 200:
        return [failed(CLUSTER, "router", ERROR, f"{url}/workers answered {router.get('status')}", fix)]
    seen = {w.get("url"): bool(w.get("is_healthy")) for w in router.get("workers") or [] if isinstance(w, Mapping)}
    wanted = list(router.get("backends") or [])
    missing = [b for b in wanted if b not in seen]
    unhealthy = [b for b in wanted if b in seen and not seen[b]]
    if missing or unhealthy:
        problems = ([f"not listed: {', '.join(missing)}"] if missing else []) + (
            [f"unhealthy: {', '.join(unhealthy)}"] if unhealthy else [])
        return [failed(CLUSTER, "router", ERROR, f"{url} routes without every head ({'; '.join(problems)})", fix)]
    return [passed(CLUSTER, "router", ERROR, f"{url} lists every head healthy ({', '.join(wanted)})", fix)]


def check_config(ctx: Context) -> List[Check]:
    out = []
    fix = "correct the inventory (playbooks/validate.yml names host and variable)"
    errors = list(ctx.get("validate_errors") or [])
    out.append(failed(CLUSTER, "config.inventory", ERROR, "; ".join(errors), fix) if errors else
               passed(CLUSTER, "config.inventory", ERROR, f"inventory valid: {len(ctx.get('hosts') or [])} nodes, "
                                                          f"topology {ctx.get('topology')}", fix))
    fix = "correct the spark_serve_* profile in group_vars/spark/serve.yml (docs/serve-profile.md)"
    if ctx.get("serve_error"):
        out.append(failed(CLUSTER, "config.serve_profile", ERROR, str(ctx["serve_error"]), fix))
    elif ctx.get("serve_refusals"):
        out.append(failed(CLUSTER, "config.serve_profile", ERROR, "; ".join(ctx["serve_refusals"]), fix))
    elif not ctx.get("profile"):
        out.append(failed(CLUSTER, "config.serve_profile", INFO, "no serving profile for this topology", fix))
    else:
        out.append(passed(CLUSTER, "config.serve_profile", ERROR, f"profile {ctx['profile']} may launch", fix))
    return out


def check_unreachable(ctx: Context) -> List[Check]:
    fix = "reach the node (ansible -m ping, console) and rerun the doctor"
    failures = ctx.get("unreachable") or {}
    return [failed(str(h), "node.reachable", ERROR, f"no answer from the node: {failures[h]}", fix)
            for h in sorted(failures)]


# --- Report ---------------------------------------------------------------------------------------

# --- Host recovery policy (host-kernel-driver.md §7) ------------------------------------------------

def parse_unit_settings(text: Optional[str]) -> Dict[str, str]:
    """Key=value lines of a systemd unit or configuration drop-in (the last assignment wins, as in systemd)."""
    settings: Dict[str, str] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if "=" in line and not line.startswith(("#", ";", "[")):
            key, value = line.split("=", 1)
            settings[key.strip()] = value.strip()
    return settings


def _recovery(ctx: Context) -> Mapping[str, Any]:
    return ctx.get("recovery") or {}


def _recovery_file(obs: Observation, path: str) -> Optional[str]:
    return ((obs.get("recovery_files") or {}).get("contents") or {}).get(path)


def _recovery_file_check(host: str, obs: Observation, check: str, path: str,
                         want: Mapping[str, str], fix: str) -> List[Check]:
    text = _recovery_file(obs, path)
    if text is None:
        return [failed(host, check, WARNING, f"{path} is missing", fix)]
    have = parse_unit_settings(text)
    wrong = [f"{key}={have.get(key, 'unset')}, want {value}" for key, value in want.items()
             if have.get(key) != str(value)]
    if wrong:
        return [failed(host, check, WARNING, f"{path}: " + "; ".join(wrong), fix)]
    return [passed(host, check, WARNING, ", ".join(f"{k}={v}" for k, v in want.items()), fix)]


def check_recovery_watchdog(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/host.yml (host recovery policy), then systemctl daemon-reexec"
    rec = _recovery(ctx)
    if not rec.get("enabled"):
        return [skipped(host, "host.recovery_watchdog", WARNING, "no recovery policy (spark_host_baseline_recovery is false)", fix)]
    want = {"RuntimeWatchdogSec": rec.get("runtime_watchdog"), "RebootWatchdogSec": rec.get("reboot_watchdog")}
    return _recovery_file_check(host, obs, "host.recovery_watchdog", rec.get("watchdog_file", ""), want, fix)


def check_recovery_ssh(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/host.yml (ssh.service MemoryMin and OOMScoreAdjust drop-in)"
    rec = _recovery(ctx)
    if not rec.get("enabled"):
        return [skipped(host, "host.recovery_ssh_oom", WARNING, "no recovery policy (spark_host_baseline_recovery is false)", fix)]
    protect = rec.get("ssh") or {}
    want = {"MemoryMin": protect.get("memory_min"), "OOMScoreAdjust": protect.get("oom_score_adjust")}
    return _recovery_file_check(host, obs, "host.recovery_ssh_oom", rec.get("ssh_dropin", ""), want, fix)


def check_recovery_sysctls(host: str, obs: Observation, ctx: Context) -> List[Check]:
    fix = "run playbooks/host.yml (95-spark-recovery.conf), or sysctl -p /etc/sysctl.d/95-spark-recovery.conf"
    rec = _recovery(ctx)
    if not rec.get("enabled"):
        return [skipped(host, "host.recovery_sysctls", WARNING, "no recovery policy (spark_host_baseline_recovery is false)", fix)]
    live = _facts(obs).get("sysctls") or {}
    wrong = [f"{key}={live.get(key)}, want {value}" for key, value in (rec.get("sysctls") or {}).items()
             if str(live.get(key)) != str(value)]
    if wrong:
        return [failed(host, "host.recovery_sysctls", WARNING, "; ".join(wrong), fix)]
    return [passed(host, "host.recovery_sysctls", WARNING,
                   ", ".join(f"{k}={v}" for k, v in (rec.get("sysctls") or {}).items()), fix)]


def check_recovery_health_timer(host: str, obs: Observation, ctx: Context) -> List[Check]:
    rec = _recovery(ctx)
    unit_name = f"{rec.get('health_unit') or 'spark-management-health'}.timer"
    fix = f"run playbooks/host.yml, or systemctl enable --now {unit_name}"
    if not rec.get("enabled"):
        return [skipped(host, "host.recovery_health_timer", WARNING, "no recovery policy (spark_host_baseline_recovery is false)", fix)]
    unit = (_result(obs, "probe").get("units") or {}).get(unit_name) or {}
    if unit.get("active") == "active" and unit.get("enabled") == "enabled":
        return [passed(host, "host.recovery_health_timer", WARNING, f"{unit_name} enabled and active", fix)]
    state = "not installed" if not unit.get("found") else f"{unit.get('enabled')}, {unit.get('active')}"
    return [failed(host, "host.recovery_health_timer", WARNING, f"{unit_name} {state}", fix)]


NODE_CHECKS: Tuple[Callable[[str, Observation, Context], List[Check]], ...] = (
    check_tools, check_gpu_device, check_kernel_flavour, check_page_size, check_kernel_release, check_kho, check_driver,
    check_memory_saver, check_memlock, check_display, check_drm, check_secure_boot, check_fan_control,
    check_memory_policy, check_recovery_watchdog, check_recovery_sysctls, check_recovery_ssh,
    check_recovery_health_timer, check_gpu_clock, check_rdma_devices, check_fabric_state, check_paths, check_gid,
    check_image, check_container_image, check_container_spec, check_kernel_backend, check_guard, check_model,
)


def node_checks(host: str, obs: Observation, ctx: Context, mode: str) -> List[Check]:
    out: List[Check] = []
    for check in NODE_CHECKS:
        out.extend(check(host, obs, ctx))
    out.extend(check_container(host, obs, ctx, mode))
    return out


def evaluate(nodes: Mapping[str, Observation], ctx: Context) -> List[Check]:
    """Every check, configuration first, then per node in rank order, then cross-rank parity."""
    checks = check_config(ctx) + check_unreachable(ctx)
    if not nodes:
        return checks
    mode = serving_mode(nodes, ctx)
    for host in sorted(nodes, key=lambda h: (nodes[h].get("rank", 0), h)):
        checks.extend(node_checks(host, nodes[host], ctx, mode))
    checks.extend(check_host_parity(nodes, ctx))
    checks.extend(check_image_parity(nodes, ctx))
    checks.extend(check_model_parity(nodes, ctx))
    checks.extend(check_api(nodes, ctx, mode))
    checks.extend(check_router(ctx, mode))
    return checks


def summarise(checks: Sequence[Check]) -> Dict[str, int]:
    """Each check counts once: ok, skipped, or (failed) under its severity."""
    summary = {ERROR: 0, WARNING: 0, INFO: 0, OK: 0, SKIPPED: 0}
    for check in checks:
        summary[check.severity if check.status == FAIL else check.status] += 1
    return summary


def report(nodes: Mapping[str, Observation], ctx: Context, generated: str) -> Dict[str, Any]:
    """doctor.json (schema sparkfleet-doctor/1); `ok` is false when any check failed with severity error."""
    checks = evaluate(nodes, ctx)
    summary = summarise(checks)
    return {"schema": SCHEMA, "generated": generated, "inventory_topology": ctx.get("topology"),
            "summary": summary, "ok": summary[ERROR] == 0, "checks": [c.as_dict() for c in checks]}


def table(doc: Mapping[str, Any]) -> List[str]:
    """One line per node and check: status, severity, node, check, message, and the fix of a failure."""
    lines = []
    for c in doc.get("checks") or []:
        status = c["status"] if c["status"] != FAIL else f"FAIL:{c['severity']}"
        fix = f"  -> fix: {c['fix']}" if c["status"] == FAIL else ""
        lines.append(f"{status:<14} {c['node']:<8} {c['check']:<24} {c['message']}{fix}")
    s = doc.get("summary") or {}
    lines.append(f"doctor: {s.get(ERROR, 0)} error(s), {s.get(WARNING, 0)} warning(s), {s.get(INFO, 0)} info, "
                 f"{s.get(OK, 0)} ok, {s.get(SKIPPED, 0)} skipped -> {'OK' if doc.get('ok') else 'NOT OK'}")
    return lines
