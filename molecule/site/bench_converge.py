#!/usr/bin/env python3
"""Converge benchmark (figures, not a test): the wall time of a no-change `site.yml` run on an already
converged cluster, on all nodes, on the head alone (`--limit <head>,localhost`), and on all nodes with
pipelining and connection reuse off. Each run once, after one warm-up run; every run must report
changed=0, failed=0 and unreachable=0 for every host in its PLAY RECAP, or the benchmark stops.

Why the head's limit also names localhost: an implicit localhost is outside any `--limit` that does not
name it, so validation and the plays that order the nodes would be skipped and the 1-node run would do
less work than a real one.

Why the "reuse" runs set ANSIBLE_PIPELINING=True: ansible.cfg enables pipelining under [ssh_connection],
which only the ssh connection reads; a docker connection reads the global setting. Setting it explicitly
measures the intended configuration on both. The "no reuse" run sets ANSIBLE_PIPELINING=False, passes
`-e ansible_pipelining=false -e ansible_ssh_pipelining=false` (the lab inventory turns pipelining on per
host, which only extra vars override) and replaces ansible.cfg's ssh_args with
`-o ControlMaster=no -o ControlPath=none` (no master started, no existing master socket used).

The last line printed is one JSON object {"nodes4_s", "nodes1_s", "scaling_ratio", "no_reuse_s",
"reuse_ratio"}: nodes4_s is the all-nodes time whatever the node count, scaling_ratio = nodes4_s / nodes1_s,
reuse_ratio = no_reuse_s / nodes4_s (how much slower the run is without pipelining and reuse).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

Recap = dict[str, dict[str, int]]

RECAP_HEADER = re.compile(r"^PLAY RECAP\b")
RECAP_LINE = re.compile(r"^(?P<host>\S+)\s+:\s+(?P<counts>(?:[a-z_]+=\d+\s*)+)$")
COUNTER = re.compile(r"([a-z_]+)=(\d+)")
# Counters that must be zero in a no-change run.
MUST_BE_ZERO = ("changed", "failed", "unreachable")
NO_REUSE_SSH_ARGS = "-o ControlMaster=no -o ControlPath=none"
# Extra vars beat an inventory's per-host pipelining (the lab sets it for every node).
NO_REUSE_VARS = ["-e", "ansible_pipelining=false", "-e", "ansible_ssh_pipelining=false"]


@dataclass(frozen=True)
class Run:
    """One timed ansible-playbook run."""

    label: str
    seconds: float
    returncode: int
    recap: Recap
    log: Path


def parse_recap(output: str) -> Recap:
    """Host -> counters of the last PLAY RECAP in the output (empty when there is none)."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if RECAP_HEADER.match(line)]
    if not starts:
        return {}
    recap: Recap = {}
    for line in lines[starts[-1] + 1:]:
        match = RECAP_LINE.match(line.rstrip())
        if not match:
            if recap:
                break
            continue
        recap[match["host"]] = {key: int(value) for key, value in COUNTER.findall(match["counts"])}
    return recap


def recap_problems(recap: Recap, expected_hosts: Sequence[str]) -> list[str]:
    """Why a run is not a clean no-change run: missing recap or hosts, non-zero counters."""
    if not recap:
        return ["no PLAY RECAP in the output"]
    problems = [f"{host}: not in the PLAY RECAP" for host in expected_hosts if host not in recap]
    for host, counters in recap.items():
        for key in MUST_BE_ZERO:
            if counters.get(key, 0) != 0:
                problems.append(f"{host}: {key}={counters[key]}")
    return problems


def spark_hosts(inventory: Mapping[str, Any]) -> list[str]:
    """Hosts of group spark in an `ansible-inventory --list` document."""
    return list((inventory.get("spark") or {}).get("hosts") or [])


def head_host(inventory: Mapping[str, Any]) -> str:
    """The spark host with spark_rank 0 (the head), from an `ansible-inventory --list` document."""
    hostvars = (inventory.get("_meta") or {}).get("hostvars") or {}
    heads = [host for host in spark_hosts(inventory) if (hostvars.get(host) or {}).get("spark_rank") == 0]
    if len(heads) != 1:
        raise ValueError(f"expected exactly one spark host with spark_rank 0, found {heads or 'none'}")
    return heads[0]


def figures(all_s: float, one_s: float, no_reuse_s: float) -> dict[str, float]:
    """The benchmark's result object (seconds and ratios rounded to milliseconds / 3 decimals)."""
    if all_s <= 0 or one_s <= 0:
        raise ValueError(f"run times must be positive, got all={all_s} one={one_s}")
    return {"nodes4_s": round(all_s, 3), "nodes1_s": round(one_s, 3),
            "scaling_ratio": round(all_s / one_s, 3), "no_reuse_s": round(no_reuse_s, 3),
            "reuse_ratio": round(no_reuse_s / all_s, 3)}


