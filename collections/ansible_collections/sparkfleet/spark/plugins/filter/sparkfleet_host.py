"""Pure helpers of the host roles: package pins against installed versions, which pinned packages are not held
yet, GRUB menu ids, grubenv, which copied files differ from their source, and which units still run.

No I/O: the roles read `package_facts`, `/boot/grub/grub.cfg` and `grub-editenv list` and pass the text in.
Menu entry ids are read from the generated grub.cfg, never guessed from menu positions (reference §3.3).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

_RELEASE = re.compile(r"^[0-9][0-9A-Za-z.+~_-]*$")
_SUBMENU = re.compile(r"^\s*submenu\s.*\$menuentry_id_option\s+'(gnulinux-advanced-[^']+)'", re.MULTILINE)
_DEFAULT = re.compile(r'^\s*set default="([^"$][^"]*)"', re.MULTILINE)


def _require_mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise AnsibleFilterError(f"{what} must be a mapping, got {type(value).__name__}")
    return value


def _installed_versions(packages: Mapping[str, Any], name: str) -> list[str]:
    """Versions of one package in package_facts form ({name: [{version: ...}, ...]})."""
    entries = packages.get(name) or []
    if not isinstance(entries, list):
        raise AnsibleFilterError(f"package facts for {name} must be a list, got {type(entries).__name__}")
    return [str(entry.get("version")) for entry in entries if isinstance(entry, Mapping)]


def spark_pin_status(pins: Any, packages: Any) -> dict[str, Any]:
    """Compare pinned {name: version} with package_facts: missing, mismatched (installed, other version), ok."""
    pins = _require_mapping(pins, "pins")
    packages = _require_mapping(packages, "package facts")
    missing: list[str] = []
    mismatched: list[dict[str, str]] = []
    matching: list[str] = []
    for name, version in pins.items():
        if not isinstance(version, str) or not version:
            raise AnsibleFilterError(f"pinned version of {name} must be a non-empty string, got {version!r}")
        installed = _installed_versions(packages, name)
        if not installed:
            missing.append(name)
        elif installed != [version]:
            mismatched.append({"name": name, "installed": ", ".join(installed), "pinned": version})
        else:
            matching.append(name)
    return {"missing": missing, "mismatched": mismatched, "matching": matching}


def spark_pin_specs(pins: Any, names: Any = None) -> list[str]:
    """`name=version` arguments for apt, for all pins or for the given names (in pin order)."""
    pins = _require_mapping(pins, "pins")
    wanted = set(pins) if names is None else set(names)
    unknown = wanted - set(pins)
    if unknown:
        raise AnsibleFilterError(f"not pinned: {', '.join(sorted(unknown))}")
    return [f"{name}={version}" for name, version in pins.items() if name in wanted]


def spark_not_held(names: Any, selections: Any) -> list[str]:
    """The names (in order) whose dpkg selection is not `hold`, from the output of
    `dpkg-query -W -f='${Package} ${Status}\\n' NAME...` (one line per installed or known package; its first
    status word is the selection). A name dpkg does not know is not held. One query then decides which holds
    to set, so a run with every hold in place costs one call instead of one per package."""
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise AnsibleFilterError(f"names must be a list of package names, got {names!r}")
    if not isinstance(selections, str):
        raise AnsibleFilterError(f"selections must be dpkg-query output text, got {type(selections).__name__}")
    held = set()
    for line in selections.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] == "hold":
            held.add(fields[0])
    return [name for name in names if name not in held]


def spark_grub_entry_id(grub_cfg: Any, release: Any) -> str:
    """`gnulinux-advanced-<uuid>>gnulinux-<release>-advanced-<uuid>` from grub.cfg, or '' when absent."""
    if not isinstance(grub_cfg, str):
        raise AnsibleFilterError(f"grub.cfg text must be a string, got {type(grub_cfg).__name__}")
    if not isinstance(release, str) or not _RELEASE.match(release):
        raise AnsibleFilterError(f"kernel release {release!r} is not a release name")
    submenu = _SUBMENU.search(grub_cfg)
    if not submenu:
        return ""
    device = submenu.group(1)[len("gnulinux-advanced-"):]
    entry = f"gnulinux-{release}-advanced-{device}"
    if f"'{entry}'" not in grub_cfg:
        return ""
    return f"{submenu.group(1)}>{entry}"


def spark_grub_default(grub_cfg: Any) -> str:
    """The literal `set default="..."` of grub.cfg (variable forms such as ${next_entry} are skipped)."""
    if not isinstance(grub_cfg, str):
        raise AnsibleFilterError(f"grub.cfg text must be a string, got {type(grub_cfg).__name__}")
    found = _DEFAULT.findall(grub_cfg)
    return found[-1] if found else ""


def spark_grubenv(listing: Any) -> dict[str, str]:
    """`grub-editenv <file> list` output as a dict (keys without a value are kept as '')."""
    if not isinstance(listing, str):
        raise AnsibleFilterError(f"grubenv listing must be a string, got {type(listing).__name__}")
    env: dict[str, str] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and not key.startswith("#"):
            env[key.strip()] = value.strip()
    return env


def _sums_by_relative_path(found: Any, root: Any, what: str) -> dict[str, tuple[str, str]]:
    """`ansible.builtin.find` results (get_checksum) as {path relative to root: (checksum, mode)}."""
    if not isinstance(found, list):
        raise AnsibleFilterError(f"{what} must be the files list of ansible.builtin.find, got {type(found).__name__}")
    if not isinstance(root, str) or not root.startswith("/"):
        raise AnsibleFilterError(f"{what} root must be an absolute path, got {root!r}")
    prefix = root.rstrip("/") + "/"
    sums: dict[str, tuple[str, str]] = {}
    for entry in found:
        path = _require_mapping(entry, f"an entry of {what}").get("path", "")
        if isinstance(path, str) and path.startswith(prefix):
            sums[path[len(prefix):]] = (str(entry.get("checksum", "")), str(entry.get("mode", "")))
    return sums


def spark_files_to_copy(inputs: Any, source: Any, source_root: Any, dest: Any, dest_root: Any) -> list[dict[str, Any]]:
    """The entries of `inputs` ({path, mode}) whose copy under dest_root is missing, differs in content from the
    file under source_root, or has another mode. `source` and `dest` are what ansible.builtin.find returned with
    get_checksum for the two roots, so deciding that nothing needs copying costs two calls, not one per file.
    An input missing at its source is kept: the copy then fails naming it."""
    if not isinstance(inputs, list):
        raise AnsibleFilterError(f"inputs must be a list of {{path, mode}}, got {type(inputs).__name__}")
    have = _sums_by_relative_path(source, source_root, "source")
    copied = _sums_by_relative_path(dest, dest_root, "destination")
    stale: list[dict[str, Any]] = []
    for entry in inputs:
        entry = _require_mapping(entry, "an input")
        path, mode = entry.get("path"), entry.get("mode")
        if not isinstance(path, str) or not path or path.startswith("/") or ".." in path.split("/"):
            raise AnsibleFilterError(f"input path must be relative and inside its root, got {path!r}")
        if not isinstance(mode, str) or not re.fullmatch(r"0[0-7]{3}", mode):
            raise AnsibleFilterError(f"mode of {path} must be an octal string like '0644', got {mode!r}")
        want = have.get(path)
        if want is None or copied.get(path) != (want[0], mode):
            stale.append(dict(entry))
    return stale


_BUSY = ("active", "activating", "reloading", "deactivating")


def spark_units_to_quiet(show: Any, units: Any, disable: Any = True) -> list[str]:
    """Units (in `units` order) that still need stopping, or disabling when `disable`, from the text of
    `systemctl show --property=Id,LoadState,ActiveState,UnitFileState -- <units>`.

    Units that are not installed (LoadState not-found) or already stopped and disabled need nothing, so a
    no-change run touches no unit.
    """
    if not isinstance(show, str):
        raise AnsibleFilterError(f"spark_units_to_quiet: systemctl show output must be text, got {type(show).__name__}")
    state: dict[str, dict[str, str]] = {}
    for block in show.strip().split("\n\n"):
        props = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if "Id" in props:
            state[props["Id"]] = props
    wanted: list[str] = []
    for unit in units:
        props = state.get(unit, {})
        if props.get("LoadState") != "loaded":
            continue
        running = props.get("ActiveState", "") in _BUSY
        enabled = props.get("UnitFileState", "").startswith("enabled")
        if running or (bool(disable) and enabled):
            wanted.append(unit)
    return wanted


class FilterModule:
    """Host role filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_files_to_copy": spark_files_to_copy,
            "spark_not_held": spark_not_held,
            "spark_pin_status": spark_pin_status,
            "spark_pin_specs": spark_pin_specs,
            "spark_grub_entry_id": spark_grub_entry_id,
            "spark_grub_default": spark_grub_default,
            "spark_grubenv": spark_grubenv,
            "spark_units_to_quiet": spark_units_to_quiet,
        }
