"""The router's hash lock: the shipped file pins the collection's vllm-router release and every package it needs,
each with its hashes; tools/router_lock.py merges the platforms' resolutions and refuses a split version."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from testlib import COLLECTION, ROOT, load_source

pins = load_source("module_utils", "spark_pins")
LINE = re.compile(r"^([a-z0-9][a-z0-9.-]*)==([A-Za-z0-9.+]+)((?: --hash=sha256:[0-9a-f]{64})+)$")


def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("router_lock", ROOT / "tools" / "router_lock.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shipped_lock_pins_the_release_and_hashes_every_package() -> None:
    version = pins.pin("spark_router_version")
    lock = COLLECTION / "roles" / "router" / "files" / f"vllm-router-{version}.txt"
    lines = [line for line in lock.read_text().splitlines() if line and not line.startswith("#")]
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), [line for line, m in zip(lines, parsed) if not m]
    names = {m.group(1): m.group(2) for m in parsed if m}
    assert names["vllm-router"] == version
    assert {"fastapi", "uvicorn", "aiohttp", "orjson", "setproctitle", "requests"} <= set(names)
    # The compiled router ships one wheel per architecture: both are hashed.
    assert len(next(m for m in parsed if m and m.group(1) == "vllm-router").group(3).split()) == 2


def test_the_tool_merges_platforms_and_refuses_a_split_version(monkeypatch: pytest.MonkeyPatch) -> None:
    module = tool()
    answers = {("x86_64", "3.11"): {"vllm-router": ("0.1.17", "a" * 64), "orjson": ("3.13.0", "b" * 64)}}

    def resolve(version: str, arch: str, python: str) -> dict[str, tuple[str, str]]:
        found = dict(answers.get((arch, python), {"vllm-router": ("0.1.17", "c" * 64), "orjson": ("3.13.0", "b" * 64)}))
        return found

    monkeypatch.setattr(module, "resolve", resolve)
    text = module.lock("0.1.17")
    assert f"orjson==3.13.0 --hash=sha256:{'b' * 64}\n" in text
    assert f"vllm-router==0.1.17 --hash=sha256:{'a' * 64} --hash=sha256:{'c' * 64}\n" in text
    answers[("aarch64", "3.12")] = {"vllm-router": ("0.1.17", "a" * 64), "orjson": ("3.12.0", "d" * 64)}
    with pytest.raises(SystemExit, match=r"different versions across platforms: \{'orjson': \['3.12.0', '3.13.0'\]\}"):
        module.lock("0.1.17")
