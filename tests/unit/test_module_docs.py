"""Every module of the collection documents itself the way ansible-doc reads it by FQCN (shared fragments merged):
DOCUMENTATION with its check-mode support, EXAMPLES that call it, RETURN; and ansible-doc renders its text page
(the text renderer is stricter than --json: a description line YAML reads as a mapping breaks only the text)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from testlib import COLLECTION, ROOT

NAMESPACE = "sparkfleet.spark"
MODULES = sorted(path.stem for path in (COLLECTION / "plugins" / "modules").glob("spark_*.py"))
FQCNS = [f"{NAMESPACE}.{module}" for module in MODULES]


def ansible_doc(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """ansible-doc with the project's ansible.cfg only (no ANSIBLE_* from the caller), colour off."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(ROOT / ".venv/bin/ansible-doc"), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One `ansible-doc --json` run over every module."""
    proc = ansible_doc(tmp_path_factory.mktemp("ansible-doc-json"), "--json", *FQCNS)
    assert proc.returncode == 0 and "WARNING" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One text run over every module, split into {fqcn: its page}."""
    proc = ansible_doc(tmp_path_factory.mktemp("ansible-doc-text"), *FQCNS)
    assert proc.returncode == 0 and "ERROR" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr
    found = re.split(r"^> MODULE (\S+) .*$", proc.stdout, flags=re.M)
    return dict(zip(found[1::2], found[2::2]))


def test_every_module_is_found() -> None:
    assert len(MODULES) >= 16


@pytest.mark.parametrize("module", MODULES)
def test_documentation_parses_with_check_mode_support(docs: dict[str, Any], module: str) -> None:
    doc = docs[f"{NAMESPACE}.{module}"]["doc"]
    assert doc["module"] == module and doc["short_description"] and doc["description"]
    assert all(isinstance(line, str) for line in doc["description"]), doc["description"]
    assert doc["attributes"]["check_mode"]["support"] in ("full", "partial"), doc["attributes"]
    assert doc["attributes"]["diff_mode"]["support"] in ("full", "partial", "none"), doc["attributes"]
    assert all(option.get("description") for option in doc.get("options", {}).values())


@pytest.mark.parametrize("module", MODULES)
def test_examples_call_the_module_by_fqcn(docs: dict[str, Any], module: str) -> None:
    examples = yaml.safe_load(docs[f"{NAMESPACE}.{module}"]["examples"])
    fqcn = f"{NAMESPACE}.{module}"
    assert isinstance(examples, list) and any(isinstance(task, dict) and fqcn in task for task in examples)


@pytest.mark.parametrize("module", MODULES)
def test_return_values_are_described(docs: dict[str, Any], module: str) -> None:
    returned = docs[f"{NAMESPACE}.{module}"]["return"]
    assert returned, f"{module}: RETURN is empty"
    assert all(value.get("description") and value.get("returned") for value in returned.values()), returned


@pytest.mark.parametrize("module", MODULES)
def test_text_page_renders(docs: dict[str, Any], pages: dict[str, str], module: str) -> None:
    fqcn = f"{NAMESPACE}.{module}"
    page = pages.get(fqcn)
    assert page, f"ansible-doc {fqcn} rendered no page (pages: {sorted(pages)})"
    assert "EXAMPLES:" in page and "RETURN VALUES:" in page, page[-400:]
    listed = set(re.findall(r"^\s*[-=] (\w+)", page, flags=re.M))
    documented = set(docs[fqcn]["doc"].get("options", {})) | set(docs[fqcn]["return"])
    assert documented <= listed, f"{fqcn}: not on the text page: {sorted(documented - listed)}"
