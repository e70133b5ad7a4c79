"""The playbook and the CLI: same options, exit status follows the verdict."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml

from conftest import MODEL, Standin
from testlib import COLLECTION, ROOT, bench_command


def test_playbook_fails_on_a_failed_benchmark(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_QUALITY_BROKEN": "1", "STANDIN_ITL_S": "0.002"})
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "playbooks/bench.yml",
                           "-e", f"spark_bench_url={server.url}", "-e", f"spark_bench_model={MODEL}",
                           "-e", f"spark_bench_output_dir={tmp_path}", "-e", '{"spark_bench_concurrency": [1, 2]}',
                           "-e", "spark_bench_progress_s=1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "benchmark verdict fail" in proc.stdout
    # The run went on in the background while each round printed what it logged, the abort included.
    printed = re.findall(r"bench: \d+ s: ([^\"'\n]+)", proc.stdout)
    assert "suite quality" in printed and any(line.startswith("aborted: quality gate") for line in printed), printed
    report = json.loads((tmp_path / "bench.json").read_text())
    assert report["verdict"] == "fail" and report["workload"]["concurrency"] == [1, 2]
    # the report names the collection's version (the playbook passes the lookup's, the package carries the same)
    declared = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["version"]
    assert report["identity"]["sparkfleet_version"] == declared


def test_playbook_prints_each_measured_round_while_it_runs(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    proc = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "playbooks/bench.yml",
                           "-e", f"spark_bench_url={server.url}", "-e", f"spark_bench_model={MODEL}",
                           "-e", f"spark_bench_output_dir={tmp_path}", "-e", "spark_bench_progress_s=1",
                           "-e", '{"spark_bench_suites": [decode], "spark_bench_concurrency": [1, 2], '
                                 '"spark_bench_cases": [prose], "spark_bench_max_samples": 3}'],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    logged = (tmp_path / "progress.log").read_text().splitlines()
    rounds = [line for line in logged if line.startswith("decode prose-c2 depth 0: n=")]
    assert [line.split(" n=")[1][0] for line in rounds] == ["1", "2", "3"], logged
    printed = re.findall(r"bench: \d+ s: ([^\"'\n]+)", proc.stdout)
    assert printed == logged, (printed, logged)


def test_cli_passes_and_checks(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    cli = bench_command() + ["--url", server.url]
    proc = subprocess.run(cli + ["--output-dir", str(tmp_path), "--suites", "decode", "--concurrency", "1,2",
                                 "--cases", "code-nothink", "--max-tokens", "32", "--min-samples", "2",
                                 "--max-samples", "2", "--poll-interval", "0.2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("verdict: pass")
    # a progress line per measured round on stderr: point, depth, n, running mean, interval width
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[bench] decode code-nothink-c2 depth 0:")]
    assert [line.split("n=")[1].split()[0] for line in progress] == ["1", "2"], proc.stderr
    assert " tps mean " in progress[-1] and "%)" in progress[-1]
    points = json.loads((tmp_path / "bench.json").read_text())["suites"]["decode"]["points"]
    assert [(p["case"], p["concurrency"], p["n"]) for p in points] == [("code-nothink", 1, 2), ("code-nothink", 2, 2)]
    # reasoning off: the first token is an answer token
    assert all(p["metrics"]["ttfat_s"]["mean"] == p["metrics"]["ttft_s"]["mean"] for p in points)
    bad = subprocess.run(cli + ["--suites", "decode,bogus", "--check"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "suites: unknown ['bogus']" in bad.stderr


def test_playbook_monitors_every_rank_of_the_inventory(standin: Callable[..., Standin], tmp_path: Path) -> None:
    server = standin({"STANDIN_ITL_S": "0.002"})
    common = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "playbooks/bench.yml", "-i", "inventories/tp3-triangle",
              "-e", f"spark_bench_url={server.url}", "-e", f"spark_bench_model={MODEL}",
              # every rank reached on this machine (the sampler reads its /proc), hardware-less like the lab
              "-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={sys.executable}",
              "-e", "spark_device_policy=available", "-e", "spark_bench_progress_s=1",
              "-e", '{"spark_bench_suites": [decode], "spark_bench_concurrency": [1], "spark_bench_cases": [prose],'
                    ' "spark_bench_max_samples": 3, "spark_bench_monitor_limits": {"interval_s": "0.2"}}']
    proc = subprocess.run(common + ["-e", f"spark_bench_output_dir={tmp_path / 'on'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]
    monitors = json.loads((tmp_path / "on" / "bench.json").read_text())["monitors"]
    assert list(monitors["nodes"]) == ["dgx1", "dgx2", "dgx3"] and monitors["limits"]["interval_s"] == 0.2
    # the floor is the serving profile's steady guard (3 GiB) plus the default margin (1 GiB)
    assert all(n["memory_floor_gib"] == 4.0 and n["samples"] >= 2 and n["min_available_gib"] > 0
               for n in monitors["nodes"].values())
    assert "monitors: dgx1 MemAvailable" in (tmp_path / "on" / "progress.log").read_text()
    off = subprocess.run(common + ["-e", f"spark_bench_output_dir={tmp_path / 'off'}", "-e", "spark_bench_monitor=false"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert off.returncode == 0, off.stdout[-3000:]
    assert json.loads((tmp_path / "off" / "bench.json").read_text())["monitors"] is None


def _planned(proc: subprocess.CompletedProcess[str]) -> str:
    found = re.search(r"check mode: ([^'\"]+)", proc.stdout)
    assert proc.returncode == 0 and found, proc.stdout[-3000:]
    return " ".join(found.group(1).split())


def test_playbook_knobs_default_to_the_bench_library_and_follow_the_inventory(tmp_path: Path) -> None:
    """Unset knobs take the module's defaults (BenchConfig's); an inventory's group_vars set them (play vars
    would override the inventory), and -e strings arrive typed through the module's argument spec."""
    playbook = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "playbooks/bench.yml", "--check",
                "-e", "spark_bench_url=http://127.0.0.1:9", "-e", f"spark_bench_output_dir={tmp_path / 'out'}",
                "-e", "spark_bench_monitor=false"]
    default = subprocess.run(playbook, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert _planned(default) == ("quality, decode/prose-c1, decode/prose-c2, decode/prose-c4, decode/prose-c8, "
                                 "decode/code-c1, decode/code-c2, decode/code-c4, decode/code-c8")
    inventory = tmp_path / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    (inventory / "group_vars" / "all" / "bench.yml").write_text(
        "spark_bench_suites: [decode]\nspark_bench_concurrency: [2, 16]\nspark_bench_cases: [json]\n")
    site = subprocess.run(playbook + ["-i", str(inventory)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert _planned(site) == "decode/json-c2, decode/json-c16"
    typed = subprocess.run(playbook + ["-i", str(inventory), "-e", "spark_bench_concurrency=4,8",
                                       "-e", "spark_bench_max_samples=5"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert _planned(typed) == "decode/json-c4, decode/json-c8"


def test_playbook_measures_the_router_or_the_named_group_of_several(tmp_path: Path) -> None:
    """An inventory of several serving groups: the router where it has one, the group named by spark_bench_group,
    and otherwise a refusal naming the groups (lab/inventories/sw4-two-pairs: two groups of two on a switch)."""
    serving = json.dumps({"spark_serve_profile": "tp3-r6-4k",
                          "spark_serve_overrides": {"shape": {"topology": "switched", "nodes": 2}}})
    playbook = [str(ROOT / ".venv" / "bin" / "ansible-playbook"), "playbooks/bench.yml", "--check",
                "-i", "lab/inventories/sw4-two-pairs", "-e", serving, "-e", "spark_bench_monitor=false",
                "-e", f"spark_bench_output_dir={tmp_path / 'out'}"]
    router = tmp_path / "router.yml"
    router.write_text("spark_router:\n  hosts:\n    dgx2: {}\n")

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(playbook + list(extra), cwd=ROOT, capture_output=True, text=True, timeout=120)

    refused = run()
    assert refused.returncode != 0
    assert ("the inventory has several serving groups (pair_a, pair_b) and no router: name the one to measure "
            "(-e spark_bench_group=GROUP)") in refused.stdout + refused.stderr
    assert "against http://10.0.1.73:8000" in run("-e", "spark_bench_group=pair_b").stdout
    assert "against http://10.0.1.72:8080" in run("-i", str(router)).stdout
    assert "against http://10.0.1.71:8000" in run("-i", str(router), "-e", "spark_bench_group=pair_a").stdout
    unknown = run("-e", "spark_bench_group=pair_c")
    assert "spark_bench_group pair_c is not a serving group of the inventory (pair_a, pair_b)" in unknown.stdout + unknown.stderr
