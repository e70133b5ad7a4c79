"""Pure logic of the serve role's one-call rank probe (plugins/modules/spark_serve_probe.py), free of I/O.

A start used to ask every rank a dozen questions, one Ansible round trip each (host facts, image, runtimes,
paths, limits, containers, ports, guard). The module now asks them all in one call; this file turns the raw
command outputs into the values the role compares across ranks.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

# Host facts serve needs (spark_serve_refusals and the cross-rank comparison), a subset of spark_host_facts.
HOST_KEYS = ("kernel_release", "page_size", "page_size_flavour", "uvm_packing", "driver_running", "kho_off")


def parse_image(rc: int, stdout: str, stderr: str) -> Dict[str, Any]:
    """`docker image inspect --format '{{json .}}' IMAGE` -> present, id, labels (or why it is missing)."""
    if rc != 0:
        return {"present": False, "id": None, "labels": {}, "error": (stderr or stdout).strip()[:300]}
    doc = json.loads(stdout)
    labels = (doc.get("Config") or {}).get("Labels") or {}
    return {"present": True, "id": doc.get("Id"), "labels": labels, "error": ""}


def parse_runtimes(rc: int, stdout: str) -> List[str]:
    """`docker info --format '{{json .Runtimes}}'` -> runtime names ([] when docker info failed)."""
    if rc != 0 or not stdout.strip():
        return []
    runtimes = json.loads(stdout)
    return sorted(runtimes) if isinstance(runtimes, dict) else []


def parse_containers(stdout: str) -> Dict[str, str]:
    """`docker ps --all --format '{{.Names}}\\t{{.State}}'` -> {name: state}."""
    states = {}
    for line in stdout.splitlines():
        name, sep, state = line.partition("\t")
        if sep:
            states[name.strip()] = state.strip()
    return states


def container_summary(states: Dict[str, str], name: str) -> Tuple[str, List[str]]:
    """(state of the serving container or 'absent', leftovers <name>-pre-* of an interrupted replace)."""
    strays = sorted(n for n in states if n.startswith(f"{name}-pre-"))
    return states.get(name, "absent"), strays


def parse_unit(stdout: str) -> Dict[str, str]:
    """`systemctl show --property=LoadState,ActiveState UNIT` -> {LoadState, ActiveState}."""
    values = dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)
    return {"load_state": values.get("LoadState", "not-found"), "active_state": values.get("ActiveState", "inactive")}


def guard_summary(unit: Dict[str, str], status_file_exists: bool) -> Dict[str, Any]:
    """Whether anything of a guard is left (a loaded unit, even failed, or a status file): then disarm."""
    return dict(unit, status_file=status_file_exists,
                present=unit["load_state"] == "loaded" or status_file_exists)


def host_subset(facts: Dict[str, Any]) -> Dict[str, Any]:
    """The host facts serve compares, with the reasons of those that stayed unknown."""
    unavailable = facts.get("unavailable") or {}
    subset = {key: facts.get(key) for key in HOST_KEYS}
    subset["unavailable"] = {k: v for k, v in unavailable.items() if k in HOST_KEYS}
    return subset


def rank_problems(host: str, image: Dict[str, Any], image_name: str, missing_paths: List[str],
                  strays: List[str], container: str, listeners: List[str], ports: List[int]) -> List[str]:
    """Every reason this rank must not launch, each naming the host, the thing and the next step."""
    problems = []
    if not image["present"]:
        problems.append(f"{host}: image {image_name} is not present ({image['error']}); run playbooks/image.yml")
    if missing_paths:
        problems.append(f"{host}: bind-mount sources missing: {', '.join(missing_paths)} (run playbooks/model.yml)")
    if strays:
        problems.append(f"{host}: stray container(s) {', '.join(strays)} left by an interrupted replace; start the one "
                        "you want back with `docker rename` + `docker start`, or remove them with docker rm")
    if listeners and container != "running":
        shown = " or ".join(str(p) for p in ports)
        problems.append(f"{host}: port {shown} is in use but the serving container is not running "
                        f"({'; '.join(listeners)}); stop what holds it")
    return problems


def ss_filter(ports: List[int]) -> str:
    """The `ss` filter expression for listeners on any of the ports."""
    return "( " + " or ".join(f"sport = :{p}" for p in ports) + " )"
