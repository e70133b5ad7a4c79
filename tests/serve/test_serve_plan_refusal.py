"""The serve role's plan step refuses a serving setting it cannot read before any rank is touched, and shows the
refusal (host and setting named) with every value the site marks secret redacted rather than hiding the step."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from testlib import ROOT

PLAY = [{"name": "Serve plan", "hosts": "spark", "gather_facts": False, "tasks": [
    {"name": "Serve plan | Run the serve role's plan step",
     "ansible.builtin.include_role": {"name": "sparkfleet.spark.serve", "tasks_from": "plan.yml"}}]}]


def test_a_refused_serving_setting_is_shown_redacted(tmp_path: Path) -> None:
    secret = "sk-serve-" + os.urandom(12).hex()
    hosts = {f"n{r}": {"ansible_host": f"10.1.0.{r + 1}", "spark_rank": r} for r in range(3)}
    group = {"spark_topology": "triangle", "spark_serve_profile": secret, "spark_site_secrets": [secret],
             "spark_serve_overrides": {"args": {"--api-key": secret}}, "ansible_connection": "local",
             "spark_device_policy": "available"}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"spark": {"hosts": hosts, "vars": group}}))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(PLAY, sort_keys=False))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="default")
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                             str(tmp_path / "play.yml"), "-v"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=180)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "host n0: spark_serve_profile '<redacted>' is not a serving profile" in output, output[-3000:]
    assert secret not in output
