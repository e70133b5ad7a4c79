"""Streaming OpenAI-compatible client for benchmarks: raw HTTP/1.1, timings on perf_counter.

Why it looks like this (bench method reference section 5, measurements in docs/bench.md):
- One reader thread per client with a selector loop of its own does every socket read and write; the
  asyncio loop only connects, hands requests over and awaits their completion (one wake-up per request,
  not per token). asyncio's own read path cost an event-loop pass and a transport's callbacks per socket
  read, which at many streams (every token its own read) was most of the client's CPU.
- Every read is stamped (time.perf_counter, the same CLOCK_MONOTONIC the stand-in records with) as soon
  as recv_into returns, before any copy or parsing; no task wake-up, no reader queue, no per-chunk future.
- Keep-alive pool, one connection per concurrent stream (a connection per request churns sockets),
  TCP_NODELAY on both directions of our side, HTTP/1.1 chunked transfer decoding of our own.
- No read-buffer ceiling: every recv reads up to 256 KiB and partial lines are joined here, so a
  large SSE event neither fails nor throttles the stream (aiohttp's 64 KiB default does both).
- recv_into one 256 KiB buffer shared by the client's connections (reads are handled one at a time, each
  copied out before the next), instead of recv(256 KiB), which allocates a fresh quarter-megabyte for
  every read; that allocation was ~9 us of a token's ~30 us.
- Standard library only: importing aiohttp alone cost ~0.25 CPU-seconds per run.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import selectors
import socket
import ssl
import stat
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional
from urllib.parse import urlsplit

ERROR_CLASSES = ("http", "transport", "timeout", "stream_error", "incomplete")
MAX_HEAD_BYTES = 64 * 1024
READ_BYTES = 256 * 1024  # per recv, what asyncio's plain protocols read
_REASONING_KEYS = ("reasoning", "reasoning_content")
# Fast path for the bulk of a stream: a plain token event is classified by these byte patterns instead of
# json.loads (half of the client's per-token CPU). Anything that may carry more than a token - usage, a
# finish reason, an error, tool calls, token ids - and the stream's first token event still go through the
# full parser. An escaped quote inside generated text never matches `"key"\s*:`.
_ANSWER = re.compile(rb'"(?:content|text)"\s*:\s*"(?!")')
_REASONING = re.compile(rb'"(?:reasoning|reasoning_content)"\s*:\s*"(?!")')
_NEEDS_PARSE = re.compile(rb'"(?:usage|finish_reason)"\s*:\s*[^\sn]|"error"|"tool_calls"|"token_ids"')

Sink = Callable[[bytes, float], None]
API_KEY_ENV = "OPENAI_API_KEY"


def read_api_key(key_file: Optional[str], environ: Mapping[str, str]) -> Optional[str]:
    """The bearer token: from key_file when given (it must hold one), else $OPENAI_API_KEY, else None.

    Never from a command line, where every user on the host sees it. Errors name the file, never the key.
    """
    if key_file:
        try:
            mode = stat.S_IMODE(os.stat(key_file).st_mode)
            key = Path(key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"api_key_file: cannot read {key_file}: {exc.strerror or exc}") from exc
        if mode & 0o077:
            raise ValueError(f"api_key_file: {key_file} has mode {oct(mode)}: others can read it; chmod 0600")
        if not key:
            raise ValueError(f"api_key_file: {key_file} is empty")
        return key
    return environ.get(API_KEY_ENV, "").strip() or None


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
    request_id: str = ""  # the server's response id (matches its own logs and traces)
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


class StreamError(Exception):
    """An `error` event inside an otherwise successful (HTTP 200) stream."""


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
        if not res.request_id and isinstance(event.get("id"), str):
            res.request_id = event["id"]
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


class _SseSink:
    """Body bytes of a 200 streaming answer -> SSE lines -> _Stream, every line stamped with its read."""

    __slots__ = ("state", "rest")

    def __init__(self, state: _Stream) -> None:
        self.state = state
        self.rest = b""

    def __call__(self, data: bytes, stamp: float) -> None:
        if not self.rest and data.startswith(b"data:") and data.find(b"\n") == len(data) - 2 \
                and data.endswith(b"\n\n"):  # the usual chunk: one whole event, its only line
            self.state.feed(data[5:].strip(), stamp)
            return
        self.rest = _feed_lines(self.rest + data if self.rest else data, self.state, stamp)

    def finish(self, stamp: float) -> None:
        if self.rest.startswith(b"data:"):
            self.state.feed(self.rest[5:].strip(), stamp)
        self.rest = b""


class _Response:
    """Incremental HTTP/1.1 response parser: status line and headers, then a chunked, sized or
    read-until-close body handed to a sink. `done` resolves when the body is complete."""

    def __init__(self, sse: Optional[_SseSink]) -> None:
        self.sse = sse
        self._loop = asyncio.get_running_loop()
        self.done: "asyncio.Future[None]" = self._loop.create_future()
        self.finished = False  # on the reader thread: done is (being) resolved
        self.status = 0
        self.keep_alive = False
        self.received = False
        self.body = bytearray()
        self._head = b""
        self._sink: Optional[Sink] = None
        self._mode = ""  # chunked | length | close
        self._left = 0  # length mode: body bytes still due; chunked: payload bytes of the current chunk
        self._skip = 0  # chunked: CRLF bytes after a chunk's payload still to skip
        self._last = False  # chunked: the zero-size chunk was seen, trailers follow
        self._rest = b""

    # -- input from the protocol
    def feed(self, data: bytes, stamp: float) -> None:
        self.received = True
        if self.finished:
            return
        try:
            if self._sink is None:
                data = self._parse_head(data)
                if self._sink is None:
                    return
            if self._mode == "chunked":
                self._chunked(data, stamp)
            elif self._mode == "length":
                self._sized(data, stamp)
            else:
                self._sink(data, stamp)
        except Exception as exc:  # noqa: BLE001 - any parse or sink error ends this response with it
            self.keep_alive = False
            self._settle(exc)

    def eof(self, exc: Optional[BaseException]) -> None:
        if self.finished:
            return
        if self._sink is not None and self._mode == "close":
            self._complete(time.perf_counter())
            return
        self.keep_alive = False
        reason = f": {exc}" if exc else ""
        self._settle(ConnectionResetError(f"connection closed before the response was complete{reason}"))

    def _settle(self, exc: Optional[BaseException]) -> None:
        """Resolve `done` on the event loop's thread (this runs on the reader's)."""
        self.finished = True
        try:
            self._loop.call_soon_threadsafe(_resolve, self.done, exc)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    # -- head
    def _parse_head(self, data: bytes) -> bytes:
        buf = self._head + data
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise ValueError(f"response head larger than {MAX_HEAD_BYTES} bytes")
            self._head = buf
            return b""
        lines = buf[:end].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        self.status = int(rest.split(" ", 1)[0])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        self.keep_alive = version == "HTTP/1.1" and "close" not in headers.get("connection", "")
        if "chunked" in headers.get("transfer-encoding", ""):
            self._mode = "chunked"
        elif "content-length" in headers:
            self._mode, self._left = "length", int(headers["content-length"])
        elif self.status in (204, 304):
            self._mode, self._left = "length", 0
        else:
            self._mode, self.keep_alive = "close", False
        self._sink = self.sse if (self.status == 200 and self.sse is not None) else self._collect
        body = buf[end + 4:]
        if self._mode == "length" and self._left == 0:
            self._complete(time.perf_counter())
        return body

    def _collect(self, data: bytes, stamp: float) -> None:
        self.body += data

    # -- bodies
    def _sized(self, data: bytes, stamp: float) -> None:
        if not data:
            return
        take = data[:self._left]
        self._left -= len(take)
        self._sink(take, stamp)  # type: ignore[misc]  # set by _parse_head
        if self._left == 0:
            self._complete(stamp)

    def _chunked(self, data: bytes, stamp: float) -> None:
        if not (self._rest or self._left or self._skip or self._last) and self._one_chunk(data, stamp):
            return
        buf = self._rest + data if self._rest else data
        pos, n = 0, len(buf)
        sink = self._sink
        while pos < n:
            if self._left:
                end = min(n, pos + self._left)
                sink(buf[pos:end], stamp)  # type: ignore[misc]  # set by _parse_head
                self._left -= end - pos
                pos = end
                if not self._left:
                    self._skip = 2
            elif self._skip:
                step = min(self._skip, n - pos)
                self._skip -= step
                pos += step
            else:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line, pos = buf[pos:eol], eol + 2
                if self._last:
                    if not line:  # the empty line after the trailers: body complete
                        self._complete(stamp)
                        return
                    continue
                size = int(line.split(b";", 1)[0], 16)
                if size:
                    self._left = size
                else:
                    self._last = True
        self._rest = buf[pos:]

    def _one_chunk(self, data: bytes, stamp: float) -> bool:
        """The usual read of a stream, one whole chunk (`size CRLF payload CRLF`, one SSE event), passed
        on without the general loop; False (nothing consumed) for anything else."""
        eol = data.find(b"\r\n")
        if eol <= 0 or not data.endswith(b"\r\n"):
            return False
        try:
            size = int(data[:eol], 16)
        except ValueError:
            return False
        if not size or len(data) != eol + size + 4:
            return False
        self._sink(data[eol + 2:eol + 2 + size], stamp)  # type: ignore[misc]  # set by _parse_head
        return True

    def _complete(self, stamp: float) -> None:
        if self.sse is not None and self._sink is self.sse:
            self.sse.finish(stamp)
        if not self.finished:
            self._settle(None)


def _resolve(done: "asyncio.Future[None]", exc: Optional[BaseException]) -> None:
    if done.done():  # cancelled: a timeout or a signal
        return
    if exc is None:
        done.set_result(None)
    else:
        done.set_exception(exc)


class _Conn:
    """One keep-alive connection: a non-blocking socket that only the reader thread reads, writes and closes
    (after the connect); the response being read gets every read with its timestamp."""

    __slots__ = ("sock", "reader", "response", "closed", "_out", "_writing", "_tls")

    def __init__(self, sock: socket.socket, reader: "_Reader") -> None:
        self.sock = sock
        self.reader = reader
        self.response: Optional[_Response] = None
        self.closed = False
        self._out: Optional[memoryview] = None
        self._writing = False
        self._tls = isinstance(sock, ssl.SSLSocket)

    # -- on the reader thread
    def start(self) -> None:
        try:
            self.reader.selector.register(self.sock, selectors.EVENT_READ, self)
        except (OSError, ValueError) as exc:  # closed (forgotten) before the reader got to it
            self.lost(exc)

    def send(self, request: bytes, res: Optional[RequestResult]) -> None:
        if res is not None:
            res.t_send = time.perf_counter()
        self._out = memoryview(request)
        self.flush()

    def flush(self) -> None:
        out = self._out
        try:
            while out:
                out = out[self.sock.send(out):]
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
            self._out = out
            self._watch_writes(True)
            return
        except OSError as exc:
            self.lost(exc)
            return
        self._out = None
        self._watch_writes(False)

    def _watch_writes(self, on: bool) -> None:
        if on != self._writing and not self.closed:
            self._writing = on
            self.reader.selector.modify(self.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if on else 0), self)

    def read(self, buffer: memoryview) -> None:
        while True:
            try:
                nbytes = self.sock.recv_into(buffer)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
                return
            except OSError as exc:
                self.lost(exc)
                return
            stamp = time.perf_counter()  # first: the copy of a large read must not delay the stamp
            if not nbytes:
                self.lost(None)
                return
            response = self.response
            if response is None:  # bytes nobody asked for: the connection is unusable
                self.lost(None)
                return
            # The buffer is shared and reused by the next read, so the bytes are copied out now.
            response.feed(buffer[:nbytes].tobytes(), stamp)
            if not (self._tls and self.sock.pending()):  # TLS reads one record at a time
                return

    def lost(self, exc: Optional[BaseException]) -> None:
        self.shut()
        if self.response is not None:
            self.response.eof(exc)

    def shut(self) -> None:
        self.closed = True
        if self.sock.fileno() >= 0:
            try:
                self.reader.selector.unregister(self.sock)
            except (KeyError, ValueError):  # never registered
                pass
            self.sock.close()


class _Reader:
    """The thread that reads, writes and closes every connection of one client, in a selector loop of its
    own (why: the module docstring). The event loop hands it work with `call`, in order."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._wake_in, self._wake_out = socket.socketpair()
        self._wake_in.setblocking(False)
        self._wake_out.setblocking(False)
        self.selector.register(self._wake_in, selectors.EVENT_READ, None)
        self._calls: deque[tuple[Optional[Callable[..., None]], tuple[Any, ...]]] = deque()
        self._buffer = memoryview(bytearray(READ_BYTES))
        self._thread = threading.Thread(target=self._run, name="sparkfleet-bench-reader", daemon=True)
        self._thread.start()

    def call(self, fn: Optional[Callable[..., None]], *args: Any) -> None:
        """Run fn(*args) on the reader thread; None ends it."""
        self._calls.append((fn, args))
        try:
            self._wake_out.send(b"\0")
        except BlockingIOError:  # the reader has wake-ups enough pending
            pass

    def stop(self) -> None:
        self.call(None)
        self._thread.join(10)
        self._wake_out.close()

    def _run(self) -> None:
        select, buffer = self.selector.select, self._buffer
        while True:
            for key, mask in select():
                conn = key.data
                if conn is None:
                    if not self._run_calls():
                        return
                    continue
                try:
                    if mask & selectors.EVENT_WRITE:
                        conn.flush()
                    if mask & selectors.EVENT_READ:
                        conn.read(buffer)
                except Exception as exc:  # noqa: BLE001 - a failure ends that connection, never the reader
                    conn.lost(exc)

    def _run_calls(self) -> bool:
        try:
            while self._wake_in.recv(4096):
                pass
        except BlockingIOError:
            pass
        while self._calls:
            fn, args = self._calls.popleft()
            if fn is None:
                for key in list(self.selector.get_map().values()):
                    if key.data is not None:
                        key.data.shut()
                self.selector.close()
                self._wake_in.close()
                return False
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - as in _run
                owner = getattr(fn, "__self__", None)
                if isinstance(owner, _Conn):
                    owner.lost(exc)
        return True


