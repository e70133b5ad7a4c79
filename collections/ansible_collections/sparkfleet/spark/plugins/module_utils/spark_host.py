"""Host facts of a DGX Spark: kernel, driver, memory saver, Secure Boot, DKMS, memory policy, headless state.

Parsers are pure (text in, values out). `HostIO` is the only place that touches the host and it only reads;
`gather` runs every probe, and a probe that cannot answer records the value as None plus a reason in
`unavailable` instead of raising. Facts and expected values: host-kernel-driver reference §1–§9.
"""
from __future__ import annotations

import glob
import os
import re
import resource
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_gid import read_attribute

RunResult = Tuple[int, str, str]
Runner = Callable[[List[str]], RunResult]
Which = Callable[[str], Optional[str]]

C_LOCALE = {"LC_ALL": "C", "LANG": "C", "LANGUAGE": "C"}

# Package families named by the reference; only the first two carry the driver version in theirs.
DRIVER_PACKAGE_PATTERNS = ("nvidia-kernel-source-*", "nvidia-driver-*", "linux-modules-nvidia-*")
DRIVER_VERSION_PACKAGE = re.compile(r"^nvidia-(kernel-source|driver)-\d+(-open|-server|-server-open)?$")
DPKG_FORMAT = "${Package}\\t${db:Status-Abbrev}\\t${Version}\\n"

# Memory policy (§4), host recovery (§7) and the peer guard values the reference says to verify (§4).
TRACKED_SYSCTLS = (
    "vm.min_free_kbytes", "vm.watermark_boost_factor", "vm.watermark_scale_factor", "vm.swappiness",
    "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
)
SWAP_MAGIC = b"SWAPSPACE2"
# Smallest first: a larger page's magic offset falls in a smaller header's data, never the reverse.
SWAP_PAGE_SIZES = (4096, 16384, 65536)
DISPLAY_MANAGER_BUSY = ("active", "activating", "reloading")


# --- Pure parsers -----------------------------------------------------------------------------

def page_flavour(release: str) -> str:
    """'7.0.0-1019-nvidia-64k' -> '64k'; a release without a page suffix is the 4 KiB build."""
    match = re.search(r"-(\d+)k$", release.strip())
    return f"{match.group(1)}k" if match else "4k"


def flavour_bytes(flavour: str) -> int:
    return int(flavour[:-1]) * 1024


def has_kho_off(cmdline: str) -> bool:
    """Whole-token match, so `nokho=off` or `kho=offline` do not count."""
    return "kho=off" in cmdline.split()


def upstream_version(version: str) -> str:
    """Debian version without epoch and revision: '1:580.178.04-0ubuntu0.24.04.1' -> '580.178.04'."""
    without_epoch = version.split(":", 1)[-1]
    return without_epoch.rsplit("-", 1)[0] if "-" in without_epoch else without_epoch


def parse_dpkg_query(text: str) -> Dict[str, str]:
    """Installed packages from `dpkg-query -W -f='${Package}\\t${db:Status-Abbrev}\\t${Version}\\n'`."""
    installed = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and len(fields[1]) >= 2 and fields[1][1] == "i" and fields[2].strip():
            installed[fields[0].strip()] = fields[2].strip()
    return installed


def driver_from_packages(installed: Dict[str, str]) -> Tuple[Optional[str], Optional[str]]:
    """(driver version, None) or (None, reason) from the version-bearing driver packages."""
    versions = sorted({upstream_version(v) for p, v in installed.items() if DRIVER_VERSION_PACKAGE.match(p)})
    if len(versions) == 1:
        return versions[0], None
    if not versions:
        return None, "no nvidia-kernel-source-* or nvidia-driver-* package is installed"
    return None, f"several NVIDIA driver versions are installed: {', '.join(versions)}"


