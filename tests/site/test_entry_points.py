"""Role entry points are called by name, so Ansible runs their argument specs before any task.

`tasks_from: prepare.yml` loads the same file but looks up the spec under "prepare.yml", finds none and
silently validates nothing. The static test covers every import_role/include_role in the project; the runs
play the real fabric playbooks against the shipped triangle inventory under a tag no task carries, so only
`always` work runs (the argument spec checks, planning facts and asserts) and no node is contacted.
"""
from __future__ import annotations

import os
import subprocess
from typing import Any, Iterator

import yaml

from testlib import COLLECTION, ROOT

NAMESPACE = "sparkfleet.spark."

PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default")
ONLY_ALWAYS = "sparkfleet-always-only"
ROLE_KEYS = ("ansible.builtin.import_role", "ansible.builtin.include_role", "import_role", "include_role")


def _tasks(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in a playbook or task file, nested blocks and plays included."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _tasks(value)
    elif isinstance(node, list):
        for item in node:
            yield from _tasks(item)


def role_calls() -> list[tuple[str, str, str]]:
    """(file, role, entry point as written) for every role import or include in the project."""
    files = [ROOT / "site.yml", *ROOT.glob("playbooks/**/*.yml"), *COLLECTION.glob("roles/*/tasks/*.yml"),
             *COLLECTION.glob("roles/*/handlers/*.yml")]
    calls = []
    for path in files:
        for task in _tasks(yaml.safe_load(path.read_text())):
            for key in ROLE_KEYS:
                if isinstance(task.get(key), dict):
                    args = task[key]
                    role = args["name"].removeprefix(NAMESPACE)
                    calls.append((str(path.relative_to(ROOT)), role, str(args.get("tasks_from", "main"))))
    return calls


def entry_points(role: str) -> set[str]:
    spec = yaml.safe_load((COLLECTION / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return set(spec["argument_specs"])


def play(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLAYBOOK), "-i", str(ROOT / "inventories" / "tp3-triangle"), *args,
                           "--tags", ONLY_ALWAYS], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=180)


def test_every_role_call_names_an_entry_point_with_a_spec() -> None:
    calls = role_calls()
    assert any(role == "fabric" for _, role, _ in calls), "the scan found no role call"
    assert all((COLLECTION / "roles" / role).is_dir() for _, role, _ in calls), "call the collection's roles by FQCN"
    wrong = [(f, role, entry) for f, role, entry in calls if entry not in entry_points(role)]
    assert wrong == [], "call entry points by name (no .yml) and give each one an argument spec"


def test_fabric_playbooks_run_the_specs_of_their_entry_points() -> None:
    result = play("playbooks/fabric.yml", "playbooks/fabric-restore.yml")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for entry in ("prepare", "apply", "verify", "restore"):
        assert f"Validating arguments against arg spec '{entry}'" in out, entry


def test_wrong_typed_fabric_variables_are_refused_by_the_spec() -> None:
    result = play("playbooks/fabric.yml", "-e", "spark_fabric_ping_count=many")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "Validating arguments against arg spec 'prepare'" in out
    assert "argument 'spark_fabric_ping_count' is of type str" in out


def test_an_unknown_netplan_renderer_is_refused_by_validate_before_any_node() -> None:
    result = play("playbooks/fabric.yml", "-e", "spark_fabric_netplan_renderer=wicked")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "spark_fabric_netplan_renderer must be NetworkManager or networkd, got 'wicked'" in out
    assert "Validating arguments against arg spec" not in out
