"""The bench client's own HTTP/1.1 layer: chunked framing split anywhere, sized and read-until-close bodies,
keep-alive reuse, a stale pooled connection, TCP_NODELAY and the response id."""
from __future__ import annotations

import asyncio
import json
import random
import socket
from typing import Any, Awaitable, Callable

import pytest
from sparkfleet_bench.client import (
    BenchClient, RequestResult, _Response, _SseSink, _Stream)


def _event(delta: dict[str, str], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({"id": "chatcmpl-7", "choices": [choice]}).encode() + b"\n\n"


EVENTS = [_event({"role": "assistant", "content": "Hi"}), _event({"content": " there"}),
          _event({"content": "!"}, "length"),
          b'data: {"id": "chatcmpl-7", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}}\n\n',
          b"data: [DONE]\n\n"]


def _chunked(parts: list[bytes]) -> bytes:
    body = b"".join(b"%x;ext=1\r\n" % len(p) + p + b"\r\n" for p in parts)
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            + body + b"0\r\nX-Trailer: 1\r\n\r\n")


async def _parse(wire: bytes, cuts: list[int]) -> tuple[RequestResult, bool]:
    res = RequestResult()
    resp = _Response(_SseSink(_Stream(res, keep_content=True)))
    start = 0
    for i, cut in enumerate(sorted(cuts) + [len(wire)]):
        resp.feed(wire[start:cut], float(i))
        start = cut
    await asyncio.sleep(0)  # the reader thread resolves `done` through the loop
    return res, resp.done.done() and resp.done.exception() is None


@pytest.mark.parametrize("seed", range(6))
def test_chunked_sse_split_anywhere_gives_the_same_result(seed: int) -> None:
    wire = _chunked([EVENTS[0] + EVENTS[1][:30], EVENTS[1][30:], *EVENTS[2:]])
    rng = random.Random(seed)
    cuts = rng.sample(range(1, len(wire)), 40) if seed else list(range(1, len(wire)))  # seed 0: byte by byte
    res, complete = asyncio.run(_parse(wire, cuts))
    whole, _ = asyncio.run(_parse(wire, []))
    assert complete
    assert (res.completion_tokens, res.prompt_tokens, res.finish_reason, res.request_id) == (3, 4, "length", "chatcmpl-7")
    assert len(res.token_times) == 3 and whole.token_times == [0.0, 0.0, 0.0]
    assert res.token_times == sorted(res.token_times)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _with_server(handler: Handler, body: Callable[[str], Awaitable[None]]) -> None:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await body(f"http://127.0.0.1:{port}/v1")
    finally:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    return head + await reader.readexactly(length)


