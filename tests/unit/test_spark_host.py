"""Pure tests of module_utils/spark_host.py parsers against the host command fixtures."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_host import (
    dkms_tree, driver_from_packages, has_kho_off, page_flavour, parse_bracketed, parse_dkms_status, parse_dpkg_query,
    parse_limits, parse_nvidia_version, parse_sb_state, parse_swaps, parse_sysctl_conf, parse_test_key,
    swap_header_page_size, sysctl_value, upstream_version)

from spark_fixtures import swap_header

FIXTURES = Path(__file__).parent / "fixtures" / "host"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.mark.parametrize(("release", "flavour"), [
    ("7.0.0-1019-nvidia-64k", "64k"), ("7.0.0-1019-nvidia", "4k"), ("6.17.0-1032-nvidia", "4k"),
    ("6.8.0-1010-nvidia-16k", "16k"), ("6.1.0-50-amd64", "4k"), ("7.0.0-1019-nvidia-64k\n", "64k"),
])
def test_page_flavour(release: str, flavour: str) -> None:
    assert page_flavour(release) == flavour


@pytest.mark.parametrize(("cmdline", "expected"), [
    ("BOOT_IMAGE=/boot/vmlinuz-7.0.0-1019-nvidia-64k root=UUID=1 ro quiet kho=off\n", True),
    ("kho=off quiet", True), ("quiet splash", False), ("nokho=off quiet", False), ("kho=offline", False),
    ("kho=on", False),
])
def test_kho_off(cmdline: str, expected: bool) -> None:
    assert has_kho_off(cmdline) is expected


@pytest.mark.parametrize(("version", "upstream"), [
    ("580.178.04-0ubuntu0.24.04.1", "580.178.04"), ("1:580.178.04-0ubuntu1", "580.178.04"), ("580.65", "580.65"),
])
def test_upstream_version(version: str, upstream: str) -> None:
    assert upstream_version(version) == upstream


def test_dpkg_query_keeps_installed_only() -> None:
    installed = parse_dpkg_query(fixture("dpkg_query_driver.txt"))
    assert installed == {
        "nvidia-kernel-source-580-open": "580.178.04-0ubuntu0.24.04.1",
        "linux-modules-nvidia-580-open-7.0.0-1019-nvidia": "7.0.0-1019.19~24.04.2+1",
        "linux-modules-nvidia-580-open-7.0.0-1019-nvidia-64k": "7.0.0-1019.19~24.04.2+1",
    }
    assert driver_from_packages(installed) == ("580.178.04", None)


def test_driver_from_packages_none_or_conflicting() -> None:
    modules_only = {"linux-modules-nvidia-580-open-7.0.0-1019-nvidia-64k": "7.0.0-1019.19~24.04.2+1"}
    assert driver_from_packages(modules_only) == (
        None, "no nvidia-kernel-source-* or nvidia-driver-* package is installed")
    both = {"nvidia-kernel-source-580-open": "580.178.04-0ubuntu1", "nvidia-driver-590-open": "590.44.01-0ubuntu1"}
    assert driver_from_packages(both) == (None, "several NVIDIA driver versions are installed: 580.178.04, 590.44.01")
    agree = {"nvidia-kernel-source-580-open": "580.178.04-0ubuntu1", "nvidia-driver-580-open": "580.178.04-0ubuntu1"}
    assert driver_from_packages(agree) == ("580.178.04", None)


def test_nvidia_version_sources() -> None:
    assert parse_nvidia_version("580.178.04\n") == "580.178.04"
    assert parse_nvidia_version(fixture("proc_driver_nvidia_version.txt")) == "580.178.04"
    closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    assert parse_nvidia_version(closed) == "535.104.05"
    assert parse_nvidia_version("garbage") is None


@pytest.mark.parametrize(("name", "expected"), [
    ("mokutil_sb_state_enabled.txt", (True, None)),
    ("mokutil_sb_state_disabled.txt", (False, None)),
    ("mokutil_sb_state_no_efi.txt", (None, "mokutil --sb-state: EFI variables are not supported on this system")),
])
def test_sb_state(name: str, expected: tuple) -> None:
    assert parse_sb_state(fixture(name)) == expected


def test_sb_state_legacy_and_unknown() -> None:
    assert parse_sb_state("This system doesn't support Secure Boot\n") == (False, None)
    assert parse_sb_state("") == (None, "mokutil --sb-state: no output")


def test_test_key_text_decides() -> None:
    assert parse_test_key(fixture("mokutil_test_key_enrolled.txt")) == (True, None)
    assert parse_test_key(fixture("mokutil_test_key_not_enrolled.txt")) == (False, None)
    enrolled, reason = parse_test_key("Failed to read MOK.der\n")
    assert enrolled is None and reason == "mokutil --test-key: Failed to read MOK.der"


def test_dkms_3x() -> None:
    entries = parse_dkms_status(fixture("dkms_status_3x.txt"))
    assert len(entries) == 6
    assert entries[2] == {"module": "dgx-spark-memory-saver", "version": "0.2.0", "kernel": "7.0.0-1019-nvidia-64k",
                          "arch": "aarch64", "state": "installed", "note": "Original modules exist"}
    assert entries[3] == {"module": "dgx-spark-memory-saver", "version": "0.4.0", "kernel": None, "arch": None,
                          "state": "added", "note": None}
    assert entries[4] == {"module": "nvidia-uvm-memsaver", "version": "0.2.0", "kernel": "6.1.0-50-amd64",
                          "arch": "x86_64", "state": "installed", "note": None}
    assert dkms_tree(entries) == {
        "dgx-spark-fan-control": {"0.1.1": {"7.0.0-1019-nvidia": "installed", "7.0.0-1019-nvidia-64k": "installed"}},
        "dgx-spark-memory-saver": {"0.2.0": {"7.0.0-1019-nvidia-64k": "installed"}, "0.4.0": {}},
        "nvidia-uvm-memsaver": {"0.2.0": {"6.1.0-50-amd64": "installed", "6.1.0-51-amd64": "built"}},
    }


def test_dkms_2x_comma_form() -> None:
    entries = parse_dkms_status(fixture("dkms_status_2x.txt"))
    assert [(e["module"], e["version"], e["kernel"], e["arch"], e["state"]) for e in entries] == [
        ("dgx-spark-memory-saver", "0.2.0", "7.0.0-1019-nvidia-64k", "aarch64", "installed"),
        ("nvidia-uvm-memsaver", "0.2.0", "6.1.0-50-amd64", "x86_64", "installed"),
        ("nvidia-uvm-memsaver", "0.1.0", None, None, "added"),
    ]
    assert entries[0]["note"] == "WARNING! Diff between built and installed module!"


def test_dkms_filter_and_noise() -> None:
    text = "Error! Could not locate dkms.conf file.\n" + fixture("dkms_status_3x.txt") + "\n"
    entries = parse_dkms_status(text, "nvidia-uvm-memsaver")
    assert [e["kernel"] for e in entries] == ["6.1.0-50-amd64", "6.1.0-51-amd64"]
    assert parse_dkms_status("", None) == []


@pytest.mark.parametrize(("text", "mode"), [("always madvise [never]\n", "never"),
                                             ("always [madvise] never", "madvise"), ("never", None)])
def test_bracketed(text: str, mode: str | None) -> None:
    assert parse_bracketed(text) == mode


def test_sysctl_value() -> None:
    assert sysctl_value("45166\n") == 45166
    assert sysctl_value("-1") == -1
    assert sysctl_value("4096\t131072\t6291456\n") == "4096 131072 6291456"


def test_parse_swaps_unescapes_names() -> None:
    text = ("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
            "/swap-64k.img                           file\t\t16777152\t0\t\t-2\n"
            "/mnt/my\\040swap                         file\t\t1048512\t\t512\t\t-3\n"
            "/dev/dm-1                               partition\t999420\t\t0\t\t-4\n")
    assert parse_swaps(text) == [
        {"filename": "/swap-64k.img", "type": "file", "size_kib": 16777152, "used_kib": 0, "priority": -2},
        {"filename": "/mnt/my swap", "type": "file", "size_kib": 1048512, "used_kib": 512, "priority": -3},
        {"filename": "/dev/dm-1", "type": "partition", "size_kib": 999420, "used_kib": 0, "priority": -4},
    ]
    assert parse_swaps("Filename\tType\tSize\tUsed\tPriority\n") == []


@pytest.mark.parametrize("size", [4096, 16384, 65536])
def test_swap_header_page_size(size: int) -> None:
    assert swap_header_page_size(swap_header(size)) == size


def test_swap_header_without_signature() -> None:
    assert swap_header_page_size(bytes(65536)) is None
    assert swap_header_page_size(b"short") is None
    # Magic somewhere else (for example inside swapped-out data) does not count.
    assert swap_header_page_size(b"\0" * 100 + b"SWAPSPACE2" + bytes(65536)) is None


@pytest.mark.skipif(shutil.which("mkswap") is None, reason="mkswap (util-linux) is not installed")
@pytest.mark.parametrize("size", [4096, 65536])
def test_swap_header_written_by_mkswap(tmp_path: Path, size: int) -> None:
    path = tmp_path / f"swap-{size}.img"
    with open(path, "wb") as handle:
        handle.truncate(1 << 20)
    path.chmod(0o600)
    subprocess.run([shutil.which("mkswap") or "mkswap", "--pagesize", str(size), str(path)], check=True,
                   capture_output=True)
    assert swap_header_page_size(path.read_bytes()[:65536]) == size


def test_parse_limits_memlock_only() -> None:
    text = ("# memlock for RDMA\n*      soft   memlock   unlimited\n*      hard   memlock   unlimited  # both\n"
            "@users  -     nofile    65536\nroot - memlock unlimited\n")
    assert parse_limits(text, "/etc/security/limits.d/90-rdma.conf") == [
        {"file": "/etc/security/limits.d/90-rdma.conf", "domain": "*", "type": "soft", "value": "unlimited"},
        {"file": "/etc/security/limits.d/90-rdma.conf", "domain": "*", "type": "hard", "value": "unlimited"},
        {"file": "/etc/security/limits.d/90-rdma.conf", "domain": "root", "type": "-", "value": "unlimited"},
    ]


def test_parse_sysctl_conf() -> None:
    text = "# boost off\nvm.watermark_boost_factor = 0\n; old\n-vm.min_free_kbytes=45166\nvm/swappiness= 10\n\nbad\n"
    assert parse_sysctl_conf(text) == {"vm.watermark_boost_factor": "0", "vm.min_free_kbytes": "45166",
                                       "vm.swappiness": "10"}
