"""The doctor's evaluation (module_utils/spark_doctor.py): every check's ok, fail and skipped cases, parity
across ranks, the summary and the exit decision."""
from __future__ import annotations

import copy
import json
from typing import Any, Callable, Dict, List

import pytest

from ansible_collections.sparkfleet.spark.plugins.module_utils import spark_doctor as doc

HOSTS = ("dgx1", "dgx2", "dgx3")
IMAGE_ID = "sha256:" + "a" * 64
SPEC = {"name": "dsv41-karmic-kraken", "image": "sparkfleet/vllm-ds41f:r6d-0123456789ab",
        "command": ["/models", "--tensor-parallel-size", "3", "--attention-backend", "TILELANG", "--linear-backend",
                    "tilelang", "--moe-backend", "tilelang", "--speculative-config",
                    '{"method":"dspark","attention_backend":"TILELANG"}', "--node-rank", "0"],
        "env": {"NCCL_IB_GID_INDEX": "3", "VLLM_HOST_IP": "10.0.1.71", "VLLM_DS41_KERNEL_BACKEND": "tilelang",
                "TILELANG_CACHE_DIR": "/cache/kkref/jit/tilelang"}}
RDMA = ["rocep1s0f0", "roceP2p1s0f0", "rocep1s0f1", "roceP2p1s0f1"]


WATCHDOG_FILE = "/etc/systemd/system.conf.d/95-spark-recovery.conf"
SSH_DROPIN = "/etc/systemd/system/ssh.service.d/95-spark-recovery.conf"
# The files as host_baseline writes them (templates recovery-watchdog.conf.j2, recovery-unit-protect.conf.j2).
WATCHDOG_TEXT = ("# Managed by sparkfleet (host_baseline role): the SBSA hardware watchdog resets a hung node.\n"
                 "[Manager]\nRuntimeWatchdogSec=30s\nRebootWatchdogSec=10min\n")
SSH_DROPIN_TEXT = ("# Managed by sparkfleet (host_baseline role): keep this management service alive under memory "
                   "pressure.\n[Service]\nMemoryMin=128M\nOOMScoreAdjust=-900\n")
RECOVERY = {"enabled": True, "watchdog_file": WATCHDOG_FILE, "runtime_watchdog": "30s", "reboot_watchdog": "10min",
            "sysctls": {"kernel.panic": "30", "kernel.panic_on_oops": "1", "vm.panic_on_oom": "0"},
            "ssh_dropin": SSH_DROPIN, "ssh": {"memory_min": "128M", "oom_score_adjust": -900},
            "health_unit": "spark-management-health"}


def spark(rank: int, serving: bool = True) -> Dict[str, Any]:
    """One converged DGX Spark as the role collects it."""
    return {
        "rank": rank,
        "planned_rdma": list(RDMA),
        "spec": copy.deepcopy(SPEC),
        "host_facts": {"host": {
            "kernel_release": "7.0.0-1019-nvidia-64k", "page_size": 65536, "page_size_flavour": "64k",
            "page_size_matches_flavour": True, "kho_off": True, "driver_running": "580.178.04",
            "uvm_srcversion": "34683B82C2D3339BBD2EEC9", "uvm_packing": "Y", "secure_boot": True,
            "thp": "never",
            "sysctls": {"vm.min_free_kbytes": 45166, "kernel.panic": 30, "kernel.panic_on_oops": 1, "vm.panic_on_oom": 0}, "memlock": {"soft": "unlimited"},
            "display_manager": "inactive", "display_manager_active": False, "default_target": "multi-user.target",
            "unavailable": {}}},
        "probe": {
            "devices": {"/dev/nvidia0": True}, "rdma_devices": list(RDMA), "efi": True,
            "nvidia_drm": {"modeset": "Y", "fbdev": "Y"},
            "units": {"dgx-fan-control.service": {"found": True, "active": "active", "enabled": "enabled"},
                      "spark-management-health.timer": {"found": True, "active": "active", "enabled": "enabled"}},
            "container": {"exists": True, "status": "running" if serving else "exited", "running": serving,
                          "exit_code": 0, "oom_killed": False, "error": "", "image": IMAGE_ID,
                          "cmd": list(SPEC["command"]), "env": dict(SPEC["env"], PATH="/usr/bin"),
                          "labels": {}, "started_at": "2026-11-29T10:00:00Z", "restart_count": 0},
            "gpu": {"sm_clock_mhz": 2171, "reason": None}},
        "fabric_state": {"ok": True, "differences": [], "interfaces": {n: {} for n in ("a", "b", "c", "d")}},
        "fabric_paths": {"ok": True, "paths": [{"netdev": "enp1s0f0np0", "ok": True, "size": 8972, "problems": []}]},
        "gid": {"ok": True, "msg": "GID index 3 holds the IPv4 RoCE v2 GID on 4 devices", "gid_index": 3,
                "devices": {}},
        "image": {"present": True, "id": IMAGE_ID, "labels": {"org.sparkfleet.tree.vllm": "1a64"}},
        "model": {"manifest_exists": True, "manifest_sha256": "f" * 64,
                  "verify": {"ok": True, "revision": "d" * 40, "checked_files": 48, "problems": []}},
        "guard": {"changed": False, "actions": [], "reason": "armed", "params": {"threshold": "3.00 GiB",
                                                                                "interval": 2.0}},
        "recovery_files": {"contents": {WATCHDOG_FILE: WATCHDOG_TEXT, SSH_DROPIN: SSH_DROPIN_TEXT}, "missing": []},
    }


