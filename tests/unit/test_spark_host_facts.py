"""plugins/modules/spark_host_facts.py against fixture /proc, /sys and /etc trees and canned command outputs."""
from __future__ import annotations

import resource
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from ansible.module_utils import basic
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import HostIO

from spark_fixtures import swap_header, write_tree

FIXTURES = Path(__file__).parent / "fixtures" / "host"
MOK = "/root/.local/share/dgx-spark-fan-control/keys/MOK.der"
RLIM_INFINITY = resource.RLIM_INFINITY


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


class FakeHost:
    """Canned tools: {(tool, *args): (rc, stdout, stderr)}; records every call and its environment."""

    def __init__(self, outputs: Dict[Tuple[str, ...], Tuple[int, str, str]]) -> None:
        self.outputs = outputs
        self.calls: List[Tuple[List[str], Dict[str, str]]] = []

    def which(self, tool: str) -> Optional[str]:
        return f"/usr/bin/{tool}" if any(key[0] == tool for key in self.outputs) else None

    def run(self, args: Any, environ_update: Optional[Dict[str, str]] = None) -> Tuple[int, str, str]:
        assert isinstance(args, list), "commands must be list arguments, never a shell string"
        self.calls.append((args, dict(environ_update or {})))
        key = (Path(args[0]).name, *args[1:])
        if key[0] == "mokutil" and key[1] == "--test-key":
            key = ("mokutil", "--test-key")
        if key[0] == "dpkg-query":
            key = ("dpkg-query",)
        return self.outputs[key]