def test_sized_and_until_close_bodies_and_keep_alive_reuse() -> None:
    connections: list[int] = []
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while True:
            try:
                request = await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            seen.append(request)
            if b" /close " in request:  # no length, no chunking: the body ends with the connection
                writer.write(b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\nbusy, try later")
                await writer.drain()
                break
            writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{"count":3}')
            await writer.drain()
        writer.close()

    async def body(url: str) -> None:
        async with BenchClient(url, api_key="sk-test") as client:
            assert await client.post_json("/tokenize", {"prompt": "a b c"}) == (200, {"count": 3})
            assert await client.get_text("/metrics") == (200, '{"count":3}')
            assert await client.get_text("/close") == (503, "busy, try later")
            assert await client.get_text("/again") == (200, '{"count":3}')

    asyncio.run(_with_server(handler, body))
    assert len(connections) == 2  # two requests on one keep-alive connection, then a new one after close
    assert seen[0].startswith(b"POST /tokenize HTTP/1.1\r\n") and b"Authorization: Bearer sk-test\r\n" in seen[0]
    assert seen[0].endswith(b'{"prompt": "a b c"}')


def test_a_stale_pooled_connection_is_retried_once_on_a_new_one() -> None:
    """The server closes an idle keep-alive connection just as the client reuses it."""
    connections: list[asyncio.StreamWriter] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await _read_request(reader)
        sock = writer.get_extra_info("socket")
        if len(connections) == 1:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.write(_chunked(EVENTS) if len(connections) > 1 else b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        if len(connections) == 1:
            await reader.read(65536)  # keep the first connection until the client sends again, then drop it
        writer.close()

    async def body(url: str) -> None:
        async with BenchClient(url) as client:
            assert await client.get_text("/health") == (200, "ok")
            conn = client._idle[-1]
            conn.closed = False  # the close has not reached the client yet: it reuses the socket
            assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            res = await client.stream("/v1/chat/completions", {"stream": True})
            assert res.ok, res.error
            assert res.completion_tokens == 3 and res.request_id == "chatcmpl-7"

    asyncio.run(_with_server(handler, body))
    assert len(connections) == 2


def test_a_cut_stream_is_a_transport_failure_and_a_refused_connection_too() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        wire = _chunked(EVENTS)
        writer.write(wire[: len(wire) // 2])
        await writer.drain()
        writer.transport.abort()

    async def body(url: str) -> None:
        async with BenchClient(url) as client:
            res = await client.stream("/v1/chat/completions", {"stream": True})
        assert res.error_class == "transport" and "closed before the response was complete" in res.error
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]  # bound, never listening: connections are refused
            async with BenchClient(f"http://127.0.0.1:{port}") as client:
                refused = await client.stream("/v1/chat/completions", {"stream": True})
        assert refused.error_class == "transport"

    asyncio.run(_with_server(handler, body))


@pytest.mark.parametrize("ext", [b"", b";ext=1"])
def test_one_chunk_per_read_fast_path_agrees_with_the_general_parser(ext: bytes, monkeypatch: Any) -> None:
    """A read holding exactly one chunk (the usual case of a stream) skips the general loop; the result,
    stamps included, is what the byte-by-byte parse gives. With a chunk extension the general loop runs."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunks = [b"%x%s\r\n" % (len(p), ext) + p + b"\r\n" for p in EVENTS] + [b"0\r\n\r\n"]
    cuts, pos = [], len(head)
    for chunk in chunks:
        cuts.append(pos)
        pos += len(chunk)
    wire = head + b"".join(chunks)
    taken: list[bool] = []
    original = _Response._one_chunk

    def spy(self: _Response, data: bytes, stamp: float) -> bool:
        taken.append(original(self, data, stamp))
        return taken[-1]

    monkeypatch.setattr(_Response, "_one_chunk", spy)
    per_chunk, complete = asyncio.run(_parse(wire, cuts))
    assert sum(taken) == (0 if ext else len(EVENTS))
    bytewise, _ = asyncio.run(_parse(wire, list(range(1, len(wire)))))
    assert complete and per_chunk.completion_tokens == 3 and per_chunk.request_id == "chatcmpl-7"
    assert per_chunk.token_times == [1.0, 2.0, 3.0]  # read i is stamped i; read 0 is the head
    assert len(bytewise.token_times) == 3 and per_chunk.finish_reason == bytewise.finish_reason == "length"


def test_https_stream_and_a_body_of_many_tls_records(tmp_path: Any) -> None:
    """TLS: the handshake, a stream, and a 200 KiB body that arrives as many TLS records."""
    import shutil
    import ssl
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    big = b"x" * (200 * 1024)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                request = await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            writer.write(_chunked(EVENTS) if b" /v1/chat" in request
                         else b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(big) + big)
            await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=server_ctx)
        port = server.sockets[0].getsockname()[1]
        try:
            async with BenchClient(f"https://127.0.0.1:{port}/v1") as client:
                client._ssl = ssl.create_default_context(cafile=str(cert))
                res = await client.stream("/v1/chat/completions", {"stream": True})
                assert res.ok, res.error
                assert (res.completion_tokens, res.request_id) == (3, "chatcmpl-7") and len(res.token_times) == 3
                assert await client.get_text("/big") == (200, big.decode())
                assert len(client._open) == 1  # both on one keep-alive TLS connection
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