def parse_nvidia_version(text: str) -> Optional[str]:
    """Driver version from /sys/module/nvidia/version ('580.178.04') or /proc/driver/nvidia/version."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d+)+", text):
        return text
    match = re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)*)\s", text + " ")
    return match.group(1) if match else None


def parse_sb_state(text: str) -> Tuple[Optional[bool], Optional[str]]:
    """`mokutil --sb-state` (LC_ALL=C) -> (enabled, None) or (None, reason)."""
    lowered = text.lower()
    if "secureboot enabled" in lowered:
        return True, None
    if "secureboot disabled" in lowered or "doesn't support secure boot" in lowered:
        return False, None
    first = text.strip().splitlines()[0] if text.strip() else "no output"
    return None, f"mokutil --sb-state: {first}"


def parse_test_key(text: str) -> Tuple[Optional[bool], Optional[str]]:
    """`mokutil --test-key` text; its exit code is 1 on DGX OS even when enrolled, so only text counts."""
    if re.search(r"is already enrolled\s*$", text, re.MULTILINE):
        return True, None
    if re.search(r"is not enrolled\s*$", text, re.MULTILINE):
        return False, None
    first = text.strip().splitlines()[0] if text.strip() else "no output"
    return None, f"mokutil --test-key: {first}"


_DKMS_LINE = re.compile(
    r"^(?P<name>[^,/\s]+)(?:/|,\s*)(?P<version>[^,:\s]+)"
    r"(?:,\s*(?P<kernel>[^,:\s]+))?(?:,\s*(?P<arch>[^,:\s]+))?:\s*(?P<rest>\S.*)$"
)


def parse_dkms_status(text: str, module: Optional[str] = None) -> List[Dict[str, Optional[str]]]:
    """Lines of `dkms status` in the 3.x form `name/ver, kernel, arch: state (note)` and the 2.x comma form
    `name, ver, kernel, arch: state`; kernel-less lines are registrations (`added`)."""
    entries = []
    for line in text.splitlines():
        match = _DKMS_LINE.match(line.strip())
        if not match or (module and match.group("name") != module):
            continue
        state, _, note = match.group("rest").partition(" ")
        entries.append({"module": match.group("name"), "version": match.group("version"),
                        "kernel": match.group("kernel"), "arch": match.group("arch"),
                        "state": state, "note": note.strip().strip("()") or None})
    return entries


def dkms_tree(entries: List[Dict[str, Optional[str]]]) -> Dict[str, Dict[str, Dict[str, str]]]:
    """{module: {version: {kernel: state}}}; a version only registered has an empty kernel map."""
    tree: Dict[str, Dict[str, Dict[str, str]]] = {}
    for entry in entries:
        kernels = tree.setdefault(str(entry["module"]), {}).setdefault(str(entry["version"]), {})
        if entry["kernel"]:
            kernels[entry["kernel"]] = str(entry["state"])
    return tree


def parse_bracketed(text: str) -> Optional[str]:
    """'always madvise [never]' -> 'never' (THP and similar selector files)."""
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else None


def sysctl_value(text: str) -> Any:
    """Integers as int, anything else (several fields) as the whitespace-normalised string."""
    value = " ".join(text.split())
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def unescape_proc_path(text: str) -> str:
    """/proc/swaps escapes space, tab, newline and backslash as octal (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def parse_swaps(text: str) -> List[Dict[str, Any]]:
    swaps = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) == 5 and all(re.fullmatch(r"-?\d+", f) for f in fields[2:]):
            swaps.append({"filename": unescape_proc_path(fields[0]), "type": fields[1],
                          "size_kib": int(fields[2]), "used_kib": int(fields[3]), "priority": int(fields[4])})
    return swaps


def swap_header_page_size(head: bytes) -> Optional[int]:
    """mkswap puts SWAPSPACE2 in the last 10 bytes of the first page, so its offset gives the page size."""
    for size in SWAP_PAGE_SIZES:
        if has_swap_header(head, size):
            return size
    return None


def parse_limits(text: str, path: str) -> List[Dict[str, str]]:
    """memlock lines of a limits.conf-format file."""
    found = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) == 4 and fields[2] == "memlock":
            found.append({"file": path, "domain": fields[0], "type": fields[1], "value": fields[3]})
    return found


def parse_sysctl_conf(text: str) -> Dict[str, str]:
    """key = value lines of a sysctl.d file (a leading '-' only means 'ignore errors')."""
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        settings[key.lstrip("-").replace("/", ".")] = value
    return settings


