"""Fixtures for the stand-in vLLM server tests: servers on free loopback ports, all reaped afterwards."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional

import pytest

# pytest.ini puts tests/standin (standin_client) and lab/standin (the stand-in package) on the path.
from standin_client import Server, launch, wait_ready

Factory = Callable[..., Server]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Factory]:
    """spawn(args, env, name, ready=True, port=None) starts a stand-in; every one is stopped at teardown."""
    started: List[Server] = []

    def _spawn(args: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None, name: str = "standin",
               ready: bool = True, port: Optional[int] = None) -> Server:
        server = launch(list(args or []), env, tmp_path, f"{name}-{len(started)}", port)
        started.append(server)
        if ready:
            wait_ready(server)
        return server

    yield _spawn
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def fast_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One shared server with a quick clock for shape and counter tests."""
    env = {"STANDIN_ITL_S": "0.001", "STANDIN_TTFT_BASE_S": "0.001", "STANDIN_PREFILL_TPS": "1000000"}
    server = launch(["--max-model-len", "4096"], env, tmp_path_factory.mktemp("fast"), "fast")
    try:
        wait_ready(server)
        yield server
    finally:
        server.stop()
