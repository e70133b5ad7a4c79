"""The serving plays act on one serving group at a time: serving-order.yml puts the play's Sparks in group
spark_serving_order group after group and keeps the groups' sizes for serial, and the serve role's plan step,
run once per batch, plans that batch's group. Runs the real playbook and plan step on the controller."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import yaml

from testlib import ROOT

SHOW = "serve_group_name ~ ' ' ~ serve_order | join(',') ~ ' ' ~ serve_api_url ~ ' ' ~ ansible_play_batch | join(',')"


def plays(show: str, serial: bool = True) -> list[dict[str, object]]:
    play: dict[str, object] = {"name": "Plan step", "hosts": "spark_serving_order", "gather_facts": False, "tasks": [
        {"name": "Plan | Run the role's plan step",
         "ansible.builtin.include_role": {"name": "sparkfleet.spark.serve", "tasks_from": "plan.yml"}},
        {"name": "Plan | Show what the role keeps", "ansible.builtin.debug": {"msg": "{{ " + show + " }}"}}]}
    if serial:
        play["serial"] = "{{ hostvars.localhost.spark_serving_batch_sizes | default([]) }}"
    return [{"ansible.builtin.import_playbook": str(ROOT / "playbooks" / "serving-order.yml")}, play]


def inventory(tmp_path: Path, groups: dict[str, tuple[str, int]]) -> Path:
    """Serving groups name -> (topology, size), hosts <name with - for _><rank>, local connection; one group is group spark
    itself (no spark_serving_groups)."""
    children = {}
    for index, (name, (topology, size)) in enumerate(groups.items()):
        hosts = {f"{name.replace('_', '-')}{r}": {"ansible_host": f"10.{index + 1}.0.{r + 1}", "spark_rank": r} for r in range(size)}
        children[name] = {"hosts": hosts, "vars": {"spark_topology": topology}}
    common = {"ansible_connection": "local", "spark_device_policy": "available"}
    if list(groups) == ["spark"]:
        tree = {"spark": {**children["spark"], "vars": {**children["spark"]["vars"], **common}}}
    else:
        tree = {"spark": {"children": children, "vars": {**common, "spark_serving_groups": list(groups)}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(tree))
    return tmp_path / "hosts.yml"


def run(tmp_path: Path, hosts: Path, serial: bool = True, limit: str = "") -> tuple[int, str]:
    (tmp_path / "play.yml").write_text(yaml.safe_dump(plays(SHOW, serial), sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_STDOUT_CALLBACK="default")
    argv = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(hosts), str(tmp_path / "play.yml")]
    result = subprocess.run(argv + (["--limit", limit] if limit else []), cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=180)
    return result.returncode, result.stdout + result.stderr


def shown(output: str) -> dict[str, str]:
    """host -> what the plan step kept for it."""
    return dict(re.findall(r"ok: \[(\S+)\] => \n\s+msg: (.+)", output))


def test_each_batch_is_one_group_planned_whole(tmp_path: Path) -> None:
    rc, output = run(tmp_path, inventory(tmp_path, {"ring_a": ("ring", 4), "tri_b": ("triangle", 3)}))
    assert rc == 0, output[-3000:]
    kept = shown(output)
    ring = "ring_a ring-a0,ring-a1,ring-a2,ring-a3 http://10.1.0.1:8000 ring-a0,ring-a1,ring-a2,ring-a3"
    tri = "tri_b tri-b0,tri-b1,tri-b2 http://10.2.0.1:8000 tri-b0,tri-b1,tri-b2"
    assert kept == {**{f"ring-a{r}": ring for r in range(4)}, **{f"tri-b{r}": tri for r in range(3)}}, output[-3000:]
    # The groups run one after the other, in the declared order.
    assert output.index("ok: [ring-a0]") < output.index("ok: [tri-b0]")


def test_a_limited_run_batches_only_the_hosts_in_the_play(tmp_path: Path) -> None:
    rc, output = run(tmp_path, inventory(tmp_path, {"ring_a": ("ring", 4), "tri_b": ("triangle", 3)}),
                     limit="ring-a1,ring-a2,tri-b2")
    assert rc == 0, output[-3000:]
    kept = shown(output)
    assert set(kept) == {"ring-a1", "ring-a2", "tri-b2"}
    assert kept["ring-a1"].endswith(" ring-a1,ring-a2") and kept["tri-b2"].endswith(" tri-b2"), kept
    assert kept["tri-b2"].startswith("tri_b tri-b0,tri-b1,tri-b2 "), kept


def test_one_group_is_one_batch_as_before(tmp_path: Path) -> None:
    rc, output = run(tmp_path, inventory(tmp_path, {"spark": ("triangle", 3)}))
    assert rc == 0, output[-3000:]
    assert set(shown(output).values()) == {"spark spark0,spark1,spark2 http://10.1.0.1:8000 spark0,spark1,spark2"}


def test_the_plan_step_refuses_a_batch_of_two_groups(tmp_path: Path) -> None:
    rc, output = run(tmp_path, inventory(tmp_path, {"ring_a": ("ring", 4), "tri_b": ("triangle", 3)}), serial=False)
    assert rc != 0
    # The callback may fold the message over lines, wherever the width falls.
    flat = " ".join(output.split())
    assert "holds tri-b0, tri-b1, tri-b2 beside serving group ring_a: the serve role acts on one serving group at a time" \
        in flat, output[-3000:]
