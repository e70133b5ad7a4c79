#!/usr/bin/env python3
"""Benchmark (not a test): our image distribution against the naive baseline on a lab (make bench-distribution).

Baseline: from the builder, for each worker in turn, `docker save <tag> | ssh <worker> docker load`.
Ours: `playbooks/image.yml --tags image-distribute` (plan by image ID; ranks cabled to the head pull by digest
from a registry on it, the rest get thin archives in waves from those). The registry's storage is emptied before
the first distribution, so that case pushes the whole image too.
Cases: (a) first distribution of a multi-layer image of >= 500 MB (workers hold only the base image);
(b) an update that changes one small layer (workers hold the previous version). Both are timed in this
process, on the same lab, one after the other. The last line printed is one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = ROOT / "collections" / "ansible_collections" / "sparkfleet" / "spark"
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
SSH_DIR = "/var/lib/sparkfleet/ssh"
# Every playbook run's output (profile_tasks timings included), numbered in the order of the run.
LOGS = ROOT / "build" / "logs" / "bench-distribution"


def log(msg: str) -> None:
    print(f"bench-distribution: {msg}", flush=True)


def spark_image() -> Any:
    spec = importlib.util.spec_from_file_location("spark_image", COLLECTION / "plugins" / "module_utils" / "spark_image.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["spark_image"] = module
    spec.loader.exec_module(module)
    return module


def playbook(inventory: Path, book: str, *args: str, extra: dict[str, Any] | None = None) -> float:
    """Run a playbook with the lab settings as extra vars; seconds elapsed. Failures stop the benchmark."""
    argv = [str(PLAYBOOK), "-i", str(inventory), book, *args, "-e", f"@{settings_file(inventory)}"]
    if extra:
        argv += ["-e", json.dumps(extra)]
    env = dict(os.environ, SPARK_IMAGE_LAB_INVENTORY=str(inventory))
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - start
    LOGS.mkdir(parents=True, exist_ok=True)
    runs = len(list(LOGS.glob("run-*.log")))
    (LOGS / f"run-{runs + 1:02d}.log").write_text(f"{' '.join(argv)}\n{elapsed:.1f} s\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        sys.exit(f"bench-distribution: {book} {' '.join(args)} failed:\n{proc.stdout[-4000:]}{proc.stderr[-2000:]}")
    return elapsed


def settings_file(inventory: Path) -> Path:
    """The image lab settings molecule/image/overlay.yml keeps beside the inventory (survives lab-inventory)."""
    return inventory.parent / "image-lab" / "settings.yml"


def node_exec(container: str, script: str) -> str:
    proc = subprocess.run(["docker", "exec", container, "sh", "-c", script], capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        sys.exit(f"bench-distribution: {container}: {script}: {proc.stderr.strip()}")
    return proc.stdout


class Lab:
    def __init__(self, inventory: Path, layer_mb: int) -> None:
        self.layer_mb = layer_mb
        hosts = yaml.safe_load((inventory / "hosts.yml").read_text())["spark"]["hosts"]
        self.inventory = inventory
        self.containers = {h: h for h in hosts}  # a lab container is named after its inventory host
        self.ranks = {h: int(v["spark_rank"]) for h, v in hosts.items()}
        self.mgmt = {h: v["spark_mgmt_address"] for h, v in hosts.items()}
        self.head = min(self.ranks, key=self.ranks.get)
        self.workers = sorted((h for h in hosts if h != self.head), key=self.ranks.get)
        self.settings = yaml.safe_load(settings_file(inventory).read_text())

    def tag(self, release: str) -> str:
        trees = {u["name"]: u["tree"] for u in self.settings["spark_image_upstreams"]}
        return spark_image().content_tag(self.settings["spark_image_repository"], release, trees)

    def extra(self, release: str, update: int) -> dict[str, Any]:
        return {"spark_image_release": release,
                "spark_image_build_dockerfile": str(ROOT / "lab/standin/images/bench.Dockerfile"),
                "spark_image_build_args": {"BASE_IMAGE": self.settings["spark_image_build_args"]["BASE_IMAGE"],
                                           "BENCH_UPDATE": str(update), "BENCH_LAYER_MB": str(self.layer_mb)},
                "spark_image_distribute_management_fallback": True}

    def drop(self, tag: str) -> None:
        for host in self.workers:
            node_exec(self.containers[host], f"docker image rm -f {shlex.quote(tag)} >/dev/null 2>&1 || true")

    def baseline(self, tag: str) -> float:
        """Sequential docker save | ssh docker load from the head to each worker (management addresses)."""
        ssh = (f"ssh -i {SSH_DIR}/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes "
               f"-o UserKnownHostsFile={SSH_DIR}/known_hosts")
        start = time.monotonic()
        for host in self.workers:
            node_exec(self.containers[self.head], f"set -e; docker save {shlex.quote(tag)} | "
                                                  f"{ssh} root@{self.mgmt[host]} docker load -q")
        return time.monotonic() - start

    def empty_registry(self) -> None:
        """The head's registry storage, removed while no registry runs (a first distribution pushes it all)."""
        node_exec(self.containers[self.head], "rm -rf /var/lib/sparkfleet/registry")

    def image_size(self, tag: str) -> int:
        return int(node_exec(self.containers[self.head], f"docker image inspect -f '{{{{.Size}}}}' {shlex.quote(tag)}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inventory", required=True, type=Path)
    parser.add_argument("--layer-mb", type=int, default=110,
                        help="size of each of the bench image's five data layers (the image is about 5x this)")
    args = parser.parse_args()
    for old in LOGS.glob("run-*.log"):
        old.unlink()
    lab = Lab(args.inventory.resolve(), args.layer_mb)
    log(f"head {lab.head}, workers {', '.join(lab.workers)}; preparing fabric and lab upstreams")
    playbook(lab.inventory, "molecule/image/prepare.yml")
    # The releases name the layer size: the tag comes from the lock alone, so a reused lab would otherwise take
    # one size's image for another's.
    one, two = f"bench1m{args.layer_mb}", f"bench2m{args.layer_mb}"
    first, second = lab.tag(one), lab.tag(two)
    log(f"building {first} on {lab.head}")
    playbook(lab.inventory, "playbooks/image.yml", "--tags", "image-build", extra=lab.extra(one, 1))
    log(f"{first}: {lab.image_size(first) / 1e6:.0f} MB")
    playbook(lab.inventory, "molecule/image/bench-ssh.yml")

    # A lab measured before still holds the update on the workers; it shares the big layers with the first
    # image and would turn the first distribution into an update.
    lab.drop(first)
    lab.drop(second)
    lab.empty_registry()
    first_s = playbook(lab.inventory, "playbooks/image.yml", "--tags", "image-distribute",
                       extra=lab.extra(one, 1))
    log(f"(a) ours, first distribution: {first_s:.1f} s")
    lab.drop(first)
    first_base = lab.baseline(first)
    log(f"(a) baseline, first distribution: {first_base:.1f} s")

    log(f"building {second} (one small layer changed)")
    playbook(lab.inventory, "playbooks/image.yml", "--tags", "image-build", extra=lab.extra(two, 2))
    lab.drop(second)  # the workers hold the first image only (from the baseline above)
    update_s = playbook(lab.inventory, "playbooks/image.yml", "--tags", "image-distribute",
                        extra=lab.extra(two, 2))
    log(f"(b) ours, update: {update_s:.1f} s")
    lab.drop(second)
    update_base = lab.baseline(second)
    log(f"(b) baseline, update: {update_base:.1f} s")

    floor = playbook(lab.inventory, "playbooks/image.yml", "--tags", "image-distribute", extra=lab.extra(two, 2))
    log(f"ours with nothing to send (the orchestration floor of this run): {floor:.1f} s")

    result = {"first_s": round(first_s, 1), "first_baseline_s": round(first_base, 1),
              "first_ratio": round(first_s / first_base, 3), "update_s": round(update_s, 1),
              "update_baseline_s": round(update_base, 1), "update_ratio": round(update_s / update_base, 3)}
    log(f"first: ours {first_s:.1f} s vs baseline {first_base:.1f} s = {result['first_ratio']:.2f}x (target <= 0.5x)")
    log(f"update: ours {update_s:.1f} s vs baseline {update_base:.1f} s = {result['update_ratio']:.2f}x "
        "(target <= 0.15x)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
