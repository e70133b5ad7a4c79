"""The CLI's interface: list syntax, --extra-body, the API key from a file or the environment (never argv),
help text on every option, --version the collection's."""
from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest
import yaml
from sparkfleet_bench import __version__
from sparkfleet_bench import cli
from sparkfleet_bench.suites import (
    BenchConfig, Runner, merge_body, validate)
from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_version import (
    sparkfleet_version, version_from_galaxy, version_from_manifest)

from testlib import COLLECTION, bench_command


def test_every_option_has_help_text() -> None:
    parser = cli.build_parser()
    options = [a for a in parser._actions if a.option_strings]
    assert len(options) > 20
    missing = [a.option_strings[0] for a in options if not a.help or a.help == argparse.SUPPRESS]
    assert not missing, f"options without help: {missing}"


@pytest.mark.parametrize("words", [["1,2,4"], ["1", "2", "4"], ["1 2 4"], ["[1, 2, 4]"], ["1,", "2", ",4"]])
def test_lists_with_commas_or_spaces(words: list[str]) -> None:
    cfg, _ = cli.parse(["--url", "http://h:8000", "--concurrency", *words, "--suites", "quality", "decode"], {})
    assert cfg.concurrency == [1, 2, 4] and cfg.suites == ["quality", "decode"]


def test_bad_list_and_empty_suites(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parse(["--url", "http://h", "--concurrency", "1,two"], {})
    assert exc.value.code == 2 and "expected a list of int values" in capsys.readouterr().err
    cfg, _ = cli.parse(["--url", "http://h", "--suites", ""], {})
    assert "suites: at least one suite is required" in validate(cfg)
    cfg, _ = cli.parse(["--url", "http://h", "--timeout", "0"], {})
    assert any(p.startswith("timeout:") for p in validate(cfg))


def test_extra_body_must_be_an_object_and_is_merged(capsys: pytest.CaptureFixture[str]) -> None:
    for bad, why in (("[1, 2]", "got a JSON list"), ("not json", "not JSON"), ("3", "got a JSON int")):
        with pytest.raises(SystemExit):
            cli.parse(["--url", "http://h", "--extra-body", bad], {})
        assert why in capsys.readouterr().err
    cfg, _ = cli.parse(["--url", "http://h", "--extra-body",
                        '{"top_k": 1, "chat_template_kwargs": {"enable_thinking": false}}'], {})
    assert cfg.extra_body == {"top_k": 1, "chat_template_kwargs": {"enable_thinking": False}}
    runner = Runner(BenchConfig(url="http://h", output_dir="/nonexistent", model="m", extra_body=cfg.extra_body))
    chat = runner.chat_body("hi", 8, reasoning=False, forced=True)
    # nested objects merge key by key: the bench's own reasoning-off knob stays beside the extra one
    assert chat["top_k"] == 1 and chat["chat_template_kwargs"] == {"thinking": False, "enable_thinking": False}
    assert chat["stream"] is True and chat["min_tokens"] == 8
    assert runner.completion_body("x", "salt")["top_k"] == 1
    assert merge_body({"a": {"b": 1}, "c": 2}, {"a": {"d": 3}, "c": [4]}) == {"a": {"b": 1, "d": 3}, "c": [4]}
    owned = validate(BenchConfig(url="http://h", output_dir="d", extra_body={"stream": False, "model": "x"}))
    assert owned == ["extra_body: ['model', 'stream'] are set by the bench itself (model, prompt and streaming "
                     "are what it measures)"]


def test_api_key_from_file_or_environment_never_argv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, _ = cli.parse(["--url", "http://h"], {"OPENAI_API_KEY": "sk-env"})
    assert cfg.api_key == "sk-env"
    cfg, _ = cli.parse(["--url", "http://h"], {})
    assert cfg.api_key is None
    key = tmp_path / "key"
    key.write_text("sk-file\n")
    key.chmod(0o600)
    cfg, _ = cli.parse(["--url", "http://h", "--api-key-file", str(key)], {"OPENAI_API_KEY": "sk-env"})
    assert cfg.api_key == "sk-file"
    (tmp_path / "empty").write_text("\n")
    (tmp_path / "empty").chmod(0o600)
    for path, why in ((tmp_path / "empty", "is empty"), (tmp_path / "absent", "cannot read")):
        with pytest.raises(SystemExit):
            cli.parse(["--url", "http://h", "--api-key-file", str(path)], {})
        assert why in capsys.readouterr().err
    for argv in (["--api-key", "sk-secret-on-argv"], ["--api-key=sk-secret-on-argv"], ["--api-key"]):
        with pytest.raises(SystemExit) as exc:
            cli.parse(["--url", "http://h", *argv], {})
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "--api-key is refused" in err and "sk-secret" not in err
    with pytest.raises(SystemExit):  # no abbreviation of --api-key-file slips a key in either
        cli.parse(["--url", "http://h", "--api-key-f", "sk-secret"], {})


def test_version_is_the_collections() -> None:
    declared = yaml.safe_load((COLLECTION / "galaxy.yml").read_text())["version"]
    assert __version__ == declared  # the package's own copy, for a pip install, a module payload and a node
    assert sparkfleet_version() == declared
    assert version_from_galaxy("namespace: x\nversion: \"2.3.4\"  # c\n") == "2.3.4"
    assert version_from_manifest('{"collection_info": {"version": "9.9.9"}}') == "9.9.9"
    assert version_from_manifest("{}") is None
    assert sparkfleet_version(Path("/")) == "unknown"
    proc = subprocess.run(bench_command() + ["--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"sparkfleet-bench {declared}"


def test_progress_line_names_point_depth_n_mean_and_width() -> None:
    from sparkfleet_bench.suites import progress_line

    line = progress_line("decode prose-c4", 4096, [190.0, 200.0, 210.0])
    # half-width = t(2) * sd / sqrt(3) = 4.303 * 10 / 1.732
    assert line.startswith("decode prose-c4 depth 4096: n=3 tps mean 200.00 ±24.84 (12.4%)")
    assert progress_line("decode prose-c1", 0, [50.0]) == "decode prose-c1 depth 0: n=1 tps mean 50.00 ± –"
    assert "n=0" in progress_line("decode prose-c1", 0, [])


def test_depths_option_plan_and_validation() -> None:
    from sparkfleet_bench.suites import plan

    cfg, _ = cli.parse(["--url", "http://h", "--depths", "0", "4096", "--concurrency", "1,2", "--cases", "prose",
                        "--suites", "decode"], {})
    assert cfg.depths == [0, 4096] and not validate(cfg)
    assert plan(cfg) == ["decode/prose-c1", "decode/prose-c2", "decode/prose-c1@d4096", "decode/prose-c2@d4096"]
    for bad in ([], [-1], [0, 0]):
        assert any(p.startswith("depths:") for p in validate(BenchConfig(url="http://h", output_dir="d", depths=bad)))
