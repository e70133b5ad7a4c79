"""sparkfleet's version, read from the collection's own metadata: galaxy.yml in a checkout, MANIFEST.json in a
built or installed collection. One function for the bench CLI, the scheduled runner and the version lookup, so
every report names the same version galaxy.yml declares.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Optional

UNKNOWN = "unknown"
_GALAXY_VERSION = re.compile(r"^version:\s*[\"']?([^\"'\s#]+)", re.MULTILINE)


def version_from_galaxy(text: str) -> Optional[str]:
    """The top-level `version:` of a galaxy.yml text (no YAML parser needed on a node)."""
    match = _GALAXY_VERSION.search(text)
    return match.group(1) if match else None


def version_from_manifest(text: str) -> Optional[str]:
    """collection_info.version of a MANIFEST.json text."""
    try:
        info = json.loads(text).get("collection_info") or {}
    except (ValueError, AttributeError):
        return None
    version = info.get("version")
    return version if isinstance(version, str) and version else None


def collection_root(start: Path) -> Optional[Path]:
    """The collection directory above `start` (the one holding plugins/ and galaxy.yml or MANIFEST.json)."""
    for parent in start.resolve().parents:
        if (parent / "galaxy.yml").is_file() or (parent / "MANIFEST.json").is_file():
            return parent
    return None


def sparkfleet_version(start: Optional[Path] = None) -> str:
    """The collection's version, or "unknown" when its metadata is not reachable from `start` (default: this
    file, which inside an Ansible module payload has no collection directory around it)."""
    root = collection_root(start or Path(__file__))
    if root is None:
        return UNKNOWN
    for name, reader in (("galaxy.yml", version_from_galaxy), ("MANIFEST.json", version_from_manifest)):
        path = root / name
        if path.is_file():
            try:
                version = reader(path.read_text(encoding="utf-8"))
            except OSError:
                continue
            if version:
                return version
    return UNKNOWN