def healthy_outputs(enrolled: str = "mokutil_test_key_enrolled.txt") -> Dict[Tuple[str, ...], Tuple[int, str, str]]:
    return {
        ("dpkg-query",): (1, fixture("dpkg_query_driver.txt"),
                          "dpkg-query: no packages found matching nvidia-driver-*\n"),
        ("mokutil", "--sb-state"): (0, fixture("mokutil_sb_state_enabled.txt"), ""),
        ("mokutil", "--test-key"): (1 if "not" not in enrolled else 0, fixture(enrolled), ""),
        ("dkms", "status"): (0, fixture("dkms_status_3x.txt"), ""),
        ("systemctl", "is-active", "display-manager"): (3, "inactive\n", ""),
        ("systemctl", "get-default"): (0, "multi-user.target\n", ""),
    }


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install a FakeHost into AnsibleModule and pin the os/resource answers of a 64 KiB Spark."""
    def install(outputs: Dict[Tuple[str, ...], Tuple[int, str, str]]) -> FakeHost:
        fake = FakeHost(outputs)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda self, arg, required=False, opt_dirs=None: fake.which(arg))
        monkeypatch.setattr(basic.AnsibleModule, "run_command",
                            lambda self, args, environ_update=None, check_rc=False, **kw:
                            fake.run(args, environ_update))
        return fake

    monkeypatch.setattr(HostIO, "kernel_release", lambda self: "7.0.0-1019-nvidia-64k")
    monkeypatch.setattr(HostIO, "machine", lambda self: "aarch64")
    monkeypatch.setattr(HostIO, "page_size", lambda self: 65536)
    monkeypatch.setattr(HostIO, "memlock", lambda self: (RLIM_INFINITY, RLIM_INFINITY))
    return install


def spark_trees(tmp_path: Path, swaps: str) -> Dict[str, str]:
    """A converged 64 KiB node: kho=off, driver 580.178.04, memory saver packing, THP never, 64k swap."""
    proc = write_tree(tmp_path / "proc", {
        "cmdline": "BOOT_IMAGE=/boot/vmlinuz-7.0.0-1019-nvidia-64k root=UUID=0f3c ro quiet kho=off\n",
        "driver": {"nvidia": {"version": fixture("proc_driver_nvidia_version.txt")}},
        "sys": {"vm": {"min_free_kbytes": "45166\n", "watermark_boost_factor": "0\n", "watermark_scale_factor": "10\n",
                       "swappiness": "60\n", "panic_on_oom": "0\n"},
                "kernel": {"panic": "30\n", "panic_on_oops": "1\n"}},
        "swaps": swaps,
    })
    sys = write_tree(tmp_path / "sys", {
        "module": {"nvidia": {"version": "580.178.04\n"},
                   "nvidia_uvm": {"srcversion": "34683B82C2D3339BBD2EEC9\n",
                                  "parameters": {"uvm_pack_sysmem_leaf_tables": "Y\n"}}},
        "kernel": {"mm": {"transparent_hugepage": {"enabled": "always madvise [never]\n"}}},
    })
    etc = write_tree(tmp_path / "etc", {
        "sysctl.conf": "#vm.swappiness=10\n",
        "sysctl.d": {"90-watermark-boost.conf": "vm.watermark_boost_factor = 0\n",
                     "95-spark-recovery.conf": "kernel.panic = 30\nkernel.panic_on_oops = 1\nvm.panic_on_oom = 0\n",
                     "10-late.conf": "vm.watermark_boost_factor = 15000\n", "README": "vm.swappiness = 1\n"},
        "security": {"limits.conf": "# empty\n",
                     "limits.d": {"90-rdma.conf": "* soft memlock unlimited\n* hard memlock unlimited\n"}},
    })
    return {"proc_root": str(proc), "sys_root": str(sys), "etc_root": str(etc)}


def swap_files(tmp_path: Path) -> str:
    big, small = tmp_path / "swap-64k.img", tmp_path / "swap.img"
    big.write_bytes(swap_header(65536) + bytes(65536))
    small.write_bytes(swap_header(4096, 8192))
    return ("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
            f"{big}\tfile\t\t16777152\t0\t\t-2\n{small}\tfile\t\t1048572\t\t0\t\t-3\n"
            f"{tmp_path / 'gone.img'}\tfile\t\t1024\t\t0\t\t-4\n")


def test_converged_node(run_module: Any, host: Any, tmp_path: Path) -> None:
    fake = host(healthy_outputs())
    args = dict(spark_trees(tmp_path, swap_files(tmp_path)), mok_certificate=str(FIXTURES / "README.md"))
    failed, result = run_module("spark_host_facts", args)
    facts = result["host"]
    assert not failed and result["changed"] is False
    assert result["ansible_facts"] == {"spark_host": facts}
    assert {k: facts[k] for k in ("kernel_release", "machine", "page_size", "page_size_flavour",
                                  "page_size_matches_flavour", "kho_off")} == {
        "kernel_release": "7.0.0-1019-nvidia-64k", "machine": "aarch64", "page_size": 65536,
        "page_size_flavour": "64k", "page_size_matches_flavour": True, "kho_off": True}
    assert facts["driver_installed"] == "580.178.04" and facts["driver_running"] == "580.178.04"
    assert facts["packages"]["nvidia-kernel-source-580-open"] == "580.178.04-0ubuntu0.24.04.1"
    assert facts["uvm_srcversion"] == "34683B82C2D3339BBD2EEC9" and facts["uvm_packing"] == "Y"
    assert facts["secure_boot"] is True and facts["secure_boot_state"] == "SecureBoot enabled"
    assert facts["mok_enrolled"] is True  # rc 1 from --test-key must not matter
    assert facts["dkms_modules"]["dgx-spark-memory-saver"] == {"0.2.0": {"7.0.0-1019-nvidia-64k": "installed"},
                                                               "0.4.0": {}}
    assert facts["thp"] == "never"
    assert facts["sysctls"] == {"vm.min_free_kbytes": 45166, "vm.watermark_boost_factor": 0,
                                "vm.watermark_scale_factor": 10, "vm.swappiness": 60, "vm.panic_on_oom": 0,
                                "kernel.panic": 30, "kernel.panic_on_oops": 1}
    etc = args["etc_root"]
    assert facts["sysctl_files"]["vm.watermark_boost_factor"] == [
        {"file": f"{etc}/sysctl.d/10-late.conf", "value": "15000"},
        {"file": f"{etc}/sysctl.d/90-watermark-boost.conf", "value": "0"}]
    assert facts["sysctl_files"]["vm.swappiness"] == []  # commented out, and README is not a .conf file
    assert [(s["filename"], s["header_page_size"]) for s in facts["swaps"]] == [
        (str(tmp_path / "swap-64k.img"), 65536), (str(tmp_path / "swap.img"), 4096), (str(tmp_path / "gone.img"), None)]
    gone = tmp_path / "gone.img"
    assert facts["unavailable"] == {
        f"swaps.{gone}.header_page_size": f"cannot read {gone}: No such file or directory"}
    assert facts["memlock"] == {"soft": "unlimited", "hard": "unlimited"}
    assert [(e["type"], e["value"]) for e in facts["memlock_config"]] == [("soft", "unlimited"), ("hard", "unlimited")]
    assert facts["display_manager"] == "inactive" and facts["display_manager_active"] is False
    assert facts["default_target"] == "multi-user.target"
    assert all(env.get("LC_ALL") == "C" for _, env in fake.calls) and len(fake.calls) == 6
    assert ["/usr/bin/mokutil", "--test-key", str(FIXTURES / "README.md")] in [c for c, _ in fake.calls]


def test_check_mode_same_facts(run_module: Any, host: Any, tmp_path: Path) -> None:
    host(healthy_outputs())
    args = spark_trees(tmp_path, swap_files(tmp_path))
    normal = run_module("spark_host_facts", args)
    checked = run_module("spark_host_facts", args, check_mode=True)
    assert checked == normal and checked[1]["changed"] is False and not checked[0]


def test_missing_tools_and_files_are_null_with_reasons(run_module: Any, host: Any, tmp_path: Path) -> None:
    host({})
    empty = {name: str(write_tree(tmp_path / name, {})) for name in ("proc", "sys", "etc")}
    failed, result = run_module("spark_host_facts", {"proc_root": empty["proc"], "sys_root": empty["sys"],
                                                     "etc_root": empty["etc"], "mok_certificate": MOK})
    facts, why = result["host"], result["unavailable"]
    assert not failed and result["changed"] is False
    for name in ("cmdline", "kho_off", "packages", "driver_installed", "driver_running", "uvm_srcversion",
                 "uvm_packing", "secure_boot", "secure_boot_state", "mok_enrolled", "dkms", "dkms_modules", "thp",
                 "swaps", "display_manager", "display_manager_active", "default_target"):
        assert facts[name] is None, name
        assert why[name], name
    assert why["dkms"] == "dkms is not installed (not found on PATH)"
    assert why["secure_boot"] == "mokutil is not installed (not found on PATH)"
    assert why["mok_enrolled"] == f"certificate {MOK} does not exist"
    assert why["uvm_packing"].startswith("nvidia_uvm is not loaded")
    assert why["driver_running"].startswith("nvidia module not loaded: ")
    assert why["sysctls.vm.min_free_kbytes"].endswith("does not exist")
    assert facts["sysctls"]["vm.min_free_kbytes"] is None
    assert facts["kernel_release"] == "7.0.0-1019-nvidia-64k" and facts["memlock_config"] == []
    assert facts["mok_certificate"] == MOK


def test_secure_boot_unsupported_and_key_not_enrolled(run_module: Any, host: Any, tmp_path: Path) -> None:
    outputs = healthy_outputs("mokutil_test_key_not_enrolled.txt")
    outputs[("mokutil", "--sb-state")] = (255, "", fixture("mokutil_sb_state_no_efi.txt"))
    host(outputs)
    cert = tmp_path / "MOK.der"
    cert.write_bytes(b"0\x82")
    args = dict(spark_trees(tmp_path, "Filename\tType\tSize\tUsed\tPriority\n"), mok_certificate=str(cert))
    _, result = run_module("spark_host_facts", args)
    facts = result["host"]
    assert facts["secure_boot"] is None
    assert facts["secure_boot_state"] == "EFI variables are not supported on this system"
    assert result["unavailable"]["secure_boot"] == "mokutil --sb-state: EFI variables are not supported on this system"
    assert facts["mok_enrolled"] is False and facts["swaps"] == []


def test_secure_boot_disabled(run_module: Any, host: Any, tmp_path: Path) -> None:
    outputs = healthy_outputs()
    outputs[("mokutil", "--sb-state")] = (0, fixture("mokutil_sb_state_disabled.txt"), "")
    host(outputs)
    _, result = run_module("spark_host_facts", spark_trees(tmp_path, ""))
    assert result["host"]["secure_boot"] is False and result["host"]["mok_enrolled"] is None
    assert result["unavailable"]["mok_enrolled"] == "mok_certificate was not given"


def test_dkms_2x_with_module_filter(run_module: Any, host: Any, tmp_path: Path) -> None:
    outputs = healthy_outputs()
    outputs[("dkms", "status")] = (0, fixture("dkms_status_2x.txt"), "")
    host(outputs)
    args = dict(spark_trees(tmp_path, ""), dkms_module="nvidia-uvm-memsaver")
    _, result = run_module("spark_host_facts", args)
    assert result["host"]["dkms_modules"] == {"nvidia-uvm-memsaver": {"0.2.0": {"6.1.0-50-amd64": "installed"},
                                                                      "0.1.0": {}}}


def test_stock_uvm_and_4k_kernel(run_module: Any, host: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    host(healthy_outputs())
    monkeypatch.setattr(HostIO, "kernel_release", lambda self: "7.0.0-1019-nvidia")
    monkeypatch.setattr(HostIO, "page_size", lambda self: 4096)
    monkeypatch.setattr(HostIO, "memlock", lambda self: (8388608, RLIM_INFINITY))
    args = spark_trees(tmp_path, "")
    (Path(args["sys_root"]) / "module/nvidia_uvm/parameters/uvm_pack_sysmem_leaf_tables").unlink()
    (Path(args["sys_root"]) / "module/nvidia/version").unlink()
    (Path(args["proc_root"]) / "cmdline").write_text("BOOT_IMAGE=/boot/vmlinuz-7.0.0-1019-nvidia ro quiet splash\n")
    _, result = run_module("spark_host_facts", args)
    facts = result["host"]
    assert facts["page_size_flavour"] == "4k" and facts["page_size_matches_flavour"] is True
    assert facts["kho_off"] is False and facts["uvm_packing"] is None
    assert "(stock module)" in result["unavailable"]["uvm_packing"]
    assert facts["driver_running"] == "580.178.04"  # from /proc/driver/nvidia/version
    assert facts["memlock"] == {"soft": 8388608, "hard": "unlimited"}


def test_no_systemd(run_module: Any, host: Any, tmp_path: Path) -> None:
    outputs = healthy_outputs()
    no_bus = "System has not been booted with systemd as init system (PID 1). Can't operate.\n"
    outputs[("systemctl", "is-active", "display-manager")] = (1, "", no_bus)
    outputs[("systemctl", "get-default")] = (1, "", "Failed to connect to bus: Host is down\n")
    host(outputs)
    _, result = run_module("spark_host_facts", spark_trees(tmp_path, ""))
    assert result["host"]["display_manager"] is None and result["host"]["default_target"] is None
    assert result["unavailable"]["display_manager"] == f"systemctl is-active failed (rc 1): {no_bus.strip()}"
    assert result["unavailable"]["default_target"] == (
        "systemctl get-default failed (rc 1): Failed to connect to bus: Host is down")


def test_display_manager_running(run_module: Any, host: Any, tmp_path: Path) -> None:
    outputs = healthy_outputs()
    outputs[("systemctl", "is-active", "display-manager")] = (0, "active\n", "")
    outputs[("systemctl", "get-default")] = (0, "graphical.target\n", "")
    host(outputs)
    _, result = run_module("spark_host_facts", spark_trees(tmp_path, ""))
    assert result["host"]["display_manager_active"] is True and result["host"]["default_target"] == "graphical.target"


def test_unforeseen_probe_error_is_reported_not_raised(run_module: Any, host: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = healthy_outputs()
    outputs[("dpkg-query",)] = (2, "", "dpkg-query: error: --showformat takes exactly one value\n")
    host(outputs)

    def broken(self: HostIO) -> tuple:
        raise PermissionError("getrlimit denied")

    monkeypatch.setattr(HostIO, "memlock", broken)
    failed, result = run_module("spark_host_facts", spark_trees(tmp_path, "Filename Type\ngarbage line x y z\n"))
    why = result["unavailable"]
    assert not failed and why["probe.memlock"] == "PermissionError: getrlimit denied"
    assert why["packages"] == "dpkg-query failed (rc 2): dpkg-query: error: --showformat takes exactly one value"
    assert result["host"]["driver_installed"] is None and result["host"]["swaps"] == []
    assert result["host"]["thp"] == "never" and result["host"]["display_manager"] == "inactive"
