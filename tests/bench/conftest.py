"""Bench test plumbing: the shared module loader (testlib), and the stand-in server on loopback."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable, Iterator

import pytest

from testlib import ROOT, load_source, run_module  # noqa: F401  (run_module is a fixture)

STANDIN_DIR = ROOT / "lab" / "standin"
MODEL = "sparkfleet/standin-flash"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def standin_command(port: int, *extra: str) -> list[str]:
    """The stand-in's documented command line (script file when present, else the package)."""
    script = STANDIN_DIR / "standin_vllm.py"
    entry = [str(script)] if script.is_file() else ["-m", "standin_vllm"]
    return [sys.executable, *entry, "serve", "model", "--host", "127.0.0.1", "--port", str(port),
            "--served-model-name", MODEL, *extra]


class Standin:
    """A running stand-in server; `url` is its base URL."""

    def __init__(self, env: dict[str, str], extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {**os.environ, "STANDIN_STARTUP_S": "0", "PYTHONPATH": str(STANDIN_DIR), **env}
        self.proc = subprocess.Popen(standin_command(self.port, *extra), env=full_env, cwd=str(STANDIN_DIR),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"stand-in exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("stand-in did not become healthy within 20 s")

    def faults(self, **counts: Any) -> None:
        import json

        req = urllib.request.Request(self.url + "/standin/faults", data=json.dumps(counts).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert resp.status == 200

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def standin() -> Iterator[Callable[..., Standin]]:
    """Factory: standin(env={...}, extra=(...)) starts a stand-in; every one is stopped after the test."""
    started: list[Standin] = []

    def _start(env: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> Standin:
        server = Standin(env or {}, extra)
        started.append(server)
        return server

    yield _start
    for server in started:
        server.stop()
