"""spark_device_policy is settled once, by playbooks/device-policy.yml, before any role that reads it: no role
defaults it, every consumer declares it in its argument spec, every playbook that runs a consumer imports the
settling play first, and a value from the command line is a string: `-e spark_device_policy=available` works,
`true` or a typo is refused naming the field and the host before any node is contacted.

The runs contact no node: the triangle inventory under a tag no task carries, so only `always` plays and the
roles' argument spec checks run."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "collections" / "ansible_collections" / "sparkfleet" / "spark" / "roles"
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="0")
ONLY_ALWAYS = "sparkfleet-always-only"
SETTLE = "device-policy.yml"
CONSUMERS = ("host_baseline", "kernel", "nvidia_driver", "memory_saver", "fabric", "serve", "doctor")


ROLE_CALL = re.compile(r"ansible\.builtin\.(?:import|include)_role:\s*\n\s*name:\s*(?:sparkfleet\.spark\.)?(\w+)")
TASK_FILE = re.compile(r"ansible\.builtin\.(?:import|include)_tasks:\s*(tasks/[\w-]+\.yml)")


def _roles_named(play: dict[str, Any]) -> set[str]:
    """Roles a play runs: roles:, import_role/include_role in its tasks or in the playbooks/tasks/ files it includes."""
    found = {(r["role"] if isinstance(r, dict) else r).removeprefix("sparkfleet.spark.") for r in play.get("roles") or []}
    text = yaml.safe_dump(play)
    texts = [text, *((ROOT / "playbooks" / name).read_text() for name in TASK_FILE.findall(text))]
    return found | {role for t in texts for role in ROLE_CALL.findall(t)}


def consumer_playbooks() -> dict[str, list[str]]:
    """playbook -> its entries in order: 'settle' for the import of device-policy.yml, 'consumer' for a play
    that runs a consumer role."""
    result = {}
    for path in sorted((ROOT / "playbooks").glob("*.yml")):
        order = []
        for play in yaml.safe_load(path.read_text()):
            if play.get("ansible.builtin.import_playbook") == SETTLE:
                order.append("settle")
            elif _roles_named(play) & set(CONSUMERS):
                order.append("consumer")
        if "consumer" in order:
            result[path.name] = order
    return result


def test_every_playbook_running_a_consumer_settles_the_policy_first() -> None:
    playbooks = consumer_playbooks()
    assert {"host.yml", "fabric.yml", "serve.yml", "doctor.yml", "reboot.yml"} <= set(playbooks)
    late = [name for name, order in playbooks.items() if order[0] != "settle"]
    assert late == [], "import device-policy.yml before the first play that runs a role reading spark_device_policy"


def test_no_role_defaults_the_policy_and_every_consumer_declares_it() -> None:
    for path in sorted(ROLES.glob("*/defaults/main.yml")):
        assert "spark_device_policy" not in (yaml.safe_load(path.read_text()) or {}), path
    for role in CONSUMERS:
        specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        option = specs["main"]["options"]["spark_device_policy"]
        assert option["required"] is True and option["choices"] == ["require", "available"], role
        assert option["type"] == "str" and "default" not in option, role
    gone = ("spark_host_is_container", "spark_serve_device_policy", "spark_doctor_device_policy")
    files = [*ROLES.glob("**/*.yml"), *ROOT.glob("playbooks/**/*.yml"), *ROOT.glob("molecule/**/*.yml"),
             *ROOT.glob("molecule/**/*.j2"), *ROOT.glob("inventories/**/*.yml"), ROOT / "site.yml"]
    assert [str(p.relative_to(ROOT)) for p in files if any(name in p.read_text() for name in gone)] == []


def run(playbooks: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(PLAYBOOK), "-i", str(ROOT / "inventories" / "tp3-triangle"), *playbooks, *extra,
                           "--tags", ONLY_ALWAYS], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("value", ["true", "bogus"])
def test_a_value_other_than_the_two_words_is_refused_before_any_role(value: str) -> None:
    result = run(["site.yml"], "-e", f"spark_device_policy={value}")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert re.search(rf"fatal: \[dgx1\]: FAILED!.{{0,600}}host dgx1: spark_device_policy must be one of require,"
                     rf"\s+available, got\s+''{value}''", out, re.S), out
    assert "Validating arguments against arg spec" not in out, "a role ran before the refusal"
    assert "Gathering Facts" not in out, "a node was contacted before the refusal"


@pytest.mark.parametrize("value", ["available", "require"])
def test_the_two_words_are_accepted_from_the_command_line(value: str) -> None:
    result = run(["playbooks/fabric.yml", "playbooks/doctor.yml"], "-e", f"spark_device_policy={value}")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    for entry in ("prepare", "verify", "main"):
        assert f"Validating arguments against arg spec '{entry}'" in out, entry
    assert "failed=0" in out and "failed=1" not in out, out


def test_unset_settles_to_require(tmp_path: Path) -> None:
    show = tmp_path / "show.yml"
    show.write_text(yaml.safe_dump([
        {"name": "Settle", "ansible.builtin.import_playbook": str(ROOT / "playbooks" / SETTLE)},
        {"name": "Show", "hosts": "spark", "gather_facts": False, "tags": ["always"],
         "tasks": [{"name": "Show | Print the policy", "ansible.builtin.debug": {"msg": "policy={{ spark_device_policy }}"}}]}]))
    result = run([str(show)])
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert out.count("policy=require") == 3, out