def lab(rank: int, serving: bool = True) -> Dict[str, Any]:
    """A lab node: no GPU, no RDMA, no EFI, 4 KiB kernel, no NVIDIA driver."""
    obs = spark(rank, serving)
    facts = obs["host_facts"]["host"]
    facts.update(kernel_release="6.1.0-27-amd64", page_size=4096, page_size_flavour="4k", kho_off=False,
                 driver_running=None, uvm_srcversion=None, uvm_packing=None, secure_boot=None, thp="madvise",
                 sysctls={"vm.min_free_kbytes": 67584}, memlock={"soft": 8388608})
    facts["unavailable"] = {"driver_running": "nvidia module not loaded", "secure_boot": "mokutil is not installed"}
    obs["probe"].update(devices={"/dev/nvidia0": False}, rdma_devices=[], efi=False,
                        nvidia_drm={"modeset": None, "fbdev": None}, units={}, gpu={"sm_clock_mhz": None})
    obs["gid"] = {"skipped": True, "false_condition": "doctor_probe.rdma_devices | length > 0"}
    return obs


def context(**overrides: Any) -> Dict[str, Any]:
    ctx = {"topology": "triangle", "hosts": list(HOSTS), "validate_errors": [], "unreachable": {},
           "serve_error": None, "serve_refusals": [], "profile": "tp3-r6-64k", "image": SPEC["image"],
           "kernel_backend": "tilelang",
           "container": SPEC["name"], "model_name": "deepseek-v4.1-flash",
           "requires": {"kernel_flavour": "64k", "page_size": 65536, "memory_saver": True},
           "kernel_flavour": "64k", "kernel_releases": ["7.0.0-1019-nvidia", "7.0.0-1019-nvidia-64k"],
           "driver_version": "580.178.04", "min_free_kbytes_64k": 45166, "model_revision": "d" * 40,
           "model_dir": "/var/lib/sparkfleet/models/deepseek-v4.1-flash", "device_policy": "require",
           "require_serving": False, "fan_unit": "dgx-fan-control.service", "recovery": copy.deepcopy(RECOVERY),
           "api": {"url": "http://10.0.1.71:8000/v1/models", "status": 200, "models": ["deepseek-v4.1-flash"]}}
    ctx.update(overrides)
    return ctx


LAB_CONTEXT = {"device_policy": "available", "requires": {"kernel_flavour": "4k", "page_size": 4096,
                                                           "memory_saver": False}}


def cluster(make: Callable[..., Dict[str, Any]] = spark, **kwargs: Any) -> Dict[str, Dict[str, Any]]:
    return {h: make(i, **kwargs) for i, h in enumerate(HOSTS)}


def find(checks: List[doc.Check], node: str, name: str) -> doc.Check:
    found = [c for c in checks if c.node == node and c.check == name]
    assert len(found) == 1, f"{node} {name}: {found}"
    return found[0]


def run(nodes: Dict[str, Dict[str, Any]], ctx: Dict[str, Any], node: str, name: str) -> doc.Check:
    return find(doc.evaluate(nodes, ctx), node, name)


# --- whole reports ---------------------------------------------------------------------------------

def test_converged_spark_cluster_has_no_failures() -> None:
    checks = doc.evaluate(cluster(), context())
    assert [c for c in checks if c.status != doc.OK] == []
    per_node = [c.check for c in checks if c.node == "dgx1"]
    assert len(per_node) == len(set(per_node)) == 33
    assert len(checks) == 2 + 3 * 33 + 8 + 2 + 1 + 1   # configuration, nodes, host/image/model parity, API
    assert all(c.fix for c in checks) and all(c.severity in doc.SEVERITIES for c in checks)


def test_converged_lab_has_no_errors_and_skips_hardware_with_no_device() -> None:
    report = doc.report(cluster(lab), context(**LAB_CONTEXT), "2026-11-29T14:00:00Z")
    errors = [c for c in report["checks"] if c["status"] == "fail" and c["severity"] == "error"]
    assert errors == [] and report["ok"] is True
    dgx2 = {c["check"]: c for c in report["checks"] if c["node"] == "dgx2"}
    for name in ("host.gpu_device", "host.driver", "host.drm_modeset", "host.drm_fbdev", "host.fan_control",
                 "host.gpu_clock", "host.memory_saver"):
        assert (dgx2[name]["status"], dgx2[name]["message"]) == ("skipped", "no /dev/nvidia0"), name
    for name in ("fabric.rdma_devices", "fabric.gid", "host.kho_off", "host.memlock"):
        assert (dgx2[name]["status"], dgx2[name]["message"]) == ("skipped", "no RDMA device"), name
    assert (dgx2["host.secure_boot"]["status"], dgx2["host.secure_boot"]["message"]) == ("skipped", "no /sys/firmware/efi")
    assert dgx2["host.kernel_flavour"]["status"] == "ok"   # compared with spark_serve_requires (4k)
    assert dgx2["host.kernel_release"]["status"] == "fail" and dgx2["host.kernel_release"]["severity"] == "warning"
    # Every skip says what is missing, so a reader (and the site scenario) can tell it from a pass.
    assert all(c["message"].startswith("no ") for c in report["checks"] if c["status"] == "skipped")
    parity = {c["check"]: c for c in report["checks"] if c["node"] == "cluster"}
    assert parity["parity.secure_boot"]["message"] == "no /sys/firmware/efi"
    assert parity["parity.driver"]["message"] == "no /dev/nvidia0"


