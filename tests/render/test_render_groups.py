"""validate.yml and render.yml on inventories of several serving groups (spark_serving_groups)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from test_render import ROOT, earlier_render, play

MIXED = ROOT / "tests" / "inventories" / "mixed7"
# tests/inventories/mixed7: a ring of four and a triangle of three, the triangle on a named profile.
GROUPS = {"ring_a": ({f"ra{r + 1}": {"ansible_host": f"10.0.3.{11 + r}", "spark_rank": r} for r in range(4)},
                     {"spark_topology": "ring"}),
          "triangle_b": ({f"tb{r + 1}": {"ansible_host": f"10.0.3.{21 + r}", "spark_rank": r} for r in range(3)},
                         {"spark_topology": "triangle", "spark_serve_profile": "tp3-r6-4k"})}


def files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def write_groups(path: Path, groups: dict[str, tuple[dict[str, Any], dict[str, Any]]], declared: Any,
                 spark_hosts: dict[str, Any] | None = None) -> Path:
    """An inventory whose group spark has the serving groups as children (and spark_hosts of its own)."""
    children = {name: {"hosts": hosts, "vars": group} for name, (hosts, group) in groups.items()}
    spark: dict[str, Any] = {"children": children, "vars": {"spark_serving_groups": declared}}
    if spark_hosts:
        spark["hosts"] = spark_hosts
    path.mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(yaml.safe_dump({"spark": spark}))
    return path


def one_group(path: Path, hosts: dict[str, Any], group: dict[str, Any]) -> Path:
    """An inventory of one serving group: its hosts as group spark."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts, "vars": group}}))
    return path


def test_validate_names_each_serving_group() -> None:
    result = play(MIXED, "validate.yml")
    assert result.returncode == 0, result.stdout
    said = " ".join(result.stdout.split())
    assert "Inventory valid: 7 nodes in 2 serving groups: ring_a (ring of 4), triangle_b (triangle of 3)" in said


