"""Playbooks, roles and lab scenarios read the site plan (spark_site_plan); none assembles a part of it again from
hostvars, which is how serve once launched another collective environment than render.yml wrote."""
from __future__ import annotations

import re

import pytest

from testlib import COLLECTION, ROOT

FILES = sorted([*ROOT.glob("playbooks/**/*.yml"), *COLLECTION.glob("roles/**/*.yml"), *COLLECTION.glob("roles/**/*.j2"),
                *ROOT.glob("molecule/**/*.yml"), ROOT / "site.yml"])
ASSEMBLY = {
    "the fabric plan": re.compile(r"spark_inventory\([^)]*\)\s*\|\s*sparkfleet\.spark\.spark_plan\b"),
    "a collective environment": re.compile(r"\bspark_nccl_env\b"),
    "a serve spec": re.compile(r"\bspark_serve_spec\("),
    "the GID index default": re.compile(r"spark_roce_gid_index\s*\|\s*default\("),
}


@pytest.mark.parametrize("what", sorted(ASSEMBLY))
def test_nothing_assembles_a_part_of_the_site_plan(what: str) -> None:
    found = [str(p.relative_to(ROOT)) for p in FILES if ASSEMBLY[what].search(p.read_text())]
    assert found == [], f"{what} comes from spark_site_plan"


# The serve and doctor roles plan the serving group of their play batch (one batch per group); the stages
# that act on every Spark (fabric, image, model, transfer keys) read every group's plan (spark_fabric_plans,
# spark_site_fabric); every other reader plans group spark, the one serving group the other stages act on.
BATCH_GROUP = {COLLECTION / "roles" / "serve" / "tasks" / "plan.yml": "groups, serve_group_of_batch",
               COLLECTION / "roles" / "doctor" / "tasks" / "plan.yml": "groups, doctor_group"}
PLAN_READ = re.compile(r"spark_site_plan\(|spark_fabric_plans\(groups\)|spark_site_fabric\(groups\)")


def test_the_plan_readers_name_their_serving_group() -> None:
    assert len([p for p in FILES if PLAN_READ.search(p.read_text())]) >= 10
    readers = [p for p in FILES if "spark_site_plan(" in p.read_text()]
    for path in readers:
        expected = BATCH_GROUP.get(path, "groups, 'spark'")
        for call in re.findall(r"spark_site_plan\(([^)]*)\)", path.read_text()):
            assert call == expected, f"{path.relative_to(ROOT)}: spark_site_plan({call})"


def test_the_serve_role_plans_the_group_of_its_batch() -> None:
    serve, doctor = BATCH_GROUP
    assert re.search(r"serve_group_of_batch: \"\{\{ hostvars \| sparkfleet\.spark\.spark_serving_group_of\(groups, "
                     r"inventory_hostname\) \}\}\"", serve.read_text())
    assert re.search(r"doctor_group: \"\{\{ hostvars \| sparkfleet\.spark\.spark_serving_group_of\(groups, "
                     r"inventory_hostname\) \}\}\"", doctor.read_text())


def test_the_endpoint_is_the_plans_head_everywhere_it_is_asked() -> None:
    """serve waits on, the doctor asks and the bench measures one URL: the plan's serve.head.url (the lab's
    verifiers keep their own, as an independent check of it)."""
    stages = [p for p in FILES if "molecule" not in p.relative_to(ROOT).parts]
    assembled = re.compile(r"mgmt_address\s*\}\}:|spark_serve_port\b|spark_bench_head_url\b")
    assert [str(p.relative_to(ROOT)) for p in stages if assembled.search(p.read_text())] == []