def test_report_shape_and_summary_counts() -> None:
    nodes = cluster()
    nodes["dgx2"]["host_facts"]["host"]["default_target"] = "graphical.target"   # warning
    report = doc.report(nodes, context(), "2026-11-29T14:00:00Z")
    assert set(report) == {"schema", "generated", "inventory_topology", "summary", "ok", "checks"}
    assert report["schema"] == "sparkfleet-doctor/1" and report["inventory_topology"] == "triangle"
    assert report["summary"] == {"error": 0, "warning": 1, "info": 0, "ok": len(report["checks"]) - 1, "skipped": 0}
    assert report["ok"] is True
    assert set(report["checks"][0]) == {"node", "check", "status", "severity", "message", "fix"}
    json.dumps(report)


def test_one_error_makes_the_report_not_ok_and_the_table_says_so() -> None:
    nodes = cluster()
    nodes["dgx3"]["host_facts"]["host"]["kho_off"] = False
    report = doc.report(nodes, context(), "t")
    assert report["ok"] is False and report["summary"]["error"] == 1
    lines = doc.table(report)
    bad = [line for line in lines if line.startswith("FAIL:error")]
    assert len(bad) == 1 and "dgx3" in bad[0] and "host.kho_off" in bad[0] and "-> fix: run playbooks/host.yml" in bad[0]
    assert lines[-1].startswith("doctor: 1 error(s), 0 warning(s)") and lines[-1].endswith("NOT OK")
    assert len(lines) == len(report["checks"]) + 1


def test_info_and_skipped_never_make_the_report_fail() -> None:
    summary = doc.summarise([doc.failed("n", "a", doc.INFO, "m", "f"), doc.skipped("n", "b", doc.ERROR, "m", "f"),
                             doc.failed("n", "c", doc.WARNING, "m", "f"), doc.passed("n", "d", doc.ERROR, "m", "f")])
    assert summary == {"error": 0, "warning": 1, "info": 1, "ok": 1, "skipped": 1}


# --- configuration ---------------------------------------------------------------------------------

def test_inventory_errors_and_profile_problems_are_configuration_errors() -> None:
    ctx = context(validate_errors=["host dgx2: spark_rank must be an integer"], serve_refusals=["profile x refused"])
    checks = doc.evaluate({}, ctx)
    assert [(c.check, c.status, c.severity) for c in checks] == [
        ("config.inventory", "fail", "error"), ("config.serve_profile", "fail", "error")]
    assert "spark_rank" in checks[0].message
    assert find(doc.evaluate({}, context(serve_error="host dgx1: spark_serve_env must be a mapping")),
                "cluster", "config.serve_profile").message.startswith("host dgx1")
    none = find(doc.evaluate({}, context(profile=None)), "cluster", "config.serve_profile")
    assert (none.status, none.severity) == ("fail", "info")


def test_unreachable_node_is_an_error_naming_it() -> None:
    nodes = cluster()
    del nodes["dgx3"]
    checks = doc.evaluate(nodes, context(unreachable={"dgx3": "failed or unreachable during the probes"}))
    check = find(checks, "dgx3", "node.reachable")
    assert (check.status, check.severity) == ("fail", "error")


