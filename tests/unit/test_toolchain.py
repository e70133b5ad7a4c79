"""requirements.yml documents exactly the collection versions the pinned ansible bundle installs."""
from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_requirements_yml_matches_the_bundled_collections() -> None:
    listed = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-galaxy"), "collection", "list", "--format", "yaml"],
                            capture_output=True, text=True, check=True).stdout
    installed: dict[str, str] = {}
    for collections in yaml.safe_load(listed).values():
        for name, info in collections.items():
            installed.setdefault(name, info["version"])
    wanted = yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]
    assert wanted, "requirements.yml lists no collections"
    for entry in wanted:
        assert installed.get(entry["name"]) == entry["version"], entry
