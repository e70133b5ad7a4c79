"""Every documented boolean switch works as a command-line string: `-e name=true` / `-e name=false` are accepted,
a string that is not a boolean word is refused naming the switch, and every expression that reads a switch
goes through `| bool` (ansible-core 2.19 refuses a string as a conditional result).

The switches are the `type: bool` options of every role entry point's argument spec plus the ones the
playbooks check themselves through playbooks/tasks/switches.yml. The runs contact no node: a wrapper play on
localhost validates every switch against the same specs the roles run, and the real reboot.yml,
kernel-rollback.yml and bench.yml run against the triangle inventory under a tag no task carries, so only
their `always` checks run.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from testlib import COLLECTION, ROOT

PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
ENV = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
           ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="0")
ONLY_ALWAYS = "sparkfleet-always-only"
SWITCH_TASKS = "tasks/switches.yml"
REAL_PLAYBOOKS = ("playbooks/reboot.yml", "playbooks/kernel-rollback.yml", "playbooks/bench.yml")
CONDITION_KEYS = {"when", "that", "failed_when", "changed_when", "until"}
# Known bare reads still to convert (none left): (file, switch) pairs the scan below forgives.
STILL_BARE: set[tuple[str, str]] = set()
JINJA = re.compile(r"{{(.*?)}}|{%(.*?)%}", re.S)
LITERAL = re.compile(r"'[^']*'|\"[^\"]*\"")


def _mappings(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key != "spark_switch_values":
                yield from _mappings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _mappings(item)


def role_switches() -> dict[tuple[str, str], list[str]]:
    """(role, entry point) -> its boolean options."""
    result = {}
    for path in sorted(COLLECTION.glob("roles/*/meta/argument_specs.yml")):
        for entry, spec in yaml.safe_load(path.read_text())["argument_specs"].items():
            names = [n for n, o in (spec.get("options") or {}).items() if o.get("type") == "bool"]
            if names:
                result[(path.parts[-3], entry)] = names
    return result


def playbook_switches() -> dict[str, list[str]]:
    """playbook -> the switches it checks through tasks/switches.yml."""
    result = {}
    for path in sorted(ROOT.glob("playbooks/*.yml")):
        for task in _mappings(yaml.safe_load(path.read_text())):
            include = task.get("ansible.builtin.include_tasks") or task.get("ansible.builtin.import_tasks")
            if include == SWITCH_TASKS:
                result[str(path.relative_to(ROOT))] = sorted(task["vars"]["spark_switch_values"])
    return result


def all_switches() -> list[str]:
    names = {n for names in role_switches().values() for n in names}
    return sorted(names | {n for names in playbook_switches().values() for n in names})


def test_documented_switches_are_all_covered() -> None:
    """Every `-e spark_x=true|false` in the docs and every literal boolean role default is a known switch."""
    docs = [ROOT / "README.md", *COLLECTION.glob("roles/*/README.md"), *ROOT.glob("docs/*.md"),
            *ROOT.glob("playbooks/*.yml"), ROOT / "site.yml"]
    pattern = r"-e (spark_\w+)=(?:true|false)\b|`(spark_\w+): (?:true|false)`"
    mentioned = {a or b for p in docs for a, b in re.findall(pattern, p.read_text())}
    for path in COLLECTION.glob("roles/*/defaults/main.yml"):
        mentioned |= {k for k, v in (yaml.safe_load(path.read_text()) or {}).items() if isinstance(v, bool)}
    assert {"spark_allow_reboot", "spark_site_bench", "spark_image_build_require_pins",
            "spark_nvidia_driver_allow_change", "spark_fabric_force", "spark_serve_replace"} <= mentioned
    assert sorted(mentioned - set(all_switches())) == []
    for playbook in ("playbooks/reboot.yml", "playbooks/kernel-rollback.yml"):
        assert "spark_allow_reboot" in playbook_switches()[playbook]
    assert "spark_site_bench" in playbook_switches()["playbooks/bench.yml"]


def _expressions(path: Path) -> Iterator[str]:
    """The Jinja expressions of a YAML or template file: conditions whole, elsewhere what is inside {{ }}/{% %}."""
    text = path.read_text()
    if path.suffix == ".j2":
        yield from ("".join(m) for m in JINJA.findall(text))
        return
    for mapping in _mappings(yaml.safe_load(text)):
        for key, value in mapping.items():
            if key == "spark_switch_values":  # the raw values handed to the switch check itself
                continue
            for item in value if isinstance(value, list) else [value]:
                if not isinstance(item, str):
                    continue
                if key in CONDITION_KEYS:
                    yield item
                else:
                    yield from ("".join(m) for m in JINJA.findall(item))


def _after_default(expr: str, pos: int) -> int:
    """Skip an optional `| default(...)` (balanced parentheses) that starts at pos."""
    match = re.compile(r"\s*\|\s*default\(").match(expr, pos)
    if not match:
        return pos
    depth, i = 1, match.end()
    while i < len(expr) and depth:
        depth += {"(": 1, ")": -1}.get(expr[i], 0)
        i += 1
    return i


def unfiltered_uses(expr: str, name: str) -> int:
    """How many times the switch is read without `| bool` (string literals ignored)."""
    bare = LITERAL.sub("''", expr)
    count = 0
    for match in re.finditer(rf"(?<![\w.'\"]){name}\b(?!\s*=[^=])", bare):
        rest = _after_default(bare, match.end())
        if not re.compile(r"\s*\|\s*bool\b").match(bare, rest):
            count += 1
    return count


def test_every_read_of_a_switch_goes_through_bool() -> None:
    files = [ROOT / "site.yml", *ROOT.glob("playbooks/**/*.yml"), *COLLECTION.glob("roles/*/tasks/*.yml"),
             *COLLECTION.glob("roles/*/handlers/*.yml"), *COLLECTION.glob("roles/*/defaults/*.yml"),
             *COLLECTION.glob("roles/*/vars/*.yml"), *COLLECTION.glob("roles/*/templates/**/*.j2"), *COLLECTION.glob("templates/**/*.j2")]
    switches = all_switches()
    bad = [f"{path.relative_to(ROOT)}: {name} in {expr.strip()!r}"
           for path in files for expr in _expressions(path) for name in switches
           if unfiltered_uses(expr, name) and (str(path.relative_to(ROOT)), name) not in STILL_BARE]
    assert bad == []


@pytest.mark.parametrize(("expr", "count"), [
    ("spark_x", 1), ("not spark_x", 1), ("spark_x | bool", 0), ("not (spark_x | default(false) | bool)", 0),
    ("spark_x | default(h[(g['a'] | default(['b']))[0]]['spark_x'] | default(false)) | bool", 0),
    ("'spark_x is false'", 0), ("f(spark_x=true)", 0), ("spark_x and spark_x | bool", 1),
])
def test_unfiltered_use_detector(expr: str, count: int) -> None:
    assert unfiltered_uses(expr, "spark_x") == count


def _wrapper(tmp_path: Path) -> Path:
    """One localhost play: every role entry point's boolean options, validated as the role's spec check does,
    and the playbooks' own switch check; failures are kept so one run names every refused switch."""
    specs = [{"entry": f"{role}/{entry}", "spec": {n: {"type": "bool"} for n in names}}
             for (role, entry), names in role_switches().items()]
    values = {n: f"{{{{ {n} }}}}" for names in playbook_switches().values() for n in names}
    play = [{"name": "Switches | Validate every switch", "hosts": "localhost", "connection": "local",
             "gather_facts": False, "tags": ["always"],
             "tasks": [{"name": "Switches | Validate every role entry point",
                        "ansible.builtin.validate_argument_spec": {"argument_spec": "{{ item.spec }}"},
                        "loop": specs, "loop_control": {"label": "{{ item.entry }}"}, "ignore_errors": True},
                       {"name": "Switches | Validate the playbook switches",
                        "ansible.builtin.import_tasks": str(ROOT / "playbooks" / SWITCH_TASKS),
                        "vars": {"spark_switch_values": values}, "ignore_errors": True}]}]
    path = tmp_path / "switches.yml"
    path.write_text(json.dumps(play))
    return path