# --- host ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mutate, check, status, severity, text", [
    (lambda o, c: o["host_facts"]["host"].update(page_size_flavour="4k", kernel_release="7.0.0-1019-nvidia"),
     "host.kernel_flavour", "fail", "error", "wants 64k"),
    (lambda o, c: c.update(requires={}, kernel_flavour=None), "host.kernel_flavour", "skipped", "error", "no kernel flavour"),
    (lambda o, c: c.update(requires={}), "host.kernel_flavour", "ok", "error", "spark_kernel_candidate_release"),
    (lambda o, c: o["host_facts"]["host"].update(page_size=4096), "host.page_size", "fail", "error", "required 65536"),
    (lambda o, c: o["host_facts"]["host"].update(page_size_matches_flavour=False), "host.page_size", "fail", "error",
     "does not match"),
    (lambda o, c: o["host_facts"]["host"].update(kernel_release="6.17.0-1032-nvidia"), "host.kernel_release", "fail",
     "warning", "outside the prepared pair"),
    (lambda o, c: c.update(kernel_releases=[None, None]), "host.kernel_release", "skipped", "warning", "no prepared"),
    (lambda o, c: o["host_facts"]["host"].update(kho_off=False), "host.kho_off", "fail", "error", "kho=off is missing"),
    (lambda o, c: o["host_facts"]["host"].update(kho_off=None), "host.kho_off", "fail", "error", "unreadable"),
    (lambda o, c: o["host_facts"]["host"].update(driver_running="590.44.01"), "host.driver", "fail", "error",
     "590.44.01 running, pinned 580.178.04"),
    (lambda o, c: o["host_facts"]["host"].update(driver_running=None), "host.driver", "fail", "error", "no driver loaded"),
    (lambda o, c: o["host_facts"]["host"].update(uvm_packing=None), "host.memory_saver", "fail", "error", "not active"),
    (lambda o, c: (o["host_facts"]["host"].update(uvm_packing=None), c["requires"].update(memory_saver=False)),
     "host.memory_saver", "ok", "info", "not required"),
    (lambda o, c: o["host_facts"]["host"].update(memlock={"soft": 65536}), "host.memlock", "fail", "error", "65536"),
    (lambda o, c: o["host_facts"]["host"].update(display_manager="active", display_manager_active=True),
     "host.display_manager", "fail", "error", "display manager active"),
    (lambda o, c: o["host_facts"]["host"].update(display_manager=None, display_manager_active=None),
     "host.display_manager", "fail", "warning", "unreadable"),
    (lambda o, c: o["host_facts"]["host"].update(default_target="graphical.target"), "host.default_target", "fail",
     "warning", "graphical.target"),
    (lambda o, c: o["probe"]["nvidia_drm"].update(modeset="N"), "host.drm_modeset", "fail", "error", "modeset=N"),
    (lambda o, c: o["probe"]["nvidia_drm"].update(fbdev=None), "host.drm_fbdev", "fail", "error", "unreadable"),
    (lambda o, c: o["host_facts"]["host"].update(secure_boot=False), "host.secure_boot", "fail", "warning", "disabled"),
    (lambda o, c: o["host_facts"]["host"].update(secure_boot=None), "host.secure_boot", "fail", "warning", "unreadable"),
    (lambda o, c: o["probe"].update(units={}), "host.fan_control", "fail", "warning", "not installed"),
    (lambda o, c: o["probe"]["units"]["dgx-fan-control.service"].update(active="failed"), "host.fan_control", "fail",
     "warning", "enabled, failed"),
    (lambda o, c: o["host_facts"]["host"].update(thp="always"), "host.memory_policy", "fail", "warning", "THP always"),
    (lambda o, c: o["host_facts"]["host"].update(sysctls={"vm.min_free_kbytes": 67584}), "host.memory_policy", "fail",
     "warning", "want 45166"),
    (lambda o, c: o["host_facts"]["host"].update(page_size_flavour="4k"), "host.memory_policy", "skipped", "warning",
     "no 64 KiB kernel"),
    (lambda o, c: o["probe"]["gpu"].update(sm_clock_mhz=600), "host.gpu_clock", "fail", "error", "600 MHz"),
    (lambda o, c: o["probe"]["gpu"].update(sm_clock_mhz=None, reason="nvidia-smi rc 9"), "host.gpu_clock", "fail",
     "warning", "unreadable"),
    (lambda o, c: o["probe"]["container"].update(running=False, status="exited"), "host.gpu_clock", "skipped", "error",
     "no running serving container"),
])
def test_host_checks(mutate: Callable[[Dict[str, Any], Dict[str, Any]], Any], check: str, status: str,
                     severity: str, text: str) -> None:
    nodes, ctx = cluster(), context()
    mutate(nodes["dgx2"], ctx)
    result = run(nodes, ctx, "dgx2", check)
    assert (result.status, result.severity) == (status, severity), result
    assert text in result.message


def test_missing_gpu_is_an_error_on_a_spark_and_skipped_where_devices_are_optional() -> None:
    nodes = cluster()
    nodes["dgx1"]["probe"]["devices"]["/dev/nvidia0"] = False
    spark_result = run(nodes, context(), "dgx1", "host.gpu_device")
    assert (spark_result.status, spark_result.severity, spark_result.message) == ("fail", "error", "no /dev/nvidia0")
    lab_result = run(nodes, context(device_policy="available"), "dgx1", "host.gpu_device")
    assert (lab_result.status, lab_result.message) == ("skipped", "no /dev/nvidia0")


# --- fabric ----------------------------------------------------------------------------------------

def test_rdma_devices_missing_none_or_some() -> None:
    nodes = cluster()
    nodes["dgx1"]["probe"]["rdma_devices"] = []
    nodes["dgx2"]["probe"]["rdma_devices"] = RDMA[:3]
    none = run(nodes, context(), "dgx1", "fabric.rdma_devices")
    assert (none.status, none.message) == ("fail", "no RDMA device")
    assert run(nodes, context(device_policy="available"), "dgx1", "fabric.rdma_devices").status == "skipped"
    some = run(nodes, context(device_policy="available"), "dgx2", "fabric.rdma_devices")
    assert (some.status, some.severity) == ("fail", "error") and "roceP2p1s0f1" in some.message


