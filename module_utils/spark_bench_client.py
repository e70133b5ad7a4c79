"""Streaming OpenAI-compatible client for benchmarks: one aiohttp session, timings on perf_counter.

Why it looks like this (see the bench method reference, section 5): one session with keep-alive (a
session per request churns connections), a large read buffer (aiohttp's 64 KiB default collapses
throughput on long prompts and can fail on large SSE events), our own line splitter over `iter_any()`,
and a timestamp taken once per socket read, before any JSON parsing, so client work never inflates TTFT.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Optional

import re

import aiohttp

READ_BUFSIZE = 16 * 1024 * 1024
ERROR_CLASSES = ("http", "transport", "timeout", "stream_error", "incomplete")
_REASONING_KEYS = ("reasoning", "reasoning_content")
# Fast path for the bulk of a stream: a plain token event is classified by these byte patterns instead of
# json.loads (half of the client's per-token CPU). Anything that may carry more than a token - usage, a
# finish reason, an error, tool calls, token ids - and the stream's first token event still go through the
# full parser. An escaped quote inside generated text never matches `"key"\s*:`.
_ANSWER = re.compile(rb'"(?:content|text)"\s*:\s*"(?!")')
_REASONING = re.compile(rb'"(?:reasoning|reasoning_content)"\s*:\s*"(?!")')
_NEEDS_PARSE = re.compile(rb'"(?:usage|finish_reason)"\s*:\s*[^\sn]|"error"|"tool_calls"|"token_ids"')


@dataclass
class RequestResult:
    """Timings (perf_counter seconds) and counts of one streamed request."""

    t_send: float = 0.0
    t_first_chunk: Optional[float] = None  # first event carrying `choices` (vLLM's "TTFT", kept as ttfr)
    t_first_token: Optional[float] = None  # first event carrying a token (reasoning or content)
    t_first_answer: Optional[float] = None  # first event carrying answer text (content / completion text)
    t_last_token: Optional[float] = None
    t_end: float = 0.0
    token_times: list[float] = field(default_factory=list)
    status: int = 0
    error_class: Optional[str] = None
    error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    usage_seen: bool = False
    finish_reason: Optional[str] = None
    reasoning_field: Optional[str] = None
    content: str = ""

    @property
    def ok(self) -> bool:
        return self.error_class is None

    @property
    def ttft(self) -> Optional[float]:
        return None if self.t_first_token is None else self.t_first_token - self.t_send

    @property
    def ttfat(self) -> Optional[float]:
        return None if self.t_first_answer is None else self.t_first_answer - self.t_send

    @property
    def decode_tps(self) -> Optional[float]:
        """(output tokens - 1) / (last token - first token); None for single-token or failed requests."""
        if self.t_first_token is None or self.t_last_token is None or self.completion_tokens < 2:
            return None
        span = self.t_last_token - self.t_first_token
        return (self.completion_tokens - 1) / span if span > 0 else None


class _Stream:
    """Applies parsed SSE events to a RequestResult."""

    __slots__ = ("res", "keep_content", "parts", "done")

    def __init__(self, res: RequestResult, keep_content: bool) -> None:
        self.res = res
        self.keep_content = keep_content
        self.parts: list[str] = []
        self.done = False

    def feed(self, payload: bytes, stamp: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        res = self.res
        if res.t_first_token is not None and not self.keep_content and not _NEEDS_PARSE.search(payload):
            if _ANSWER.search(payload):
                if res.t_first_answer is None:
                    res.t_first_answer = stamp
            elif not _REASONING.search(payload):
                return
            res.t_last_token = stamp
            res.token_times.append(stamp)
            return
        event = json.loads(payload)
        if "error" in event and not event.get("choices"):
            err = event["error"]
            raise StreamError(err.get("message", str(err)) if isinstance(err, dict) else str(err))
        usage = event.get("usage")
        if usage:
            self._usage(usage)
        choices = event.get("choices")
        if choices:
            self._choice(choices[0], stamp)

    def _choice(self, choice: dict[str, Any], stamp: float) -> None:
        res = self.res
        if res.t_first_chunk is None:
            res.t_first_chunk = stamp
        delta = choice.get("delta")
        answer = delta.get("content") if delta is not None else choice.get("text")
        reasoning = None
        if delta is not None:
            for key in _REASONING_KEYS:
                reasoning = delta.get(key)
                if reasoning:
                    res.reasoning_field = key
                    break
        if answer or reasoning or (delta is not None and delta.get("tool_calls")) or choice.get("token_ids"):
            if res.t_first_token is None:
                res.t_first_token = stamp
            res.t_last_token = stamp
            res.token_times.append(stamp)
        if answer:
            if res.t_first_answer is None:
                res.t_first_answer = stamp
            if self.keep_content:
                self.parts.append(answer)
        if choice.get("finish_reason"):
            res.finish_reason = choice["finish_reason"]

    def _usage(self, usage: dict[str, Any]) -> None:
        res = self.res
        res.usage_seen = True
        res.prompt_tokens = int(usage.get("prompt_tokens") or 0)
        res.completion_tokens = int(usage.get("completion_tokens") or 0)
        res.cached_tokens = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        res.reasoning_tokens = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)


class StreamError(Exception):
    """An `error` event inside an otherwise successful (HTTP 200) stream."""


class BenchClient:
    """One aiohttp session for a whole benchmark run."""

    def __init__(self, base_url: str, timeout_s: float = 1800.0, api_key: Optional[str] = None,
                 max_connections: int = 0, coalesce_interval_s: float = 0.001) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[:-3]
        self.timeout_s = timeout_s
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._max_connections = max_connections
        self._session: Optional[aiohttp.ClientSession] = None
        self._drainer = Drainer(coalesce_interval_s)

    async def __aenter__(self) -> "BenchClient":
        connector = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=300)
        self._session = aiohttp.ClientSession(
            connector=connector, read_bufsize=READ_BUFSIZE, trust_env=False, auto_decompress=False,
            headers=self._headers, skip_auto_headers=("Accept-Encoding",),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("BenchClient used outside 'async with'")
        return self._session

    async def get_text(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        """GET a small document; (status, body). Transport errors propagate to the caller."""
        async with self.session.get(self.base_url + path, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            return resp.status, await resp.text()

    async def post_json(self, path: str, body: dict[str, Any], timeout_s: float = 60.0) -> tuple[int, Any]:
        """POST a JSON body and read a JSON answer (non-streaming helpers: /tokenize, probes)."""
        async with self.session.post(self.base_url + path, data=json.dumps(body),
                                     timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text

    async def stream(self, path: str, body: dict[str, Any], keep_content: bool = False,
                     timeout_s: Optional[float] = None, coalesce: bool = False) -> RequestResult:
        """POST a streaming request and time it; every failure is classified, never raised.

        coalesce=True hands the decode phase to the shared Drainer (for many concurrent streams)."""
        res = RequestResult()
        state = _Stream(res, keep_content)
        payload = json.dumps(body).encode()
        try:
            await asyncio.wait_for(self._stream(path, payload, state, coalesce), timeout_s or self.timeout_s)
        except asyncio.TimeoutError:
            _fail(res, "timeout", f"no complete answer within {timeout_s or self.timeout_s:g} s")
        except StreamError as exc:
            _fail(res, "stream_error", str(exc))
        except (aiohttp.ClientError, ConnectionError, ValueError) as exc:
            _fail(res, "transport", f"{type(exc).__name__}: {exc}")
        res.t_end = time.perf_counter()
        res.content = "".join(state.parts)
        if res.ok and not (state.done and res.usage_seen):
            _fail(res, "incomplete", "stream ended without usage and [DONE]")
        return res

    async def _stream(self, path: str, payload: bytes, state: _Stream, coalesce: bool) -> None:
        res = state.res
        res.t_send = time.perf_counter()
        async with self.session.post(self.base_url + path, data=payload) as resp:
            res.status = resp.status
            if resp.status != 200:
                body = (await resp.text())[:300]
                _fail(res, "http", f"HTTP {resp.status}: {body}")
                return
            reader = resp.content
            buf = b""
            while True:
                chunk = await reader.readany()
                if not chunk:
                    break
                buf = _feed_lines(buf + chunk, state, time.perf_counter())
                if coalesce and res.t_first_token is not None:
                    # TTFT was stamped on its own read; the decode phase joins the shared drainer.
                    buf = await self._drainer.follow(reader, buf, state)
                    break
            if buf.startswith(b"data:"):
                state.feed(buf[5:].strip(), time.perf_counter())


def _feed_lines(buf: bytes, state: _Stream, stamp: float) -> bytes:
    """Feed every complete SSE line of buf to state; return the incomplete rest."""
    if b"\n" not in buf:
        return buf
    lines = buf.split(b"\n")
    rest = lines.pop()
    for line in lines:
        if line.startswith(b"data:"):
            state.feed(line[5:].strip(), stamp)
        elif line.startswith(b"event: error"):
            raise StreamError("server sent an SSE error event")
    return rest


class _Follow:
    """One stream handed to the drainer: its reader, unparsed rest, parser and completion future."""

    __slots__ = ("reader", "buf", "state", "done")

    def __init__(self, reader: aiohttp.StreamReader, buf: bytes, state: _Stream, done: "asyncio.Future[bytes]") -> None:
        self.reader, self.buf, self.state, self.done = reader, buf, state, done


class Drainer:
    """Reads the decode phase of many streams from ONE task that wakes every `interval` seconds.

    Awaiting every chunk costs a task wake-up per token (64 streams at 20 ms = 3,200 per second; 256 at
    5 ms = 51,200, more than a Python client can take). Draining every stream's buffer once per interval
    costs a fixed 1/interval wake-ups; each token is stamped at the tick that found it, at most
    `interval` late, which moves a decode rate over a 256-token window by ~0.02 %. TTFT is never
    coalesced: the first token is awaited and stamped on its own read.
    """

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.active: set[_Follow] = set()
        self._task: Optional["asyncio.Task[None]"] = None

    async def follow(self, reader: aiohttp.StreamReader, buf: bytes, state: _Stream) -> bytes:
        entry = _Follow(reader, buf, state, asyncio.get_running_loop().create_future())
        self.active.add(entry)
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._run())
        try:
            return await entry.done
        finally:
            self.active.discard(entry)

    async def _run(self) -> None:
        while self.active:
            await asyncio.sleep(self.interval)
            stamp = time.perf_counter()
            for entry in list(self.active):
                if not entry.done.done():
                    self._drain(entry, stamp)

    @staticmethod
    def _drain(entry: _Follow, stamp: float) -> None:
        try:
            data = entry.reader.read_nowait(-1)
            if data:
                entry.buf = _feed_lines(entry.buf + data, entry.state, stamp)
            if entry.reader.at_eof():
                entry.done.set_result(entry.buf)
        except Exception as exc:  # noqa: BLE001 - handed to the stream's own classification
            entry.done.set_exception(exc)


def _fail(res: RequestResult, cls: str, message: str) -> None:
    if res.error_class is None:
        res.error_class = cls
        res.error = message