def test_each_group_renders_into_its_directory_what_it_renders_alone(tmp_path: Path) -> None:
    out = tmp_path / "mixed"
    earlier_render(out, ["ra1", "tb1"], True)  # an earlier render of one group, in the one-group layout
    result = play(MIXED, "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    written = files(out)
    for name, (hosts, group) in GROUPS.items():
        alone = tmp_path / name
        result = play(one_group(tmp_path / f"inv-{name}", hosts, group), "render.yml", "-e",
                      f"spark_render_dir={alone}")
        assert result.returncode == 0, result.stdout + result.stderr
        expected = files(alone)
        plan = json.loads(expected.pop("plan.json"))
        assert json.loads(written.pop(f"{name}/plan.json")) == plan | {"group": name}
        assert {k.removeprefix(f"{name}/"): v for k, v in written.items() if k.startswith(f"{name}/")} == expected
        assert len(expected) == 3 * len(hosts), "netplan.yaml, nccl.env and serve.json per node"
    assert not [k for k in written if not k.startswith(tuple(f"{name}/" for name in GROUPS))], \
        "the one-group layout's earlier files are gone"


def test_a_one_group_render_removes_an_earlier_render_of_several(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert play(MIXED, "render.yml", "-e", f"spark_render_dir={out}").returncode == 0
    hosts, group = GROUPS["triangle_b"]
    result = play(one_group(tmp_path / "inv", hosts, group), "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode == 0, result.stdout
    assert sorted(files(out)) == sorted(
        ["plan.json"] + [f"{h}/{f}" for h in hosts for f in ("netplan.yaml", "nccl.env", "serve.json")])


def spare_in_spark(groups: dict[str, Any]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    return groups, ["ring_a", "triangle_b"], {"spare1": {"ansible_host": "10.0.3.99", "spark_rank": 0}}


def ring_host_in_triangle(groups: dict[str, Any]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    changed = json.loads(json.dumps(groups))
    changed["triangle_b"][0]["ra4"] = {}
    return changed, ["ring_a", "triangle_b"], {}


def ring_profile_on_triangle(groups: dict[str, Any]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    changed = json.loads(json.dumps(groups))
    changed["triangle_b"][1]["spark_serve_profile"] = "tp4-r6"
    return changed, ["ring_a", "triangle_b"], {}


@pytest.mark.parametrize("change,message", [
    (ring_host_in_triangle, "host ra4: in serving groups ring_a, triangle_b (spark_serving_groups): a Spark serves in one group"),
    (spare_in_spark, "host spare1: in group spark but in no serving group (spark_serving_groups: ring_a, triangle_b)"),
    (ring_profile_on_triangle, "group triangle_b, host tb1: spark_serve_profile does not fit the group: profile tp4-r6 "
                               "is for a ring of 4 nodes, the plan is a triangle of 3 nodes"),
], ids=["host-in-two-groups", "spark-in-no-group", "profile-size"])
def test_validate_and_render_refuse_a_bad_inventory_of_several_groups(tmp_path: Path, change: Any, message: str) -> None:
    groups, declared, spark_hosts = change(GROUPS)
    inventory = write_groups(tmp_path / "inv", groups, declared, spark_hosts)
    result = play(inventory, "validate.yml")
    assert result.returncode != 0
    assert message in " ".join(result.stdout.split()), result.stdout
    out = tmp_path / "out"
    assert play(inventory, "render.yml", "-e", f"spark_render_dir={out}").returncode != 0
    assert not out.exists(), "render must write nothing for an invalid inventory"


def test_a_ring_beside_a_switched_group_renders_serve_json_for_the_ring_only(tmp_path: Path) -> None:
    groups = {"ring_a": GROUPS["ring_a"],
              "sw_b": ({f"sb{r + 1}": {"ansible_host": f"10.0.3.{31 + r}", "spark_rank": r} for r in range(2)},
                       {"spark_topology": "switched"})}
    out = tmp_path / "out"
    result = play(write_groups(tmp_path / "inv", groups, ["ring_a", "sw_b"]), "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p for p in files(out) if p.startswith("sw_b/")) == [
        "sw_b/plan.json", "sw_b/sb1/nccl.env", "sw_b/sb1/netplan.yaml", "sw_b/sb2/nccl.env", "sw_b/sb2/netplan.yaml"]
    assert len([p for p in files(out) if p.startswith("ring_a/") and p.endswith("/serve.json")]) == 4
    said = " ".join(result.stdout.split())
    assert "Group sw_b: no serve.json rendered; serve would refuse:" in said
    assert "topology switched has no serving profile" in said
    assert "Rendered 2 serving groups (ring_a: ring of 4, sw_b: switched of 2)" in said


def test_the_router_plan_is_rendered_with_every_group_head_and_removed_with_the_group(tmp_path: Path) -> None:
    inventory = write_groups(tmp_path / "inv", GROUPS, list(GROUPS))
    (inventory / "router.yml").write_text(yaml.safe_dump(
        {"spark_router": {"hosts": {"gateway": {"ansible_host": "10.0.3.99", "spark_router_policy": "round_robin"}}}}))
    out = tmp_path / "out"
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads((out / "router.json").read_text()) == {
        "host": "gateway", "address": "10.0.3.99", "port": 8080, "policy": "round_robin", "url": "http://10.0.3.99:8080",
        "model": "deepseek-v4.1-flash",
        "backends": [{"group": "ring_a", "host": "ra1", "url": "http://10.0.3.11:8000"},
                     {"group": "triangle_b", "host": "tb1", "url": "http://10.0.3.21:8000"}]}
    (inventory / "router.yml").unlink()
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (out / "router.json").exists()


def test_a_router_that_cannot_work_is_refused_before_a_file_is_written(tmp_path: Path) -> None:
    inventory = write_groups(tmp_path / "inv", GROUPS, list(GROUPS))
    (inventory / "router.yml").write_text(yaml.safe_dump({"spark_router": {"hosts": {"ra1": {"spark_router_port": 8000}}}}))
    out = tmp_path / "out"
    result = play(inventory, "render.yml", "-e", f"spark_render_dir={out}")
    assert result.returncode != 0
    assert "host ra1: spark_router_port 8000 is a port its serving engine listens on" in result.stdout
    assert not out.exists()
    result = play(inventory, "validate.yml", "-e", "spark_router_port=x")
    assert result.returncode != 0 and "host ra1: spark_router_port must be an integer port 1-65535, got 'x'" in result.stdout