def run_env(base: Mapping[str, str], root: Path, reuse: bool) -> dict[str, str]:
    """The environment of one run: plain output, the project's config, pipelining/reuse on or off."""
    env = {**base, "ANSIBLE_CONFIG": str(root / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_FORCE_COLOR": "0", "PYTHONUNBUFFERED": "1"}
    env["ANSIBLE_PIPELINING"] = "True" if reuse else "False"
    if reuse:
        env.pop("ANSIBLE_SSH_ARGS", None)
    else:
        env["ANSIBLE_SSH_ARGS"] = NO_REUSE_SSH_ARGS
    return env


def tool(name: str, root: Path) -> str:
    """An Ansible command from this interpreter's venv, else the repository's .venv."""
    beside = Path(sys.executable).parent / name
    return str(beside if beside.exists() else root / ".venv" / "bin" / name)


def load_inventory(inventory: Path, root: Path) -> dict[str, Any]:
    proc = subprocess.run([tool("ansible-inventory", root), "-i", str(inventory), "--list"], cwd=root,
                          env=run_env(os.environ, root, True), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"ansible-inventory -i {inventory} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def log_name(index: int, label: str) -> str:
    """A file name for a run's output: its position and its label in lowercase words."""
    return f"{index}-{re.sub(r'[^a-z0-9]+', '-', label.lower()).strip('-')}.log"


def timed_run(label: str, argv: list[str], env: Mapping[str, str], root: Path, log: Path) -> Run:
    """Run ansible-playbook once with its output in `log`, and time it."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as handle:
        proc = subprocess.run(argv, cwd=root, env=dict(env), stdout=handle, stderr=subprocess.STDOUT,
                              text=True, check=False)
    seconds = time.monotonic() - started
    return Run(label, seconds, proc.returncode, parse_recap(log.read_text(encoding="utf-8")), log)


def checked(run: Run, expected_hosts: Sequence[str]) -> Run:
    """Stop the benchmark unless the run was a clean no-change run."""
    problems = recap_problems(run.recap, expected_hosts)
    if run.returncode != 0:
        problems.insert(0, f"ansible-playbook exited {run.returncode}")
    if problems:
        raise SystemExit(f"{run.label}: not a no-change run ({'; '.join(problems)}); output: {run.log}")
    return run


def describe(run: Run) -> str:
    total = {key: sum(c.get(key, 0) for c in run.recap.values()) for key in ("ok", "changed", "failed")}
    return (f"{run.label}: {run.seconds:.2f} s ({len(run.recap)} hosts in the recap, ok={total['ok']} "
            f"changed={total['changed']} failed={total['failed']})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inventory", required=True, type=Path, help="inventory of an already converged cluster")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="repository root")
    parser.add_argument("--playbook", default="site.yml", help="playbook, relative to --root (default site.yml)")
    parser.add_argument("--log-dir", type=Path, help="where each run's output goes (default ROOT/build/bench-converge)")
    parser.add_argument("extra", nargs="*", help="extra ansible-playbook arguments (after --), e.g. -e @vars.yml")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    inventory = args.inventory.resolve()
    log_dir = (args.log_dir or root / "build" / "bench-converge").resolve()
    log_dir.mkdir(parents=True, exist_ok=True)

    document = load_inventory(inventory, root)
    nodes, head = spark_hosts(document), head_host(document)
    base = [tool("ansible-playbook", root), "-i", str(inventory), str(root / args.playbook), *args.extra]
    plan = [("warm-up", base, True, nodes), (f"all {len(nodes)} nodes", base, True, nodes),
            (f"head only ({head})", [*base, "--limit", f"{head},localhost"], True, [head]),
            (f"all {len(nodes)} nodes, no pipelining or reuse", [*base, *NO_REUSE_VARS], False, nodes)]
    print(f"converge benchmark: {args.playbook} on {inventory} ({len(nodes)} nodes, head {head}); logs in {log_dir}",
          flush=True)
    runs: list[Run] = []
    for index, (label, command, reuse, expected) in enumerate(plan):
        print(f"== {label} ...", flush=True)
        run = timed_run(label, command, run_env(os.environ, root, reuse), root, log_dir / log_name(index, label))
        runs.append(checked(run, expected))
        print(f"   {describe(runs[-1])}", flush=True)
    result = figures(runs[1].seconds, runs[2].seconds, runs[3].seconds)
    print(f"all nodes / head only: {result['scaling_ratio']:.3f} (target <= 1.3)")
    print(f"no pipelining or reuse / all nodes: {result['reuse_ratio']:.3f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