def rlimit_value(value: int) -> Any:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def first_line(text: str) -> Optional[str]:
    lines = text.strip().splitlines()
    return lines[0].strip() if lines else None


# --- Host access (read-only) ------------------------------------------------------------------

class HostIO:
    """Everything the probes read; tests replace the roots, the runner and `which`."""

    def __init__(self, run: Runner, which: Which, proc_root: str = "/proc", sys_root: str = "/sys",
                 etc_root: str = "/etc") -> None:
        self.run, self.which = run, which
        self.proc_root, self.sys_root, self.etc_root = proc_root, sys_root, etc_root

    def proc(self, *parts: str) -> str:
        return os.path.join(self.proc_root, *parts)

    def sys(self, *parts: str) -> str:
        return os.path.join(self.sys_root, *parts)

    def etc(self, *parts: str) -> str:
        return os.path.join(self.etc_root, *parts)

    def read(self, path: str) -> Tuple[Optional[str], Optional[str]]:
        return read_attribute(path)

    def command(self, tool: str, args: List[str]) -> Tuple[Optional[RunResult], Optional[str]]:
        """(rc, stdout, stderr) or (None, reason) when the tool is not installed."""
        path = self.which(tool)
        if not path:
            return None, f"{tool} is not installed (not found on PATH)"
        return self.run([path] + args), None

    def read_head(self, path: str, size: int) -> Tuple[Optional[bytes], Optional[str]]:
        try:
            with open(path, "rb") as handle:
                return handle.read(size), None
        except OSError as exc:
            return None, f"cannot read {path}: {exc.strerror}"

    def glob(self, pattern: str) -> List[str]:
        return sorted(glob.glob(pattern))

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def kernel_release(self) -> str:
        return os.uname().release

    def machine(self) -> str:
        return os.uname().machine

    def page_size(self) -> int:
        return os.sysconf("SC_PAGESIZE")

    def memlock(self) -> Tuple[int, int]:
        return resource.getrlimit(resource.RLIMIT_MEMLOCK)


class Facts:
    """Values plus reasons for the ones that stayed unknown."""

    def __init__(self) -> None:
        self.values: Dict[str, Any] = {}
        self.unavailable: Dict[str, str] = {}

    def put(self, name: str, value: Any, reason: Optional[str] = None) -> None:
        self.values[name] = value
        if value is None:
            self.unavailable[name] = reason or "unknown"

    def note(self, name: str, reason: Optional[str]) -> None:
        """Record a reason for a nested value that stayed unknown."""
        if reason:
            self.unavailable[name] = reason

    def result(self) -> Dict[str, Any]:
        return dict(self.values, unavailable=dict(self.unavailable))


# --- Probes -----------------------------------------------------------------------------------

def probe_kernel(io: HostIO, facts: Facts) -> None:
    release = io.kernel_release()
    flavour = page_flavour(release)
    page_size = io.page_size()
    facts.put("kernel_release", release)
    facts.put("machine", io.machine())
    facts.put("page_size", page_size)
    facts.put("page_size_flavour", flavour)
    facts.put("page_size_matches_flavour", page_size == flavour_bytes(flavour))


def probe_cmdline(io: HostIO, facts: Facts) -> None:
    text, reason = io.read(io.proc("cmdline"))
    facts.put("cmdline", text, reason)
    facts.put("kho_off", None if text is None else has_kho_off(text), reason)


def probe_packages(io: HostIO, facts: Facts) -> None:
    ran, reason = io.command("dpkg-query", ["-W", "-f=" + DPKG_FORMAT] + list(DRIVER_PACKAGE_PATTERNS))
    if ran is None:
        facts.put("packages", None, reason)
        facts.put("driver_installed", None, reason)
        return
    if ran[0] > 1:  # rc 1 only means some pattern matched nothing; the others are still listed
        failure = f"dpkg-query failed (rc {ran[0]}): {first_line(ran[2]) or 'no output'}"
        facts.put("packages", None, failure)
        facts.put("driver_installed", None, failure)
        return
    installed = parse_dpkg_query(ran[1])
    facts.put("packages", installed)
    version, why = driver_from_packages(installed)
    facts.put("driver_installed", version, why)


