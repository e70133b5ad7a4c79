"""Every module in library/ documents itself the way ansible-doc reads it (shared fragments merged):
DOCUMENTATION with its check-mode support, EXAMPLES that call it, RETURN."""
from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest
import yaml

from testlib import ROOT

MODULES = sorted(path.stem for path in (ROOT / "library").glob("spark_*.py"))


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `ansible-doc --json` run over every module, with the project's ansible.cfg only."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path_factory.mktemp("ansible-doc")))
    proc = subprocess.run([str(ROOT / ".venv/bin/ansible-doc"), "--json", "-M", "library", *MODULES],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_every_module_is_found() -> None:
    assert len(MODULES) >= 16


@pytest.mark.parametrize("module", MODULES)
def test_documentation_parses_with_check_mode_support(docs: dict[str, Any], module: str) -> None:
    doc = docs[module]["doc"]
    assert doc["module"] == module and doc["short_description"] and doc["description"]
    assert doc["attributes"]["check_mode"]["support"] in ("full", "partial"), doc["attributes"]
    assert doc["attributes"]["diff_mode"]["support"] in ("full", "partial", "none"), doc["attributes"]
    assert all(option.get("description") for option in doc.get("options", {}).values())


@pytest.mark.parametrize("module", MODULES)
def test_examples_call_the_module(docs: dict[str, Any], module: str) -> None:
    examples = yaml.safe_load(docs[module]["examples"])
    assert isinstance(examples, list) and any(isinstance(task, dict) and module in task for task in examples)


@pytest.mark.parametrize("module", MODULES)
def test_return_values_are_described(docs: dict[str, Any], module: str) -> None:
    returned = docs[module]["return"]
    assert returned, f"{module}: RETURN is empty"
    assert all(value.get("description") and value.get("returned") for value in returned.values()), returned
