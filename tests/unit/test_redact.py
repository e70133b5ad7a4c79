"""Redaction of secrets from what the roles print or save (docker inspect documents, container environments,
engine arguments, logs): module_utils/spark_redact.py and its filter, and the doctor's container probe."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from testlib import load_source

redact = load_source("module_utils", "spark_redact")
filters = load_source("filter", "sparkfleet_redact").FilterModule().filters()
TOKEN = "hf_plantedTOKENfor0sparkfleet0test0z9"
KEY = "sk-benchKEY0planted"
MOK = "mok-pass-1234"
SECRETS = [TOKEN, KEY, MOK]
MARK = redact.MARK

INSPECT = [{
    "Id": "abc",
    "Args": ["serve", "/models", "--api-key", KEY, f"--hf-token={TOKEN}", "--port", "8000"],
    "Config": {
        "Cmd": ["serve", "/models", "--api-key", KEY],
        "Env": ["HF_TOKEN=" + TOKEN, "VLLM_API_KEY=anything", "NCCL_PROTO=Simple", "NOTE=uses " + MOK,
                "PATH=/usr/bin"],
        "Labels": {"org.sparkfleet.note": "built with " + TOKEN},
    },
}]


def test_inspect_document_keeps_its_shape_and_loses_every_secret() -> None:
    out = redact.redact_inspect(INSPECT, SECRETS)
    text = json.dumps(out)
    assert all(secret not in text for secret in SECRETS + ["anything"])
    env = out[0]["Config"]["Env"]
    assert env == [f"HF_TOKEN={MARK}", f"VLLM_API_KEY={MARK}", "NCCL_PROTO=Simple", f"NOTE={MARK}", "PATH=/usr/bin"]
    assert out[0]["Args"] == ["serve", "/models", "--api-key", MARK, f"--hf-token={MARK}", "--port", "8000"]
    assert out[0]["Config"]["Cmd"] == ["serve", "/models", "--api-key", MARK]
    assert out[0]["Config"]["Labels"] == {"org.sparkfleet.note": f"built with {MARK}"}
    assert INSPECT[0]["Config"]["Env"][0] == "HF_TOKEN=" + TOKEN, "the input is not changed"


def test_text_inspect_output_and_log_lines() -> None:
    raw = json.dumps(INSPECT, indent=2)
    out = redact.redact_text(raw, SECRETS)
    assert all(secret not in out for secret in SECRETS + ["VLLM_API_KEY=anything"])
    assert "NCCL_PROTO=Simple" in out
    log = f"2026-12-02 loaded token {TOKEN}\nexport HF_TOKEN=other-value\npassword: {MOK}\nok\n"
    assert redact.redact_text(log, SECRETS) == (f"2026-12-02 loaded token {MARK}\nexport HF_TOKEN={MARK}\n"
                                                f"password: {MARK}\nok\n")


def test_env_mapping_secret_names_and_values() -> None:
    env = {"HF_TOKEN": TOKEN, "MY_PASSWORD": "x", "A": "b", "URL": f"https://u:{KEY}@h"}
    assert redact.redact_env(env, SECRETS) == {"HF_TOKEN": MARK, "MY_PASSWORD": MARK, "A": "b", "URL": MARK}


def test_secret_values_ignore_empty_short_and_non_strings() -> None:
    assert redact.secret_values(["", None, "ab", 5, TOKEN, KEY, TOKEN]) == [TOKEN, KEY]
    assert redact.redact_text("abc ab", ["ab"]) == "abc ab", "too short to redact without mangling text"


def test_longer_secret_first_when_one_contains_another() -> None:
    assert redact.redact_text("x" + TOKEN + "y", [TOKEN[:10], TOKEN]) == f"x{MARK}y"


def test_filter_dispatches_on_type_and_refuses_a_non_list() -> None:
    f = filters["spark_redact"]
    assert f("HF_TOKEN=" + TOKEN, SECRETS) == f"HF_TOKEN={MARK}"
    assert f({"Env": ["HF_TOKEN=" + TOKEN]}, SECRETS) == {"Env": [f"HF_TOKEN={MARK}"]}
    assert f(None, SECRETS) is None
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match="list of secret values"):
        f("x", TOKEN)


def test_doctor_module_redacts_the_container_it_returns(run_module: Any, tmp_path: Path) -> None:
    docker = tmp_path / "docker"
    docker.write_text("#!/bin/sh\ncat <<'EOF'\n" + json.dumps(INSPECT[0] | {
        "State": {"Status": "running", "Running": True, "ExitCode": 0, "OOMKilled": False},
        "Image": "sha256:1"}) + "\nEOF\n")
    docker.chmod(0o755)
    failed, result = run_module("spark_doctor", {"container": "c", "docker_bin": str(docker), "devices": [],
                                                 "units": [], "sys_root": str(tmp_path), "secrets": SECRETS})
    assert not failed, result
    text = json.dumps(result)
    assert all(secret not in text for secret in SECRETS), text
    assert result["container"]["env"]["HF_TOKEN"] == MARK and result["container"]["env"]["NCCL_PROTO"] == "Simple"


def test_settings_that_merely_mention_a_token_stay() -> None:
    env = ["VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD=1024", "HF_TOKEN_PATH=/run/x", "GITHUB_TOKEN=abc"]
    assert redact.redact_env(env, []) == env[:2] + [f"GITHUB_TOKEN={MARK}"]
    line = "--max-num-batched-tokens=4096 prompt_tokens: 12 max_tokens=256"
    assert redact.redact_text(line, []) == line
    assert redact.redact_argv(["--max-num-batched-tokens", "4096", "--api-key=x1", "--token", "t"], []) == [
        "--max-num-batched-tokens", "4096", f"--api-key={MARK}", "--token", MARK]


def test_doctor_spec_check_compares_a_redacted_spec_with_the_redacted_container() -> None:
    doctor = load_source("module_utils", "spark_doctor")
    spec = {"name": "c", "command": ["serve", "--api-key", "unlisted-key"], "env": {"HF_TOKEN": TOKEN, "A": "1"}}
    state = {"running": True, "cmd": ["serve", "--api-key", "unlisted-key"], "env": {"HF_TOKEN": TOKEN, "A": "1"}}
    obs = {"spec": redact.redact_inspect(spec, SECRETS), "probe": {"container": redact.redact_inspect(state, SECRETS)}}
    assert "unlisted-key" not in json.dumps(obs) and TOKEN not in json.dumps(obs)
    (check,) = doctor.check_container_spec("dgx1", obs, {})
    assert check.status == doctor.OK, check
    obs["probe"]["container"]["env"]["A"] = "2"
    (check,) = doctor.check_container_spec("dgx1", obs, {})
    assert check.status == doctor.FAIL and "A" in check.message


def test_known_secrets_are_the_secret_variables_and_the_site_list() -> None:
    variables = {"spark_model_hf_token": TOKEN, "spark_bench_api_key": "", "spark_memory_saver_mok_password": "pw-mok",
                 "spark_site_secrets": ["site-one"], "spark_model_name": "not-a-secret"}
    assert filters["spark_known_secrets"](variables) == [TOKEN, "pw-mok", "site-one"]
    assert filters["spark_known_secrets"]({}) == []
    with pytest.raises(Exception, match="spark_site_secrets must be a list of secret values, got str"):
        filters["spark_known_secrets"]({"spark_site_secrets": "one-string"})


# A serving profile's overrides as a site writes them: the flag and the secret name label the value.
PROFILE_OVERRIDES = {"args": {"--api-key": "unlisted-key", "--max-model-len": 262144, "--enforce-eager": None},
                     "env": {"VLLM_API_KEY": "another-unlisted", "NCCL_PROTO": "Simple"},
                     "settings": {"hf_token": "third-unlisted", "max_tokens": 256, "use_token": True}}


def test_a_scalar_under_a_secret_flag_or_name_is_hidden() -> None:
    out = redact.redact_inspect(PROFILE_OVERRIDES, [])
    assert out == {"args": {"--api-key": MARK, "--max-model-len": 262144, "--enforce-eager": None},
                   "env": {"VLLM_API_KEY": MARK, "NCCL_PROTO": "Simple"},
                   "settings": {"hf_token": MARK, "max_tokens": 256, "use_token": True}}


@pytest.mark.parametrize(("value", "secrets", "held"), [
    (PROFILE_OVERRIDES, [], True),
    ({"env": {"NCCL_PROTO": "Simple"}, "args": {"--port": 8000}}, [], False),
    ({"env": {"NOTE": "uses " + MOK}}, SECRETS, True),
    ({"env": {"NOTE": "uses " + MOK}}, [], False),
    ([{"args": {"--token": "t0k3n"}}], [], True),
    ("plain text", SECRETS, False),
    ("export HF_TOKEN=x", [], True),
    (None, SECRETS, False),
])
def test_holds_secret_is_whether_redaction_would_change_the_value(value: Any, secrets: list[str], held: bool) -> None:
    assert redact.holds_secret(value, secrets) is held
    assert filters["spark_holds_secret"](value, secrets) is held


def test_holds_secret_filter_refuses_a_non_list() -> None:
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match="spark_holds_secret: secrets must be a list"):
        filters["spark_holds_secret"]({}, TOKEN)


@pytest.mark.parametrize(("overrides", "secrets", "held"), [
    ({"n0": {}, "n1": {"spark_serve_overrides": {"args": {"--api-key": "k3y-value"}}}}, [], True),
    ({"n0": {"spark_serve_overrides": {"env": {"NOTE": "uses " + MOK}}}, "n1": {}}, SECRETS, True),
    ({"n0": {"spark_serve_overrides": {"env": {"NCCL_PROTO": "Simple"}}}, "n1": {"spark_serve_overrides": None}}, [], False),
])
def test_serve_overrides_secret_looks_at_every_host(overrides: dict[str, Any], secrets: list[str], held: bool) -> None:
    assert filters["spark_serve_overrides_secret"](overrides, ["n0", "n1"], secrets) is held


def test_serve_overrides_secret_names_what_is_wrong() -> None:
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError, match="hosts must be a list"):
        filters["spark_serve_overrides_secret"]({}, "n0", [])
    with pytest.raises(AnsibleFilterError, match="no host 'n9' in hostvars"):
        filters["spark_serve_overrides_secret"]({}, ["n9"], [])