def test_fabric_drift_splits_addresses_and_mtu() -> None:
    nodes = cluster()
    nodes["dgx3"]["fabric_state"]["differences"] = ["enp1s0f0np0: MTU 1500, plan 9000",
                                                    "enp1s0f1np1: IPv4 none, plan 10.13.1.3/24"]
    checks = doc.evaluate(nodes, context())
    addresses, mtu = find(checks, "dgx3", "fabric.addresses"), find(checks, "dgx3", "fabric.mtu")
    assert addresses.status == "fail" and "10.13.1.3/24" in addresses.message and "MTU" not in addresses.message
    assert mtu.status == "fail" and mtu.message == "enp1s0f0np0: MTU 1500, plan 9000"


def test_failed_or_skipped_probes_are_reported_not_raised() -> None:
    nodes = cluster()
    nodes["dgx1"]["fabric_state"] = {"failed": False, "msg": "ip -j address show failed (rc=1): boom"}
    nodes["dgx1"]["fabric_paths"] = {"skipped": True, "false_condition": "spark_doctor_ping_paths | bool"}
    checks = doc.evaluate(nodes, context())
    state = find(checks, "dgx1", "fabric.addresses")
    assert state.status == "fail" and "boom" in state.message
    paths = find(checks, "dgx1", "fabric.paths")
    assert paths.status == "skipped" and paths.message == "no fabric_paths probe (spark_doctor_ping_paths | bool)"


def test_a_missing_tool_is_a_failed_check_naming_the_tool_and_what_it_blocks() -> None:
    nodes = cluster()
    assert find(doc.evaluate(nodes, context()), "dgx1", "node.tools").status == doc.OK
    nodes["dgx1"]["probe"]["missing_tools"] = [
        {"tool": "docker", "needed_for": "inspecting the serving container dsv41-karmic-kraken"},
        {"tool": "nvidia-smi", "needed_for": "reading the GPU clock"}]
    nodes["dgx1"]["probe"]["container"] = dict(doc.parse_container(1, ""), status="not inspected",
                                               error="docker is not installed")
    checks = doc.evaluate(nodes, context())
    tools = find(checks, "dgx1", "node.tools")
    assert (tools.status, tools.severity) == (doc.FAIL, doc.ERROR)
    assert tools.message == ("docker is not installed (needed for inspecting the serving container "
                             "dsv41-karmic-kraken); nvidia-smi is not installed (needed for reading the GPU clock)")
    assert find(checks, "dgx2", "node.tools").status == doc.OK
    nodes["dgx1"]["probe"] = {"failed": True, "msg": "boom"}
    assert find(doc.evaluate(nodes, context()), "dgx1", "node.tools").status == doc.FAIL


def test_fan_unit_without_systemctl_says_so() -> None:
    nodes = cluster()
    nodes["dgx1"]["probe"]["units"] = {"dgx-fan-control.service": {
        "found": False, "load": "no systemctl", "active": "unknown", "enabled": "unknown"}}
    fan = find(doc.evaluate(nodes, context()), "dgx1", "host.fan_control")
    assert fan.status == doc.FAIL and fan.message == "dgx-fan-control.service state unknown: systemctl is not installed"


def test_broken_path_names_netdev_and_peer() -> None:
    nodes = cluster()
    nodes["dgx2"]["fabric_paths"]["paths"].append({"netdev": "enP2p1s0f1np1", "peer_host": "dgx1", "ok": False,
                                                   "peer_address": "10.12.2.1", "problems": ["0/2 answered"]})
    check = run(nodes, context(), "dgx2", "fabric.paths")
    assert check.status == "fail" and check.message == "enP2p1s0f1np1 -> dgx1 (10.12.2.1): 0/2 answered"


def test_gid_moved_is_an_error_with_the_module_message() -> None:
    nodes = cluster()
    nodes["dgx3"]["gid"].update(ok=False, msg="rocep1s0f0: IPv4 RoCE v2 GID of 10.13.1.3 is at index 4, not 3")
    check = run(nodes, context(), "dgx3", "fabric.gid")
    assert (check.status, check.severity) == ("fail", "error") and "index 4" in check.message


# --- service ---------------------------------------------------------------------------------------

def test_nothing_serving_is_information_unless_serving_is_required() -> None:
    nodes = cluster(serving=False)
    idle = doc.evaluate(nodes, context())
    container = find(idle, "dgx1", "serve.container")
    assert (container.status, container.severity) == ("fail", "info") and "exited" in container.message
    assert find(idle, "cluster", "serve.api").status == "skipped"
    assert find(idle, "dgx1", "serve.guard").message == "no running serving container"
    assert not [c for c in idle if c.status == "fail" and c.severity == "error"]
    required = doc.evaluate(nodes, context(require_serving=True, api={"url": "u", "status": -1, "models": []}))
    assert find(required, "dgx1", "serve.container").severity == "error"
    assert find(required, "cluster", "serve.api").status == "fail"


def test_a_partial_group_is_an_error_on_the_ranks_that_do_not_serve() -> None:
    nodes = cluster()
    nodes["dgx3"]["probe"]["container"].update(running=False, status="exited", exit_code=137, oom_killed=True)
    checks = doc.evaluate(nodes, context())
    check = find(checks, "dgx3", "serve.container")
    assert (check.status, check.severity) == ("fail", "error")
    assert "exit code 137" in check.message and "OOM-killed" in check.message and "other ranks serve" in check.message
    assert find(checks, "dgx1", "serve.container").status == "ok"