def probe_driver_running(io: HostIO, facts: Facts) -> None:
    reasons = []
    for path in (io.sys("module", "nvidia", "version"), io.proc("driver", "nvidia", "version")):
        text, reason = io.read(path)
        version = None if text is None else parse_nvidia_version(text)
        if version:
            facts.put("driver_running", version)
            return
        reasons.append(reason or f"{path} has no version")
    facts.put("driver_running", None, "nvidia module not loaded: " + "; ".join(reasons))


def probe_uvm(io: HostIO, facts: Facts) -> None:
    if not os.path.isdir(io.sys("module", "nvidia_uvm")):
        absent = f"nvidia_uvm is not loaded ({io.sys('module', 'nvidia_uvm')} does not exist)"
        facts.put("uvm_srcversion", None, absent)
        facts.put("uvm_packing", None, absent)
        return
    text, reason = io.read(io.sys("module", "nvidia_uvm", "srcversion"))
    facts.put("uvm_srcversion", text, reason)
    text, reason = io.read(io.sys("module", "nvidia_uvm", "parameters", "uvm_pack_sysmem_leaf_tables"))
    facts.put("uvm_packing", text, reason and f"loaded nvidia_uvm has no packing parameter (stock module): {reason}")


def probe_secure_boot(io: HostIO, facts: Facts) -> None:
    ran, reason = io.command("mokutil", ["--sb-state"])
    if ran is None:
        facts.put("secure_boot", None, reason)
        facts.put("secure_boot_state", None, reason)
        return
    text = "\n".join(part for part in (ran[1], ran[2]) if part.strip())
    enabled, why = parse_sb_state(text)
    facts.put("secure_boot", enabled, why)
    facts.put("secure_boot_state", first_line(text), why)


def probe_mok(io: HostIO, facts: Facts, certificate: Optional[str]) -> None:
    facts.values["mok_certificate"] = certificate
    if not certificate:
        facts.put("mok_enrolled", None, "mok_certificate was not given")
        return
    if not io.exists(certificate):
        facts.put("mok_enrolled", None, f"certificate {certificate} does not exist")
        return
    ran, reason = io.command("mokutil", ["--test-key", certificate])
    if ran is None:
        facts.put("mok_enrolled", None, reason)
        return
    enrolled, why = parse_test_key(ran[1] + "\n" + ran[2])
    facts.put("mok_enrolled", enrolled, why)


def probe_dkms(io: HostIO, facts: Facts, module: Optional[str]) -> None:
    ran, reason = io.command("dkms", ["status"])
    entries = None
    if ran is not None and ran[0] != 0:
        reason = f"dkms status failed (rc {ran[0]}): {first_line(ran[2]) or first_line(ran[1])}"
    elif ran is not None:
        entries = parse_dkms_status(ran[1], module)
    facts.put("dkms", entries, reason)
    facts.put("dkms_modules", None if entries is None else dkms_tree(entries), reason)


def probe_thp(io: HostIO, facts: Facts) -> None:
    text, reason = io.read(io.sys("kernel", "mm", "transparent_hugepage", "enabled"))
    mode = None if text is None else parse_bracketed(text)
    facts.put("thp", mode, reason or f"no [selected] mode in {text!r}")


def probe_sysctls(io: HostIO, facts: Facts) -> None:
    values: Dict[str, Any] = {}
    for key in TRACKED_SYSCTLS:
        text, reason = io.read(io.proc("sys", *key.split(".")))
        values[key] = None if text is None else sysctl_value(text)
        facts.note(f"sysctls.{key}", reason)
    facts.put("sysctls", values)


def probe_sysctl_files(io: HostIO, facts: Facts) -> None:
    """Which configuration files set the tracked keys, in the order systemd-sysctl applies them."""
    found: Dict[str, List[Dict[str, str]]] = {key: [] for key in TRACKED_SYSCTLS}
    files = sorted(io.glob(io.etc("sysctl.d", "*.conf")), key=os.path.basename)
    # Debian and Ubuntu link sysctl.d/99-sysctl.conf to sysctl.conf; count that file once.
    if os.path.realpath(io.etc("sysctl.conf")) not in {os.path.realpath(f) for f in files}:
        files.append(io.etc("sysctl.conf"))
    for path in files:
        text, _ = io.read(path)
        for key, value in parse_sysctl_conf(text or "").items():
            if key in found:
                found[key].append({"file": path, "value": value})
    facts.put("sysctl_files", found)


