"""Every playbook that acts on nodes refuses an inventory of several serving groups (one-serving-group.yml) before
its first play on a node, unless it acts on every serving group (SEVERAL_GROUPS)."""
from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GUARD = "one-serving-group.yml"
# Playbooks that touch no node, or only remove what bench-schedule.yml installed on the controller or one host,
# and router.yml, which fronts every serving group already (its plan reads every group's head).
NOT_STAGES = {"ansible-version.yml", "device-policy.yml", "validate.yml", "render.yml", GUARD,
              "bench-schedule-remove.yml", "serving-order.yml", "router.yml"}
# Stages that act on every serving group: the host stage acts on each node alone, the fabric plans each node's own
# group, image and model plan their paths over every Spark, and the serving plays (and the reboot path's stop) run
# one group per batch (serving-order.yml), as does the doctor; the bench measures the router, or the group it is
# told to.
SEVERAL_GROUPS = {"fabric.yml", "fabric-restore.yml", "image.yml", "model.yml", "serve.yml", "stop.yml", "status.yml",
                  "host.yml", "reboot.yml", "kernel-rollback.yml", "memory-saver-remove.yml", "bench.yml",
                  "doctor.yml"}


def entries(path: Path) -> list[str]:
    """'guard' for the import of the refusal, 'node' for a play on something other than the controller."""
    order = []
    for play in yaml.safe_load(path.read_text()):
        if play.get("ansible.builtin.import_playbook") == GUARD:
            order.append("guard")
        elif "hosts" in play and play["hosts"] != "localhost":
            order.append("node")
    return order


def test_every_stage_playbook_refuses_several_groups_before_a_node_play() -> None:
    stages = sorted(p for p in (ROOT / "playbooks").glob("*.yml") if p.name not in NOT_STAGES | SEVERAL_GROUPS)
    assert {"bench-schedule.yml"} <= {
        p.name for p in stages}
    missing = [p.name for p in stages if "guard" not in entries(p)]
    assert missing == [], f"import {GUARD}"
    late = [p.name for p in stages if "node" in entries(p) and entries(p).index("node") < entries(p).index("guard")]
    assert late == [], f"import {GUARD} before the first play on a node"


def test_site_yml_reaches_a_node_only_through_stage_playbooks() -> None:
    plays = yaml.safe_load((ROOT / "site.yml").read_text())
    assert all("ansible.builtin.import_playbook" in play for play in plays)


def test_the_stages_of_several_groups_do_not_refuse_them() -> None:
    assert [name for name in sorted(SEVERAL_GROUPS) if "guard" in entries(ROOT / "playbooks" / name)] == []