class BenchClient:
    """HTTP/1.1 keep-alive pool to one OpenAI-compatible server for a whole benchmark run."""

    def __init__(self, base_url: str, timeout_s: float = 1800.0, api_key: Optional[str] = None,
                 max_connections: int = 0) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"bench URL must be http(s)://host[:port][/path], got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl: Optional[ssl.SSLContext] = ssl.create_default_context() if parts.scheme == "https" else None
        prefix = parts.path.rstrip("/")
        self._prefix = prefix[:-3] if prefix.endswith("/v1") else prefix
        self.base_url = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}{self._prefix}"
        self.timeout_s = timeout_s
        self._head_lines = (f"Host: {parts.netloc.rsplit('@', 1)[-1]}\r\nUser-Agent: sparkfleet-bench\r\n"
                            "Accept: */*\r\nContent-Type: application/json\r\n")
        if api_key:
            self._head_lines += f"Authorization: Bearer {api_key}\r\n"
        self._slots = asyncio.Semaphore(max_connections) if max_connections > 0 else None
        self._idle: list[_Conn] = []
        self._open: set[_Conn] = set()
        self._reader: Optional[_Reader] = None
        self._addresses: list[tuple[Any, ...]] = []

    async def __aenter__(self) -> "BenchClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        for conn in list(self._open):
            self._forget(conn)
        self._idle.clear()
        if self._reader is not None:
            self._reader.stop()
            self._reader = None

    # -- public requests
    async def get_text(self, path: str, timeout_s: float = 10.0) -> tuple[int, str]:
        """GET a small document; (status, body). Transport errors propagate to the caller."""
        resp = await asyncio.wait_for(self._exchange("GET", path, None, None), timeout_s)
        return resp.status, resp.body.decode("utf-8", "replace")

    async def post_json(self, path: str, body: dict[str, Any], timeout_s: float = 60.0) -> tuple[int, Any]:
        """POST a JSON body and read a JSON answer (non-streaming helpers: /tokenize, probes)."""
        resp = await asyncio.wait_for(self._exchange("POST", path, json.dumps(body).encode(), None), timeout_s)
        text = resp.body.decode("utf-8", "replace")
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text

    async def stream(self, path: str, body: dict[str, Any], keep_content: bool = False,
                     timeout_s: Optional[float] = None) -> RequestResult:
        """POST a streaming request and time it; every failure is classified, never raised."""
        res = RequestResult()
        state = _Stream(res, keep_content)
        limit = timeout_s or self.timeout_s
        try:
            resp = await asyncio.wait_for(self._exchange("POST", path, json.dumps(body).encode(), state), limit)
            res.status = resp.status
            if resp.status != 200:
                _fail(res, "http", f"HTTP {resp.status}: {resp.body[:300].decode('utf-8', 'replace')}")
        except asyncio.TimeoutError:
            _fail(res, "timeout", f"no complete answer within {limit:g} s")
        except StreamError as exc:
            _fail(res, "stream_error", str(exc))
        except (OSError, ValueError) as exc:  # ConnectionError is an OSError; ValueError: bad framing/JSON
            _fail(res, "transport", f"{type(exc).__name__}: {exc}")
        res.t_end = time.perf_counter()
        res.content = "".join(state.parts)
        if res.ok and not (state.done and res.usage_seen):
            _fail(res, "incomplete", "stream ended without usage and [DONE]")
        return res

    # -- one exchange on a pooled connection
    async def _exchange(self, method: str, path: str, payload: Optional[bytes],
                        state: Optional[_Stream]) -> _Response:
        if self._slots is None:
            return await self._exchange_on_pool(method, path, payload, state)
        async with self._slots:
            return await self._exchange_on_pool(method, path, payload, state)

    async def _exchange_on_pool(self, method: str, path: str, payload: Optional[bytes],
                                state: Optional[_Stream]) -> _Response:
        request = self._request_bytes(method, path, payload)
        conn, reused = await self._acquire()
        resp = self._send(conn, request, state)
        try:
            try:
                await resp.done
            except ConnectionResetError:
                if not (reused and not resp.received):
                    raise
                # The server closed an idle keep-alive connection as we reused it: nothing was processed,
                # so the request goes once more on a fresh connection.
                self._forget(conn)
                conn = await self._connect()
                resp = self._send(conn, request, state)
                await resp.done
        except BaseException:
            self._forget(conn)
            raise
        self._release(conn, resp)
        return resp

    def _request_bytes(self, method: str, path: str, payload: Optional[bytes]) -> bytes:
        body = payload or b""
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._head_lines}Content-Length: {len(body)}\r\n\r\n"
        return head.encode("latin-1") + body

    def _send(self, conn: _Conn, request: bytes, state: Optional[_Stream]) -> _Response:
        resp = _Response(_SseSink(state) if state is not None else None)
        conn.response = resp
        conn.reader.call(conn.send, request, state.res if state is not None else None)  # stamps t_send
        return resp

    async def _acquire(self) -> tuple[_Conn, bool]:
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn, True
            self._open.discard(conn)
        return await self._connect(), False

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        if not self._addresses:
            try:  # an IP address needs no resolver thread
                self._addresses = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM,
                                                     flags=socket.AI_NUMERICHOST)
            except socket.gaierror:
                self._addresses = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        error: Optional[OSError] = None
        for family, kind, proto, _, address in self._addresses:
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                if family in (socket.AF_INET, socket.AF_INET6):
                    # Nagle would hold a small request back behind an unacknowledged one.
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.sock_connect(sock, address)
                if self._ssl is not None:
                    sock = await self._handshake(loop, sock)
            except OSError as exc:
                sock.close()
                error = exc
                continue
            except BaseException:
                sock.close()
                raise
            if self._reader is None:
                self._reader = _Reader()
            conn = _Conn(sock, self._reader)
            self._reader.call(conn.start)
            self._open.add(conn)
            return conn
        raise error or OSError(f"no address for {self.host}:{self.port}")

    async def _handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> ssl.SSLSocket:
        tls = self._ssl.wrap_socket(sock, server_hostname=self.host,  # type: ignore[union-attr]
                                    do_handshake_on_connect=False)
        while True:
            try:
                tls.do_handshake()
                return tls
            except ssl.SSLWantReadError:
                await _ready(loop, tls, write=False)
            except ssl.SSLWantWriteError:
                await _ready(loop, tls, write=True)

    def _release(self, conn: _Conn, resp: _Response) -> None:
        conn.response = None
        if resp.keep_alive and not conn.closed:
            self._idle.append(conn)
        else:
            self._forget(conn)

    def _forget(self, conn: _Conn) -> None:
        conn.response = None
        conn.closed = True
        conn.reader.call(conn.shut)
        self._open.discard(conn)


async def _ready(loop: asyncio.AbstractEventLoop, sock: socket.socket, write: bool) -> None:
    """Wait until sock is readable (or writable)."""
    ready = loop.create_future()
    fd = sock.fileno()
    (loop.add_writer if write else loop.add_reader)(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fd)


def _fail(res: RequestResult, cls: str, message: str) -> None:
    if res.error_class is None:
        res.error_class = cls
        res.error = message