def run(playbooks: list[str], value: str) -> subprocess.CompletedProcess[str]:
    extra = [arg for name in all_switches() for arg in ("-e", f"{name}={value}")]  # one -e per switch, as typed
    return subprocess.run([str(PLAYBOOK), "-i", str(ROOT / "inventories" / "tp3-triangle"), *playbooks, *extra,
                           "--tags", ONLY_ALWAYS], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("value", ["true", "false"])
def test_boolean_strings_are_accepted(tmp_path: Path, value: str) -> None:
    result = run([str(_wrapper(tmp_path)), *REAL_PLAYBOOKS], value)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "ignored=0" in out and "failed=0" in out, out
    assert "Validate every role entry point" in out and "Refuse a switch that is not a boolean word" in out


def test_a_non_boolean_word_is_refused_naming_the_switch(tmp_path: Path) -> None:
    # reboot.yml runs last: its refusal ends the run, the wrapper's failures are kept.
    result = run([str(_wrapper(tmp_path)), "playbooks/reboot.yml"], "maybe")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    refused = set(re.findall(r"argument '(spark_\w+)' is of type str and we were unable to convert to bool", out))
    assert sorted(set(all_switches()) - refused) == []
    assert re.search(r"fatal: \[dgx1\]: FAILED!.{0,400}spark_allow_reboot", out, re.S), out
