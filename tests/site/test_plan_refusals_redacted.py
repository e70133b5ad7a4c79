"""A serving setting the site plan cannot read, under a site secret: the serve role's plan step refuses it before
any rank is touched and shows the refusal (host and setting named) with every value the site marks secret
redacted; the doctor keeps it for doctor.json redacted the same way. no_log would not do: ansible-core 2.19
prints a failed assert's message even under no_log."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from testlib import ROOT

def play(role: str, show: str) -> list[dict[str, object]]:
    return [{"name": "Plan step", "hosts": "spark", "gather_facts": False, "tasks": [
        {"name": "Plan | Run the role's plan step",
         "ansible.builtin.include_role": {"name": f"sparkfleet.spark.{role}", "tasks_from": "plan.yml"}},
        {"name": "Plan | Show what the role keeps", "ansible.builtin.debug": {"var": show}}]}]


def run_plan(tmp_path: Path, role: str, readable: bool = False,
             show: str = "doctor_serve_error") -> tuple[subprocess.CompletedProcess[str], str]:
    secret = "sk-serve-" + os.urandom(12).hex()
    hosts = {f"n{r}": {"ansible_host": f"10.1.0.{r + 1}", "spark_rank": r} for r in range(3)}
    profile = {} if readable else {"spark_serve_profile": secret}
    group = {"spark_topology": "triangle", **profile, "spark_site_secrets": [secret],
             "spark_serve_overrides": {"args": {"--api-key": secret}}, "ansible_connection": "local",
             "spark_device_policy": "available"}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts, "vars": group}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play(role, show), sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default")
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                             str(tmp_path / "play.yml"), "-v"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=180)
    return result, secret


def test_serve_refuses_and_shows_the_setting_redacted(tmp_path: Path) -> None:
    result, secret = run_plan(tmp_path, "serve")
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "host n0: spark_serve_profile '<redacted>' is not a serving profile" in output, output[-3000:]
    assert secret not in output


def test_the_doctor_keeps_the_error_redacted_for_its_report(tmp_path: Path) -> None:
    result, secret = run_plan(tmp_path, "doctor")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    kept = [line for line in output.splitlines() if "doctor_serve_error" in line]
    assert len(kept) >= 3 and all("spark_serve_profile ''<redacted>''" in line for line in kept), kept
    assert secret not in output


def test_a_readable_plan_passes_the_serve_plan_step_with_the_heads_endpoint(tmp_path: Path) -> None:
    result, secret = run_plan(tmp_path, "serve", readable=True, show="serve_api_url")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert output.count('serve_api_url: http://10.1.0.1:8000') == 3, output[-3000:]
    assert secret not in output