def test_missing_container_reads_does_not_exist() -> None:
    nodes = cluster(serving=False)
    nodes["dgx2"]["probe"]["container"] = {"exists": False, "status": "missing", "running": False}
    assert "container does not exist" in run(nodes, context(), "dgx2", "serve.container").message


@pytest.mark.parametrize("mutate, check, text", [
    (lambda o: o["probe"]["container"].update(image="sha256:" + "b" * 64), "serve.container_image", "container runs"),
    (lambda o: o["probe"]["container"].update(cmd=["/models"]), "serve.container_spec", "engine arguments differ"),
    (lambda o: o["probe"]["container"]["env"].update(NCCL_IB_GID_INDEX="4"), "serve.container_spec",
     "environment differs in NCCL_IB_GID_INDEX"),
    (lambda o: o["guard"].update(changed=True, reason="switch the guard from startup to steady"), "serve.guard",
     "startup to steady"),
    (lambda o: o.update(guard={"msg": "systemctl show failed (rc 1)"}), "serve.guard", "systemctl show failed"),
])
def test_running_rank_that_differs_from_the_plan_is_an_error(mutate: Callable[[Dict[str, Any]], Any], check: str,
                                                              text: str) -> None:
    nodes = cluster()
    mutate(nodes["dgx2"])
    result = run(nodes, context(), "dgx2", check)
    assert (result.status, result.severity) == ("fail", "error") and text in result.message


def test_api_not_listing_the_model_is_an_error_while_serving() -> None:
    check = run(cluster(), context(api={"url": "http://10.0.1.71:8000", "status": 200, "models": ["other"]}),
                "cluster", "serve.api")
    assert (check.status, check.severity) == ("fail", "error") and "['other']" in check.message


def test_image_and_model_not_deployed_are_warnings_then_errors_when_required_or_serving() -> None:
    nodes = cluster(serving=False)
    nodes["dgx1"]["image"] = {"present": False, "id": None, "labels": {}}
    nodes["dgx1"]["model"] = {"manifest_exists": False, "manifest_sha256": None, "verify": {"skipped": True}}
    checks = doc.evaluate(nodes, context())
    assert find(checks, "dgx1", "serve.image").severity == "warning"
    assert find(checks, "dgx1", "model.files").severity == "warning"
    required = doc.evaluate(nodes, context(require_serving=True))
    assert find(required, "dgx1", "serve.image").severity == "error"
    assert find(required, "dgx1", "model.files").severity == "error"
    assert find(doc.evaluate(nodes, context(image=None)), "dgx1", "serve.image").status == "skipped"


def test_model_revision_and_file_problems_are_errors() -> None:
    nodes = cluster()
    nodes["dgx2"]["model"]["verify"]["revision"] = "e" * 40
    nodes["dgx3"]["model"]["verify"].update(ok=False, problems=[{"path": f"model-{i:05d}.safetensors",
                                                                 "problem": "short"} for i in range(7)])
    checks = doc.evaluate(nodes, context())
    assert "pinned " + "d" * 40 in find(checks, "dgx2", "model.files").message
    files = find(checks, "dgx3", "model.files")
    assert files.status == "fail" and files.message.startswith("7 file(s)") and files.message.endswith("(+2 more)")


# --- parity ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, value, check", [
    ("kernel_release", "7.0.0-1019-nvidia", "parity.kernel"),
    ("page_size", 4096, "parity.page_size"),
    ("driver_running", "580.95.05", "parity.driver"),
    ("uvm_srcversion", "0000000000000000000000", "parity.uvm_srcversion"),
    ("uvm_packing", "N", "parity.uvm_packing"),
    ("thp", "madvise", "parity.thp"),
    ("secure_boot", False, "parity.secure_boot"),
])
def test_host_parity_names_every_rank_when_one_differs(key: str, value: Any, check: str) -> None:
    nodes = cluster()
    nodes["dgx3"]["host_facts"]["host"][key] = value
    result = run(nodes, context(), "cluster", check)
    assert (result.status, result.severity) == ("fail", "error")
    assert result.message.startswith("ranks differ: dgx1=") and f"dgx3={doc._short(value)}" in result.message


def test_parity_unreadable_on_some_nodes_is_an_error_and_on_all_is_skipped() -> None:
    some = doc.parity("parity.x", {"a": "1", "b": None, "c": "1"}, "fix")
    assert (some.status, some.severity) == ("fail", "error") and some.message.startswith("unreadable on b")
    assert doc.parity("parity.x", {"a": None, "b": None}, "fix", "no /dev/nvidia0").message == "no /dev/nvidia0"
    ok = doc.parity("parity.x", {"a": {"k": 1}, "b": {"k": 1}}, "fix")
    assert ok.status == "ok" and ok.message == '{"k": 1} on all 2 nodes'


def test_min_free_kbytes_parity() -> None:
    nodes = cluster()
    nodes["dgx1"]["host_facts"]["host"]["sysctls"]["vm.min_free_kbytes"] = 67584
    assert run(nodes, context(), "cluster", "parity.min_free_kbytes").status == "fail"


