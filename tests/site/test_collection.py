"""The in-repo collection sparkfleet.spark: it builds with ansible-galaxy, ansible.cfg finds it beside the bundled
community collections, and nothing in the repository reaches its Python by patching import paths."""
from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from testlib import COLLECTION, ROOT

GALAXY = ROOT / ".venv" / "bin" / "ansible-galaxy"
# Directories that are not the project's own files (toolchain, caches, build output, lab state).
SKIP_DIRS = {".git", ".venv", ".cache", "build", ".lab", "__pycache__", ".pytest_cache", "results"}
TEXT_SUFFIXES = {".py", ".yml", ".yaml", ".j2", ".sh", ".mk", ".cfg", ".ini", ".md", ""}
# Spelled in pieces so this file does not match itself.
PATCHING = re.compile(r"\b(?:sys\.path|__path__)\s*(?:\.(?:insert|append|extend)\b|\[[^\]]*\]\s*=|\+=|=[^=])")


def env() -> dict[str, str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    return dict(clean, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1")


def project_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT)
        if any(part in SKIP_DIRS for part in relative.parts) or not path.is_file():
            continue
        if path.suffix in TEXT_SUFFIXES or path.name in ("Makefile", "Dockerfile"):
            found.append(path)
    return found


def test_galaxy_metadata() -> None:
    meta = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())
    assert (meta["namespace"], meta["name"]) == ("sparkfleet", "spark")
    assert meta["version"] and meta["license"] and (COLLECTION / meta["readme"]).is_file()
    listed = {entry["name"] for entry in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    assert set(meta["dependencies"]) == listed


def test_collection_builds(tmp_path: Path) -> None:
    proc = subprocess.run([str(GALAXY), "collection", "build", str(COLLECTION), "--output-path", str(tmp_path)],
                          env=env(), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    version = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["version"]
    artifact = tmp_path / f"sparkfleet-spark-{version}.tar.gz"
    with tarfile.open(artifact) as tar:
        names = set(tar.getnames())
    assert {"MANIFEST.json", "plugins/modules/spark_lldp.py", "plugins/module_utils/spark_data.py",
            "plugins/filter/sparkfleet_fabric.py", "plugins/doc_fragments/spark_read_only.py",
            "roles/fabric/tasks/main.yml", "plugins/module_utils/sparkfleet_bench/__init__.py",
            "plugins/module_utils/sparkfleet_bench/scheduled.py", "roles/serve/files/spark_serve_supervisor.py",
            "templates/netplan-fabric.yaml.j2", "meta/runtime.yml"} <= names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_ansible_finds_the_collection_and_the_bundled_ones() -> None:
    proc = subprocess.run([str(GALAXY), "collection", "list"], cwd=ROOT, env=env(), capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line and not line.startswith(("#", "Collection", "-"))}
    assert {"sparkfleet.spark", "community.docker", "community.general", "ansible.posix", "community.crypto"} <= listed


@pytest.mark.parametrize("setting", ["roles_path", "library", "module_utils", "filter_plugins", "doc_fragment_plugins"])
def test_ansible_cfg_has_no_plugin_directories(setting: str) -> None:
    assert not re.search(rf"^\s*{setting}\s*=", (ROOT / "ansible.cfg").read_text(), flags=re.M)


def test_no_file_patches_import_paths() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in project_files() if path != Path(__file__).resolve()
                 for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
                 if PATCHING.search(line)]
    assert not offenders, "\n".join(offenders)


def test_nothing_imports_the_old_module_utils_names() -> None:
    old = re.compile(r"ansible\.module_utils(?:\.spark_\w+|\s+import\s+spark_)")
    offenders = [str(path.relative_to(ROOT)) for path in project_files() if path.suffix == ".py" or path.suffix == ""
                 if old.search(path.read_text(encoding="utf-8", errors="replace"))]
    assert not offenders, offenders
