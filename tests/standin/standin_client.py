"""Process and HTTP helpers for the stand-in vLLM server tests (loopback only)."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
STANDIN_DIR = ROOT / "lab" / "standin"
LAUNCHER = STANDIN_DIR / "standin_vllm.py"
MODEL = "deepseek-v4.1-flash"
# Run the servers under another interpreter, e.g. Debian's python3 with python3-aiohttp 3.8.
SERVER_PYTHON = os.environ.get("STANDIN_TEST_PYTHON") or sys.executable


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    """One stand-in process and where it listens."""

    proc: subprocess.Popen
    port: int
    log_path: Path
    env: Dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> Optional[int]:
        """Signal the process and reap it; SIGKILL as the last resort."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def launch(args: List[str], env: Optional[Dict[str, str]], log_dir: Path, name: str,
           port: Optional[int] = None) -> Server:
    """Start `standin_vllm.py serve MODEL --port P args...` with STANDIN_* variables from env."""
    port = port or free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_")}
    full_env.update({"STANDIN_STARTUP_S": "0.2"})
    full_env.update(env or {})
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [SERVER_PYTHON, str(LAUNCHER), "serve", "/models", "--served-model-name", MODEL, "--host",
             "127.0.0.1", "--port", str(port), *args],
            stdout=log, stderr=subprocess.STDOUT, env=full_env)
    return Server(proc, port, log_path, dict(env or {}))


def is_serving(server: Server) -> bool:
    try:
        status, _ = get(server, "/health", timeout=1.0)
    except OSError:
        return False
    return status == 200


def wait_ready(server: Server, timeout: float = 15.0) -> None:
    """Poll /health until 200; fail with the log if the process dies or never answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError(f"stand-in exited {server.proc.returncode}:\n{server.log()}")
        if is_serving(server):
            return
        time.sleep(0.05)
    raise AssertionError(f"stand-in not ready after {timeout} s:\n{server.log()}")


def get(server: Server, path: str, timeout: float = 10.0) -> Tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def post(server: Server, path: str, body: Any, timeout: float = 30.0) -> Tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None
    finally:
        conn.close()


@dataclass
class StreamResult:
    """Parsed SSE events with the client-side arrival time of each (perf_counter seconds)."""

    status: int
    t_send: float
    events: List[Dict[str, Any]] = field(default_factory=list)
    times: List[float] = field(default_factory=list)
    done: bool = False
    error: Optional[str] = None

    def token_times(self) -> List[float]:
        """Arrival times of token-bearing chunks (non-empty content or reasoning)."""
        return [t for e, t in zip(self.events, self.times) if token_text(e)]

    def text(self, field_name: str = "content") -> str:
        out = []
        for event in self.events:
            for choice in event.get("choices", []):
                out.append(choice.get("delta", {}).get(field_name) or choice.get("text") or "")
        return "".join(out)

    @property
    def usage(self) -> Dict[str, Any]:
        return next(e["usage"] for e in self.events if e.get("usage"))

    @property
    def ttft(self) -> float:
        return self.token_times()[0] - self.t_send


def token_text(event: Dict[str, Any]) -> str:
    text = ""
    for choice in event.get("choices", []):
        delta = choice.get("delta", {})
        text += (delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
                 or choice.get("text") or "")
    return text


def stream(server: Server, path: str, body: Dict[str, Any], timeout: float = 60.0) -> StreamResult:
    """POST a streaming request and read SSE lines as they arrive."""
    body = dict(body, stream=True)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    payload = json.dumps(body)
    try:
        conn.connect()
        t_send = time.perf_counter()
        conn.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        result = StreamResult(resp.status, t_send)
        if resp.status != 200:
            result.error = resp.read().decode()
            return result
        read_events(resp, result)
        return result
    finally:
        conn.close()


def read_events(resp: http.client.HTTPResponse, result: StreamResult) -> None:
    try:
        while True:
            line = resp.readline()
            now = time.perf_counter()
            if not line:
                return
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[len(b"data: "):]
            if data == b"[DONE]":
                result.done = True
                return
            result.events.append(json.loads(data))
            result.times.append(now)
    except (http.client.IncompleteRead, ConnectionError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"


def metrics(server: Server) -> Dict[str, float]:
    """Parse /metrics into {'name{labels}': value} plus label-free sums per metric name."""
    status, body = get(server, "/metrics")
    assert status == 200
    out: Dict[str, float] = {}
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        out[key] = float(value)
        name = key.split("{", 1)[0]
        out[name] = out.get(name, 0.0) + float(value)
    return out


def chat(content: str, **extra: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": content}]}
    body.update(extra)
    return body