def test_image_parity_id_labels_and_partial_distribution() -> None:
    nodes = cluster()
    nodes["dgx2"]["image"]["id"] = "sha256:" + "c" * 64
    nodes["dgx3"]["image"]["labels"] = {"org.sparkfleet.tree.vllm": "ffff"}
    checks = doc.evaluate(nodes, context())
    assert find(checks, "cluster", "parity.image_id").status == "fail"
    assert "dgx3=" in find(checks, "cluster", "parity.image_labels").message
    partial = cluster()
    partial["dgx3"]["image"] = {"present": False, "id": None, "labels": {}}
    assert run(partial, context(), "cluster", "parity.image_id").message.startswith("unreadable on dgx3")


def test_model_manifest_parity() -> None:
    nodes = cluster()
    nodes["dgx1"]["model"]["manifest_sha256"] = "0" * 64
    assert run(nodes, context(), "cluster", "parity.model_manifest").status == "fail"
    idle = cluster()
    for obs in idle.values():
        obs["model"] = {"manifest_exists": False, "manifest_sha256": None}
    assert run(idle, context(), "cluster", "parity.model_manifest").status == "skipped"


# --- probe parsers ---------------------------------------------------------------------------------

def test_unit_state_parsing() -> None:
    assert doc.unit_state(0, "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n") == {
        "found": True, "load": "loaded", "active": "active", "enabled": "enabled"}
    assert doc.unit_state(0, "LoadState=not-found\nActiveState=inactive\nUnitFileState=\n")["found"] is False
    assert doc.unit_state(1, "")["found"] is False


def test_container_parsing_full_missing_and_garbage() -> None:
    inspect = [{"Image": IMAGE_ID, "RestartCount": 2,
                "State": {"Status": "running", "Running": True, "ExitCode": 0, "StartedAt": "2026-11-29T10:00:00Z"},
                "Config": {"Cmd": ["/models", "--port", "8000"], "Env": ["A=1", "B=x=y", "C"], "Labels": {"l": "v"}}}]
    parsed = doc.parse_container(0, json.dumps(inspect))
    assert parsed["running"] and parsed["image"] == IMAGE_ID and parsed["restart_count"] == 2
    assert parsed["env"] == {"A": "1", "B": "x=y", "C": ""} and parsed["cmd"] == ["/models", "--port", "8000"]
    missing = doc.parse_container(1, "")
    assert missing["exists"] is False and missing["running"] is False and missing["env"] == {}
    assert doc.parse_container(0, "not json")["status"] == "unreadable"


def test_sm_clock_parsing() -> None:
    assert doc.parse_sm_clock(0, "2171\n") == (2171, None)
    clock, reason = doc.parse_sm_clock(9, "NVIDIA-SMI has failed\n")
    assert clock is None and "rc 9" in reason


# --- kernel backend of the running container ---------------------------------------------------------

def _swap_arg(obs: Dict[str, Any], flag: str, value: str) -> None:
    cmd = obs["probe"]["container"]["cmd"]
    cmd[cmd.index(flag) + 1] = value


@pytest.mark.parametrize("change,ctx,status,message", [
    (lambda o: None, {}, doc.OK, "container runs kernel backend tilelang in every coupled setting"),
    (lambda o: _swap_arg(o, "--moe-backend", "b12x"), {}, doc.FAIL,
     "--moe-backend must be tilelang for kernel_backend tilelang, found ['b12x']"),
    (lambda o: o["probe"]["container"]["env"].update(VLLM_DS41_KERNEL_BACKEND="b12x"), {}, doc.FAIL,
     "VLLM_DS41_KERNEL_BACKEND must be tilelang for kernel_backend tilelang, found 'b12x'"),
    (lambda o: o["probe"]["container"]["env"].pop("TILELANG_CACHE_DIR"), {}, doc.FAIL,
     "TILELANG_CACHE_DIR must be an absolute directory under /cache/"),
    (lambda o: None, {"kernel_backend": "b12x"}, doc.FAIL, "--attention-backend must be B12X for kernel_backend b12x"),
    (lambda o: None, {"kernel_backend": None}, doc.SKIPPED, "no kernel backend planned"),
])
def test_kernel_backend_of_the_running_container(change: Callable[[Dict[str, Any]], Any], ctx: Dict[str, Any],
                                                 status: str, message: str) -> None:
    nodes = cluster()
    change(nodes["dgx2"])
    check = run(nodes, context(**ctx), "dgx2", "serve.kernel_backend")
    assert check.status == status and message in check.message, check


def test_kernel_backend_is_not_judged_without_a_running_container() -> None:
    check = run(cluster(serving=False), context(), "dgx1", "serve.kernel_backend")
    assert check.status == doc.SKIPPED


# --- host recovery policy -------------------------------------------------------------------------

def _drop(obs: Dict[str, Any], path: str) -> None:
    obs["recovery_files"]["contents"][path] = None


