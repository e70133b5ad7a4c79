"""HTTP surface: vLLM's OpenAI-compatible endpoints plus the test-double admin API (/standin/*).

Only aiohttp APIs present in aiohttp 3.8 (Debian bookworm's python3-aiohttp) are used.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections import deque
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

from aiohttp import web

from . import VERSION
from .config import Behaviour, ServeConfig
from .engine import Engine, GenRequest
from .faults import Faults
from .metrics import render
from .text import (OutputPlan, OutputRequest, canned_answer, chat_prompt_pieces, completion_prompt_pieces,
                   last_user_text, plan_output, token_id)

DROP_AFTER_TOKENS = 3
TRACE_REQUESTS = 65536  # streamed requests kept in the /standin/trace ring


class ApiError(Exception):
    """An error reported to the client in vLLM's JSON shape."""

    def __init__(self, status: int, message: str, param: Optional[str] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param


ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}


def error_response(exc: ApiError) -> web.Response:
    body = {"error": {"message": exc.message, "type": ERROR_TYPES.get(exc.status, "Error"),
                      "param": exc.param, "code": exc.status}}
    return web.json_response(body, status=exc.status)


@dataclass
class Prepared:
    """A validated generation request."""

    chat: bool
    model: str
    pieces: List[str]
    salt: str
    plan: OutputPlan
    stream: bool
    include_usage: bool
    token_ids: bool


def opt_int(body: Dict[str, Any], name: str, minimum: int) -> Optional[int]:
    """An optional integer field that must be >= minimum."""
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ApiError(400, f"{name} must be an integer >= {minimum}, got {value!r}", name)
    return value


def opt_number(body: Dict[str, Any], name: str, low: float, high: float) -> None:
    """Validate an optional numeric sampling field (accepted, has no effect on the text)."""
    value = body.get(name)
    if value is None:
        return
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise ApiError(400, f"{name} must be a number in [{low}, {high}], got {value!r}", name)


def thinking_on(body: Dict[str, Any], chat: bool) -> bool:
    """Reasoning is on for chat unless chat_template_kwargs turns it off; never for /v1/completions."""
    if not chat:
        return False
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ApiError(400, "chat_template_kwargs must be an object", "chat_template_kwargs")
    return all(kwargs.get(key, True) is not False for key in ("thinking", "enable_thinking"))


