"""The stage playbooks act on every serving group of an inventory: none refuses several groups, and the ones
that act on one group at a time run one batch per group (serving-order.yml)."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ORDER = "serving-order.yml"
# The plays that start, replace, stop, check or reboot a serving group: one group per batch.
BATCHED = {"serve.yml", "stop.yml", "status.yml", "doctor.yml", "reboot.yml", "kernel-rollback.yml"}


def plays(name: str) -> list[dict]:
    return yaml.safe_load((ROOT / "playbooks" / name).read_text())


def test_no_playbook_refuses_several_serving_groups() -> None:
    imports = {p.name: [play.get("ansible.builtin.import_playbook") for play in yaml.safe_load(p.read_text())]
               for p in (ROOT / "playbooks").glob("*.yml")}
    assert not (ROOT / "playbooks" / "one-serving-group.yml").exists()
    assert [name for name, imported in imports.items() if "one-serving-group.yml" in imported] == []


def test_the_group_plays_run_one_serving_group_per_batch_after_ordering_the_sparks() -> None:
    for name in sorted(BATCHED):
        entries = plays(name)
        order = [i for i, play in enumerate(entries) if play.get("ansible.builtin.import_playbook") == ORDER]
        batched = [i for i, play in enumerate(entries) if play.get("hosts") == "spark_serving_order"]
        assert order and batched and order[0] < batched[0], name
        for i in batched:
            assert entries[i]["serial"] == "{{ hostvars.localhost.spark_serving_batch_sizes | default([]) }}", name


def test_site_yml_reaches_a_node_only_through_stage_playbooks() -> None:
    plays_of_site = yaml.safe_load((ROOT / "site.yml").read_text())
    assert all("ansible.builtin.import_playbook" in play for play in plays_of_site)
