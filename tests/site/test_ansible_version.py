"""Every playbook run starts by checking the ansible-core version against the range the toolchain pins."""
from __future__ import annotations

import os
import re
import subprocess
from importlib.metadata import version
from pathlib import Path

import yaml
from ansible.module_utils.compat.version import LooseVersion

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default")
CHECK = ROOT / "playbooks" / "ansible-version.yml"


def _range() -> tuple[str, str]:
    play = yaml.safe_load(CHECK.read_text())[0]
    return play["vars"]["spark_ansible_core_min"], play["vars"]["spark_ansible_core_max"]


def _first_import(path: Path) -> str | None:
    first = yaml.safe_load(path.read_text())[0]
    return first.get("ansible.builtin.import_playbook")


def test_site_and_every_playbook_check_the_version_first() -> None:
    assert _first_import(ROOT / "site.yml") == "playbooks/ansible-version.yml"
    playbooks = [p for p in sorted((ROOT / "playbooks").glob("*.yml")) if p != CHECK]
    assert [p.name for p in playbooks if _first_import(p) != "ansible-version.yml"] == []


def test_the_range_is_the_pinned_series() -> None:
    pins = dict(re.findall(r"^([\w-]+)==(\S+)", (ROOT / "requirements-dev.txt").read_text(), re.M))
    assert pins["ansible"] == "12.3.0"  # the bundle that brings ansible-core 2.19
    low, high = _range()
    assert (low, high) == ("2.19.0", "2.20.0")
    assert LooseVersion(low) <= LooseVersion(version("ansible-core")) < LooseVersion(high)
    assert "ansible-core 2.19" in (ROOT / "README.md").read_text()


def test_an_unsupported_version_is_refused_with_the_range() -> None:
    result = subprocess.run([str(PLAYBOOK), "-i", str(ROOT / "inventories" / "tp3-triangle"),
                             str(ROOT / "playbooks" / "validate.yml"), "-e", "spark_ansible_core_max=2.19.0"],
                            cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert f"ansible-core {version('ansible-core')} is not supported" in out
    assert ">= 2.19.0 and < 2.19.0" in out
    assert "Validate | Check hosts" not in out, "the version check must stop the run before anything else"
