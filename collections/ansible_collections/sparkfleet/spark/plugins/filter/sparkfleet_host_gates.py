"""Decisions of the host stage, from observed facts: the kernel promotion verdict, the driver package versions
apt offers for pins the reference does not confirm, and the merged Docker daemon.json.

No I/O: the roles read spark_host_facts, `apt-cache policy` and the current daemon.json and pass them in.
Reference: host-kernel-driver.md §3.3–§3.4 (what a trial must show before the 64 KiB kernel is pinned), §1 (pins),
§8.6 (the Memory Saver's loaded srcversion and packing parameter).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

# --- Promotion gate ------------------------------------------------------------------------------

_GATE_FIELDS = ("release", "page_size", "driver_version", "device_policy", "memory_saver_required",
                "uvm_srcversion")


def _need(mapping: Any, what: str, fields: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(mapping, Mapping):
        raise AnsibleFilterError(f"{what} must be a mapping, got {type(mapping).__name__}")
    missing = [name for name in fields if name not in mapping]
    if missing:
        raise AnsibleFilterError(f"{what} lacks {', '.join(missing)}")
    return mapping


def _int(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _as_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    words = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
    text = str(value).strip().lower()
    if text not in words:
        raise AnsibleFilterError(f"{what} must be true or false, got {value!r}")
    return words[text]


def _uvm_problems(facts: Mapping[str, Any], want: str) -> list[str]:
    """The loaded nvidia_uvm must be the pinned Memory Saver build with packing on (reference §3.4, §8.6)."""
    why = (facts.get("unavailable") or {}).get("uvm_srcversion") or "not loaded"
    loaded = facts.get("uvm_srcversion")
    if loaded is None:
        problem = f"nvidia_uvm is not loaded ({why})"
        if facts.get("secure_boot") and facts.get("mok_enrolled") is False:
            problem += ("; Secure Boot is on and the fleet MOK is not enrolled, so the signed module cannot load "
                        "(the enrolment was not confirmed at the console)")
        return [problem]
    problems = []
    if str(loaded).strip() != want:
        problems.append(f"loaded nvidia_uvm srcversion {loaded}, pinned Memory Saver build {want}")
    packing = facts.get("uvm_packing")
    if str(packing).strip() != "Y":
        problems.append(f"uvm_pack_sysmem_leaf_tables={packing}, expected Y")
    return problems


def spark_trial_verdict(facts: Any, expect: Any) -> dict[str, Any]:
    """Whether this boot may be recorded as a passed trial (and so be pinned as GRUB's default).

    facts: spark_host_facts' ansible_facts.spark_host. expect: release, page_size, driver_version,
    device_policy (require|available), memory_saver_required, uvm_srcversion (the pinned Memory Saver build).
    Every check is listed in `checked` or `not_applicable`; `passed` is true only with no problem.
    """
    facts = _need(facts, "host facts", ("kernel_release", "page_size", "kho_off"))
    expect = _need(expect, "trial expectation", _GATE_FIELDS)
    policy = str(expect["device_policy"])
    if policy not in ("require", "available"):
        raise AnsibleFilterError(f"device_policy must be require or available, got {policy!r}")
    problems: list[str] = []
    checked = ["release", "page size", "kho=off"]
    not_applicable: list[str] = []
    if facts["kernel_release"] != expect["release"]:
        problems.append(f"running {facts['kernel_release']}, expected {expect['release']}")
    if _int(facts["page_size"]) != _int(expect["page_size"]):
        problems.append(f"page size {facts['page_size']}, expected {expect['page_size']}")
    if not facts["kho_off"]:
        problems.append("kho=off missing from /proc/cmdline")
    if policy == "available":
        not_applicable.append("loaded NVIDIA driver")
    else:
        checked.append("driver")
        driver = facts.get("driver_running")
        if driver != expect["driver_version"]:
            problems.append(f"nvidia driver {driver or 'not loaded'}, expected {expect['driver_version']}")
    if not _as_bool(expect["memory_saver_required"], "memory_saver_required"):
        not_applicable.append("Memory Saver (not required)")
    elif policy == "available":
        not_applicable.append("loaded Memory Saver (srcversion, packing)")
    else:
        checked.append("Memory Saver")
        problems.extend(_uvm_problems(facts, str(expect["uvm_srcversion"]).strip()))
    return {"passed": not problems, "problems": problems, "checked": checked, "not_applicable": not_applicable}


# --- Driver package versions from apt --------------------------------------------------------------

_POLICY_PACKAGE = re.compile(r"^(\S+):$")
_POLICY_FIELD = re.compile(r"^  (Installed|Candidate): (.+)$")
_POLICY_VERSION = re.compile(r"^ (\*\*\*| {3}) (\S+) (-?\d+)$")
_POLICY_SOURCE = re.compile(r"^ {8}(-?\d+) (.+)$")


def _none_word(value: str) -> Any:
    return None if value.strip() == "(none)" else value.strip()


def spark_apt_policy(text: Any) -> dict[str, dict[str, Any]]:
    """`LC_ALL=C apt-cache policy <pkg>...` -> {pkg: {installed, candidate, versions: [{version, priority,
    installed, sources}]}}. A package apt does not know prints nothing, so it is absent from the result."""
    if not isinstance(text, str):
        raise AnsibleFilterError(f"apt-cache policy output must be text, got {type(text).__name__}")
    result: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        package, field = _POLICY_PACKAGE.match(line), _POLICY_FIELD.match(line)
        version, source = _POLICY_VERSION.match(line), _POLICY_SOURCE.match(line)
        if package:
            current = result.setdefault(package.group(1), {"installed": None, "candidate": None, "versions": []})
        elif current is None:
            continue
        elif field:
            current[field.group(1).lower()] = _none_word(field.group(2))
        elif version:
            current["versions"].append({"version": version.group(2), "priority": int(version.group(3)),
                                        "installed": version.group(1) == "***", "sources": []})
        elif source and current["versions"]:
            current["versions"][-1]["sources"].append(source.group(2).strip())
    return result


def _upstream(version: str) -> str:
    without_epoch = version.split(":", 1)[-1]
    return without_epoch.rsplit("-", 1)[0] if "-" in without_epoch else without_epoch


def spark_unconfirmed_pins(pins: Any, policy: Any, driver_version: Any, host: Any = "") -> list[dict[str, Any]]:
    """For every pin whose version the reference does not confirm (empty or null), what apt on the node offers.

    Returns one entry per such package: name, known (apt has it at all), installed, and the offered versions
    with those carrying the pinned driver version marked. The role refuses while this list is not empty; the
    operator copies the right version into the pins. Nothing here picks a version.
    """
    if not isinstance(pins, Mapping):
        raise AnsibleFilterError(f"{host}: driver pins must be a mapping, got {type(pins).__name__}")
    if not isinstance(policy, Mapping):
        raise AnsibleFilterError(f"{host}: apt policy must be a mapping, got {type(policy).__name__}")
    out = []
    for name, version in pins.items():
        if isinstance(version, str) and version.strip():
            continue
        if version not in (None, ""):
            raise AnsibleFilterError(f"{host}: pinned version of {name} must be a string or empty, got {version!r}")
        entry = policy.get(name) or {}
        offered = [{"version": v["version"], "sources": v["sources"],
                    "carries_driver": _upstream(v["version"]) == str(driver_version)}
                   for v in entry.get("versions", [])]
        out.append({"name": name, "known": bool(entry), "installed": entry.get("installed"), "offered": offered})
    return out


def spark_unconfirmed_pins_message(unconfirmed: Any, host: Any, variable: Any) -> str:
    """The refusal text: each package with what apt offers, one line each."""
    lines = [f"{host}: the reference does not confirm a version for these packages, so none is guessed; "
             f"set it in {variable} (group_vars) to one apt offers:"]
    for entry in unconfirmed:
        if not entry["known"]:
            lines.append(f"  {entry['name']}: apt knows no such package (check the name and the APT sources)")
            continue
        offers = [f"{o['version']}{' (driver match)' if o['carries_driver'] else ''}" for o in entry["offered"]]
        lines.append(f"  {entry['name']}: installed {entry['installed'] or 'none'}; apt offers "
                     f"{', '.join(offers) or 'nothing'}")
    return "\n".join(lines)


# --- Docker daemon.json ------------------------------------------------------------------------------

def _merge(current: Mapping[str, Any], managed: Mapping[str, Any], path: str) -> dict[str, Any]:
    merged = dict(current)
    for key, value in managed.items():
        here = f"{path}.{key}" if path else key
        if isinstance(value, Mapping):
            existing = merged.get(key, {})
            if not isinstance(existing, Mapping):
                raise ValueError(f"{here} is a {type(existing).__name__} in the file, we manage it as an object")
            merged[key] = _merge(existing, value, here)
        else:
            merged[key] = value
    return merged


def spark_docker_daemon_json(current: Any, managed: Any, host: Any = "", path: Any = "daemon.json") -> str:
    """The daemon.json text: the current file with only the managed keys set (objects merged key by key).

    Keys we do not manage (default-runtime, other runtimes, data-root, registry-mirrors, ...) stay as they are.
    When the merge changes nothing the current text is returned byte for byte, so a hand-formatted file is not
    rewritten. A missing or empty file (None or blank) starts from {}; a file that is not a JSON object is
    refused rather than overwritten.
    """
    if not isinstance(managed, Mapping):
        raise AnsibleFilterError(f"{host}: managed Docker daemon settings must be a mapping, got {type(managed).__name__}")
    text = current if isinstance(current, str) else ""
    try:
        parsed = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise AnsibleFilterError(f"{host}: {path} is not valid JSON ({exc}); fix or remove it, nothing was written") from exc
    if not isinstance(parsed, dict):
        raise AnsibleFilterError(f"{host}: {path} holds a JSON {type(parsed).__name__}, not an object; nothing was written")
    try:
        merged = _merge(parsed, managed, "")
    except ValueError as exc:
        raise AnsibleFilterError(f"{host}: {path}: {exc}; nothing was written") from exc
    if merged == parsed and text.strip():
        return text
    return json.dumps(merged, indent=2) + "\n"


class FilterModule:
    """Host stage decisions."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_trial_verdict": spark_trial_verdict,
            "spark_apt_policy": spark_apt_policy,
            "spark_unconfirmed_pins": spark_unconfirmed_pins,
            "spark_unconfirmed_pins_message": spark_unconfirmed_pins_message,
            "spark_docker_daemon_json": spark_docker_daemon_json,
        }
