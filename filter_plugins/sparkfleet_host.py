"""Pure helpers of the host roles: package pins against installed versions, GRUB menu ids, grubenv.

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


class FilterModule:
    """Host role filters."""

    def filters(self) -> dict[str, Any]:
        return {
            "spark_pin_status": spark_pin_status,
            "spark_pin_specs": spark_pin_specs,
            "spark_grub_entry_id": spark_grub_entry_id,
            "spark_grub_default": spark_grub_default,
            "spark_grubenv": spark_grubenv,
        }