class Api:
    """Request handlers bound to one engine."""

    def __init__(self, cfg: ServeConfig, beh: Behaviour, engine: Engine, extra_state: Dict[str, Any]) -> None:
        self.cfg = cfg
        self.beh = beh
        self.engine = engine
        self.faults = Faults()
        self.extra_state = extra_state
        self.requests = 0
        self.created = int(time.time())
        self.in_flight: Set["asyncio.Task[Any]"] = set()
        self.trace: "deque[Dict[str, Any]]" = deque(maxlen=TRACE_REQUESTS)

    def abort_all(self) -> int:
        """Cancel every in-flight generation (server shutdown); their clients see a cut connection."""
        tasks = [t for t in self.in_flight if not t.done()]
        for task in tasks:
            task.cancel()
        return len(tasks)

    # ---- request parsing -------------------------------------------------------------------------------
    async def read_body(self, request: web.Request) -> Dict[str, Any]:
        try:
            body = await request.json()
        except ValueError as exc:
            raise ApiError(400, f"invalid JSON body: {exc}") from exc
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        return body

    def check_model(self, body: Dict[str, Any]) -> str:
        model = body.get("model")
        if model is None:
            return self.cfg.served_names[0]
        if model not in self.cfg.served_names:
            raise ApiError(404, f"The model `{model}` does not exist.", "model")
        return str(model)

    def prompt_pieces(self, body: Dict[str, Any], chat: bool) -> Tuple[List[str], str]:
        """(prompt pieces, text used to recognise canned prompts)."""
        try:
            if chat:
                messages = body.get("messages")
                if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
                    raise ApiError(400, "messages must be a non-empty list of message objects", "messages")
                return chat_prompt_pieces(messages), last_user_text(messages)
            if "prompt" not in body:
                raise ApiError(400, "prompt is required", "prompt")
            prompt = body["prompt"]
            return completion_prompt_pieces(prompt), prompt if isinstance(prompt, str) else json.dumps(prompt)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from exc

    def budget(self, body: Dict[str, Any], prompt_tokens: int) -> Tuple[int, int]:
        """(max_tokens, min_tokens) after vLLM's context-length checks."""
        limit = self.cfg.max_model_len
        if prompt_tokens >= limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, your request "
                                f"has {prompt_tokens} input tokens. Please reduce the length of the input.")
        max_tokens = opt_int(body, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = opt_int(body, "max_tokens", 1)
        if max_tokens is None:
            max_tokens = limit - prompt_tokens
        if prompt_tokens + max_tokens > limit:
            raise ApiError(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                                f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the input, {max_tokens} "
                                f"in the completion). Please reduce the length of the input or completion.")
        min_tokens = opt_int(body, "min_tokens", 0) or 0
        if min_tokens > max_tokens:
            raise ApiError(400, f"min_tokens ({min_tokens}) must be less than or equal to max_tokens "
                                f"({max_tokens})", "min_tokens")
        return max_tokens, min_tokens

    def stream_flags(self, body: Dict[str, Any]) -> Tuple[bool, bool]:
        stream = bool(body.get("stream", False))
        options = body.get("stream_options")
        if options is not None and not stream:
            raise ApiError(400, "Stream options can only be defined when `stream=True`.", "stream_options")
        if options is not None and not isinstance(options, dict):
            raise ApiError(400, "stream_options must be an object", "stream_options")
        return stream, bool((options or {}).get("include_usage", False))

    def prepare(self, body: Dict[str, Any], chat: bool) -> Prepared:
        model = self.check_model(body)
        pieces, text = self.prompt_pieces(body, chat)
        max_tokens, min_tokens = self.budget(body, len(pieces))
        opt_number(body, "temperature", 0.0, 2.0)
        opt_number(body, "top_p", 1e-9, 1.0)
        seed = opt_int(body, "seed", -(2 ** 63)) or 0
        if body.get("n", 1) != 1:
            raise ApiError(400, "only n=1 is supported", "n")
        salt = body.get("cache_salt", "")
        if not isinstance(salt, str) or ("cache_salt" in body and not salt):
            raise ApiError(400, "cache_salt must be a non-empty string", "cache_salt")
        stream, include_usage = self.stream_flags(body)
        prompt_key = hashlib.sha256("\x00".join(pieces).encode()).hexdigest()
        plan = plan_output(OutputRequest(
            prompt_key=prompt_key, seed=seed, max_tokens=max_tokens, min_tokens=min_tokens,
            ignore_eos=bool(body.get("ignore_eos", False)), thinking=thinking_on(body, chat),
            reasoning_tokens=self.beh.reasoning_tokens, canned=canned_answer(text, self.beh.quality_broken)))
        return Prepared(chat, model, pieces, salt, plan, stream, include_usage, bool(body.get("return_token_ids")))

    # ---- response shapes ---------------------------------------------------------------------------------
    def usage(self, prep: Prepared, cached: int, generated: int, reasoning: int) -> Dict[str, Any]:
        return {"prompt_tokens": len(prep.pieces), "completion_tokens": generated,
                "total_tokens": len(prep.pieces) + generated,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}

    def chunk(self, prep: Prepared, rid: str, choice: Optional[Dict[str, Any]],
              usage: Optional[Dict[str, Any]] = None) -> bytes:
        body: Dict[str, Any] = {"id": rid, "object": "chat.completion.chunk" if prep.chat else "text_completion",
                "created": self.created, "model": prep.model, "choices": [choice] if choice else []}
        if usage is not None:
            body["usage"] = usage
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    def chunk_prefix(self, prep: Prepared, rid: str) -> bytes:
        """The bytes of chunk() up to the choice: encoded once per request, not once per token (at 256
        streams x 5 ms the per-token json.dumps of the whole event was a fifth of the server's time)."""
        head = json.dumps({"id": rid, "object": "chat.completion.chunk" if prep.chat else "text_completion",
                           "created": self.created, "model": prep.model})
        return b"data: " + head[:-1].encode() + b', "choices": ['

    def token_event(self, prep: Prepared, prefix: bytes, index: int, kind: str, text: str) -> bytes:
        """One token's SSE event; a plain middle token is formatted directly (the same bytes json.dumps of
        token_choice gives), the rest through token_choice."""
        last = index == prep.plan.total - 1
        if index and not last and not prep.token_ids:
            key = self.beh.reasoning_field if (prep.chat and kind == "reasoning") else "content"
            body = (f'{{"index": 0, "delta": {{"{key}": {json.dumps(text)}}}, ' if prep.chat
                    else f'{{"index": 0, "text": {json.dumps(text)}, ')
            return prefix + body.encode() + b'"logprobs": null, "finish_reason": null, "stop_reason": null}]}\n\n'
        choice = self.token_choice(prep, kind, text, prep.plan.finish_reason if last else None, index == 0)
        return prefix + json.dumps(choice).encode() + b"]}\n\n"

    def token_choice(self, prep: Prepared, kind: str, text: str, finish: Optional[str], first: bool) -> Dict:
        if prep.chat:
            delta: Dict[str, Any] = {"role": "assistant"} if first else {}
            delta[self.beh.reasoning_field if kind == "reasoning" else "content"] = text
            choice: Dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        choice["stop_reason"] = None
        if prep.token_ids:
            choice["token_ids"] = [token_id(text)]
        return choice

    # ---- generation ----------------------------------------------------------------------------------------
    async def generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        received = asyncio.get_running_loop().time()
        task = asyncio.current_task()
        if task is not None:
            self.in_flight.add(task)
            task.add_done_callback(self.in_flight.discard)
        self.requests += 1
        try:
            prep = self.prepare(await self.read_body(request), chat)
        except ApiError as exc:
            return error_response(exc)
        fault = self.faults.take()
        if fault.kind == "http_500":
            return error_response(ApiError(500, "injected fault: internal server error"))
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        greq = GenRequest(rid, prep.pieces, prep.salt, prep.plan, stall_s=fault.stall_s,
                          preempt=fault.kind == "preempt")
        drop = fault.kind == "drop_stream"
        if prep.stream:
            return await self.stream_response(request, prep, greq, drop, received)
        return await self.whole_response(request, prep, greq, drop)

    async def stream_response(self, request: web.Request, prep: Prepared, greq: GenRequest,
                              drop: bool, received: float) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        loop = asyncio.get_running_loop()
        trace: Dict[str, Any] = {"id": greq.request_id, "received": received, "first_due": None,
                                 "first_sent": None, "last_due": None, "last_sent": None, "tokens": 0,
                                 "writes": 0, "max_late_s": 0.0}
        if self.beh.trace_writes:
            trace["write_log"] = []  # [write start, tokens written so far] per write
        self.trace.append(trace)
        cached = reasoning = generated = 0
        prefix = self.chunk_prefix(prep, greq.request_id)
        async with aclosing(self.engine.generate(greq)) as tokens:
            async for stream, group, due in tokens:
                if group[0][0] == 0:
                    if not await self.start(request, resp):
                        return resp
                    cached = stream.cached_tokens
                    trace["first_due"] = due
                if drop:  # exactly DROP_AFTER_TOKENS tokens go out, however the server grouped them
                    group = group[:DROP_AFTER_TOKENS - generated]
                data = b"".join(self.token_event(prep, prefix, index, kind, text) for index, kind, text in group)
                sent = loop.time()  # stamped as the write begins: a local client can read it within microseconds
                if not await self.send(resp, data):
                    return resp
                if trace["first_sent"] is None:
                    trace["first_sent"] = sent
                trace.update(last_due=due, last_sent=sent, tokens=trace["tokens"] + len(group),
                             writes=trace["writes"] + 1, max_late_s=max(trace["max_late_s"], sent - due))
                if "write_log" in trace:
                    trace["write_log"].append([sent, trace["tokens"]])
                generated += len(group)
                reasoning += sum(kind == "reasoning" for _, kind, _ in group)
                if drop and generated >= DROP_AFTER_TOKENS:
                    return self.abort(request, resp)
        if not resp.prepared and not await self.start(request, resp):
            return resp
        if prep.include_usage:
            usage = self.usage(prep, cached, generated, reasoning)
            await self.send(resp, self.chunk(prep, greq.request_id, None, usage))
        await self.send(resp, b"data: [DONE]\n\n")
        return resp

    async def start(self, request: web.Request, resp: web.StreamResponse) -> bool:
        """Send the response headers; False when the client has gone away."""
        try:
            await resp.prepare(request)
        except (ConnectionResetError, RuntimeError):
            return False
        return True

    async def send(self, resp: web.StreamResponse, data: bytes) -> bool:
        """Write one SSE event; False when the client has gone away."""
        try:
            await resp.write(data)
        except (ConnectionResetError, RuntimeError):
            return False
        return True

    def abort(self, request: web.Request, resp: web.StreamResponse) -> web.StreamResponse:
        """Injected drop: cut the TCP connection mid-response, as a crashing server would."""
        transport = request.transport
        if transport is not None:
            transport.abort()
        return resp

    async def whole_response(self, request: web.Request, prep: Prepared, greq: GenRequest,
                             drop: bool) -> web.StreamResponse:
        parts: Dict[str, List[str]] = {"reasoning": [], "content": []}
        cached = 0
        async with aclosing(self.engine.generate(greq)) as tokens:
            async for stream, group, _due in tokens:
                cached = stream.cached_tokens
                for index, kind, text in group:
                    parts[kind].append(text)
                if drop and group[-1][0] + 1 >= DROP_AFTER_TOKENS:
                    return self.abort(request, web.StreamResponse())
        n_reason, n_content = len(parts["reasoning"]), len(parts["content"])
        usage = self.usage(prep, cached, n_reason + n_content, n_reason)
        content = "".join(parts["content"]) if n_content else None
        if prep.chat:
            message: Dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": [],
                       self.beh.reasoning_field: "".join(parts["reasoning"]) if n_reason else None}
            choice: Dict[str, Any] = {"index": 0, "message": message, "logprobs": None,
                                      "finish_reason": prep.plan.finish_reason, "stop_reason": None}
        else:
            choice = {"index": 0, "text": content or "", "logprobs": None,
                      "finish_reason": prep.plan.finish_reason, "stop_reason": None}
        return web.json_response({
            "id": greq.request_id, "object": "chat.completion" if prep.chat else "text_completion",
            "created": self.created, "model": prep.model, "choices": [choice], "usage": usage})

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self.generate(request, chat=False)

    # ---- other endpoints ------------------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": VERSION})

    async def models(self, request: web.Request) -> web.Response:
        data: List[Dict[str, Any]] = [
            {"id": name, "object": "model", "created": self.created, "owned_by": "vllm", "root": self.cfg.model,
             "parent": None, "max_model_len": self.cfg.max_model_len, "permission": []}
            for name in self.cfg.served_names]
        return web.json_response({"object": "list", "data": data})

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await self.read_body(request)
            self.check_model(body)
            pieces, _ = self.prompt_pieces(body, chat="messages" in body)
        except ApiError as exc:
            return error_response(exc)
        return web.json_response({"count": len(pieces), "max_model_len": self.cfg.max_model_len,
                                  "tokens": [token_id(p) for p in pieces], "token_strs": None})

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=render(self.engine), content_type="text/plain", charset="utf-8")

    async def set_faults(self, request: web.Request) -> web.Response:
        try:
            body = await self.read_body(request)
            self.faults.arm(body)
        except ApiError as exc:
            return error_response(exc)
        except ValueError as exc:
            return error_response(ApiError(400, str(exc)))
        return web.json_response({"pending": self.faults.pending, "stall_s": self.faults.stall_s})

    async def clear_faults(self, request: web.Request) -> web.Response:
        self.faults.clear()
        return web.json_response({"pending": self.faults.pending, "stall_s": self.faults.stall_s})

    async def get_trace(self, request: web.Request) -> web.Response:
        """Per streamed request, on the server's CLOCK_MONOTONIC (time.monotonic, the same clock as a local
        client's time.perf_counter on Linux): handler start, due time and write start of the first and last
        token, tokens, writes and the worst lateness of a write behind its newest token's due time."""
        return web.json_response({"clock": "monotonic", "requests": list(self.trace)})

    async def state(self, request: web.Request) -> web.Response:
        c = self.engine.counters
        body = {
            "ready": True, "requests": self.requests, "model": self.cfg.served_names[0],
            "faults": {"pending": self.faults.pending, "served": self.faults.served, "stall_s": self.faults.stall_s},
            "gauges": self.engine.gauges(), "prefix_cache_blocks": len(self.engine.cache.blocks),
            "counters": {"prompt_tokens": c.prompt_tokens, "generation_tokens": c.generation_tokens,
                         "prefix_queries": c.prefix_queries, "prefix_hits": c.prefix_hits,
                         "spec_drafts": c.spec_drafts, "spec_draft_tokens": c.spec_draft_tokens,
                         "spec_accepted": c.spec_accepted, "preemptions": c.preemptions,
                         "request_success": dict(c.success)},
        }
        body.update(self.extra_state)
        return web.json_response(body)


def require_key(api_key: Optional[str]) -> Any:
    """vLLM's --api-key (or VLLM_API_KEY): every /v1 route wants `Authorization: Bearer <key>` and answers 401
    otherwise; /health, /version, /metrics and the stand-in's own routes stay open."""

    @web.middleware
    async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
        if api_key and request.path.startswith("/v1") and request.headers.get("Authorization") != f"Bearer {api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    return middleware


def build_app(api: Api, api_key: Optional[str] = None) -> web.Application:
    """The aiohttp application with every route."""
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[require_key(api_key)])
    app.router.add_post("/v1/chat/completions", api.chat_completions)
    app.router.add_post("/v1/completions", api.completions)
    app.router.add_get("/health", api.health)
    app.router.add_get("/version", api.version)
    app.router.add_get("/v1/models", api.models)
    app.router.add_post("/tokenize", api.tokenize)
    app.router.add_get("/metrics", api.metrics)
    app.router.add_post("/standin/faults", api.set_faults)
    app.router.add_delete("/standin/faults", api.clear_faults)
    app.router.add_get("/standin/state", api.state)
    app.router.add_get("/standin/trace", api.get_trace)
    return app