RECOVERY_CASES = [
    ("watchdog file missing", lambda o, c: _drop(o, WATCHDOG_FILE), "host.recovery_watchdog",
     f"{WATCHDOG_FILE} is missing"),
    ("watchdog off", lambda o, c: o["recovery_files"]["contents"].__setitem__(
        WATCHDOG_FILE, WATCHDOG_TEXT.replace("RuntimeWatchdogSec=30s", "RuntimeWatchdogSec=0")),
     "host.recovery_watchdog", "RuntimeWatchdogSec=0, want 30s"),
    ("panic sysctl not applied", lambda o, c: o["host_facts"]["host"]["sysctls"].__setitem__("kernel.panic", 0),
     "host.recovery_sysctls", "kernel.panic=0, want 30"),
    ("panic on OOM", lambda o, c: o["host_facts"]["host"]["sysctls"].__setitem__("vm.panic_on_oom", 1),
     "host.recovery_sysctls", "vm.panic_on_oom=1, want 0"),
    ("ssh drop-in missing", lambda o, c: _drop(o, SSH_DROPIN), "host.recovery_ssh_oom", f"{SSH_DROPIN} is missing"),
    ("ssh killable", lambda o, c: o["recovery_files"]["contents"].__setitem__(
        SSH_DROPIN, SSH_DROPIN_TEXT.replace("OOMScoreAdjust=-900", "OOMScoreAdjust=0")),
     "host.recovery_ssh_oom", "OOMScoreAdjust=0, want -900"),
    ("timer disabled", lambda o, c: o["probe"]["units"].__setitem__(
        "spark-management-health.timer", {"found": True, "active": "inactive", "enabled": "disabled"}),
     "host.recovery_health_timer", "spark-management-health.timer disabled, inactive"),
    ("timer absent", lambda o, c: o["probe"]["units"].pop("spark-management-health.timer"),
     "host.recovery_health_timer", "spark-management-health.timer not installed"),
]


@pytest.mark.parametrize("name,mutate,check,message", RECOVERY_CASES, ids=[c[0] for c in RECOVERY_CASES])
def test_recovery_policy_checks(name: str, mutate: Callable[[Dict[str, Any], Dict[str, Any]], Any], check: str,
                                message: str) -> None:
    nodes, ctx = cluster(), context()
    mutate(nodes["dgx2"], ctx)
    result = run(nodes, ctx, "dgx2", check)
    assert (result.status, result.severity) == (doc.FAIL, doc.WARNING)
    assert message in result.message
    assert run(nodes, ctx, "dgx1", check).status == doc.OK


def test_recovery_checks_are_skipped_when_the_policy_is_off() -> None:
    ctx = context(recovery=dict(RECOVERY, enabled=False))
    for check in ("host.recovery_watchdog", "host.recovery_sysctls", "host.recovery_ssh_oom",
                  "host.recovery_health_timer"):
        result = run(cluster(), ctx, "dgx1", check)
        assert result.status == doc.SKIPPED and result.message.startswith("no recovery policy")


def test_unit_settings_last_assignment_wins_and_comments_are_ignored() -> None:
    text = "[Service]\n# MemoryMin=1\nMemoryMin=64M\nMemoryMin=128M\n; x=y\n"
    assert doc.parse_unit_settings(text) == {"MemoryMin": "128M"}
    assert doc.parse_unit_settings(None) == {}


# --- the router (group spark_router) -------------------------------------------------------------------------

HEADS = ["http://10.0.1.71:8000", "http://10.0.2.71:8000"]


def router(**overrides: Any) -> Dict[str, Any]:
    base = {"url": "http://10.0.1.72:8080", "backends": list(HEADS), "status": 200,
            "workers": [{"url": u, "is_healthy": True} for u in HEADS]}
    return base | overrides


@pytest.mark.parametrize("given,status,words", [
    (router(), "ok", "http://10.0.1.72:8080 lists every head healthy (http://10.0.1.71:8000, http://10.0.2.71:8000)"),
    (router(workers=[{"url": HEADS[0], "is_healthy": True}, {"url": HEADS[1], "is_healthy": False}]), "fail",
     "routes without every head (unhealthy: http://10.0.2.71:8000)"),
    (router(workers=[{"url": HEADS[0], "is_healthy": True}]), "fail", "(not listed: http://10.0.2.71:8000)"),
    (router(status=-1, workers=[]), "fail", "http://10.0.1.72:8080/workers answered -1"),
    ({"error": "host dgx1: spark_router_port 8000 is a port its serving engine listens on (8000, 9999): choose "
               "another", "status": None, "workers": []}, "fail", "the router cannot be planned: host dgx1"),
], ids=["healthy", "unhealthy-head", "missing-head", "no-answer", "unplannable"])
def test_the_router_check(given: Dict[str, Any], status: str, words: str) -> None:
    check = run(cluster(), context(router=given), "cluster", "router")
    assert (check.status, check.severity) == (status, "error")
    assert words in check.message
    assert "sparkfleet-router" in check.fix


def test_no_router_no_check_and_an_idle_cluster_skips_it() -> None:
    assert [c for c in doc.evaluate(cluster(), context()) if c.check == "router"] == []
    assert run(cluster(serving=False), context(router=router()), "cluster", "router").status == "skipped"