def probe_swaps(io: HostIO, facts: Facts) -> None:
    text, reason = io.read(io.proc("swaps"))
    if text is None:
        facts.put("swaps", None, reason)
        return
    swaps = parse_swaps(text)
    for swap in swaps:
        head, why = io.read_head(swap["filename"], max(SWAP_PAGE_SIZES))
        swap["header_page_size"] = None if head is None else swap_header_page_size(head)
        if swap["header_page_size"] is None:
            facts.note(f"swaps.{swap['filename']}.header_page_size", why or "no SWAPSPACE2 signature found")
    facts.put("swaps", swaps)


def probe_memlock(io: HostIO, facts: Facts) -> None:
    soft, hard = io.memlock()
    facts.put("memlock", {"soft": rlimit_value(soft), "hard": rlimit_value(hard)})
    entries: List[Dict[str, str]] = []
    for path in [io.etc("security", "limits.conf")] + io.glob(io.etc("security", "limits.d", "*.conf")):
        text, _ = io.read(path)
        entries.extend(parse_limits(text or "", path))
    facts.put("memlock_config", entries)


def probe_display(io: HostIO, facts: Facts) -> None:
    ran, reason = io.command("systemctl", ["is-active", "display-manager"])
    state = None if ran is None else first_line(ran[1])
    if ran is not None and state is None:
        reason = f"systemctl is-active failed (rc {ran[0]}): {first_line(ran[2]) or 'no output'}"
    facts.put("display_manager", state, reason)
    facts.put("display_manager_active", None if state is None else state in DISPLAY_MANAGER_BUSY, reason)
    ran, reason = io.command("systemctl", ["get-default"])
    target = None if ran is None or ran[0] != 0 else first_line(ran[1])
    if ran is not None and target is None:
        reason = f"systemctl get-default failed (rc {ran[0]}): {first_line(ran[2]) or 'no output'}"
    facts.put("default_target", target, reason)


def _guarded(probe: Callable[..., None], io: HostIO, facts: Facts, *args: Any) -> None:
    """A facts module must answer for the other probes even when one meets something unforeseen."""
    try:
        probe(io, facts, *args)
    except Exception as exc:  # pylint: disable=broad-except
        facts.note(probe.__name__.replace("probe_", "probe."), f"{type(exc).__name__}: {exc}")


def gather(io: HostIO, mok_certificate: Optional[str] = None, dkms_module: Optional[str] = None) -> Dict[str, Any]:
    """Every probe, in a fixed order; a missing tool or file is a reason, never an exception."""
    facts = Facts()
    for probe in (probe_kernel, probe_cmdline, probe_packages, probe_driver_running, probe_uvm,
                  probe_secure_boot):
        _guarded(probe, io, facts)
    _guarded(probe_mok, io, facts, mok_certificate)
    _guarded(probe_dkms, io, facts, dkms_module)
    for probe in (probe_thp, probe_sysctls, probe_sysctl_files, probe_swaps, probe_memlock, probe_display):
        _guarded(probe, io, facts)
    return facts.result()


def has_swap_header(head: bytes, page_size: int) -> bool:
    """SWAPSPACE2 ends the first page of that size (an older header of another size may remain elsewhere)."""
    return head[page_size - len(SWAP_MAGIC):page_size] == SWAP_MAGIC


def swap_file_steps(exists: bool, mode: int, uid: int, gid: int, header_ok: bool) -> List[str]:
    """What a dedicated swap file still needs, in order: allocate it, restrict it to root, write its header.

    An existing file is never resized or re-allocated: it may be the swap in use. A header of another page size
    (a 4 KiB header on the 64 KiB kernel's file) is rewritten, since that kernel cannot use it.
    """
    steps: List[str] = []
    if not exists:
        return ["allocate", "restrict", "mkswap"]
    if mode != 0o600 or (uid, gid) != (0, 0):
        steps.append("restrict")
    if not header_ok:
        steps.append("mkswap")
    return steps
