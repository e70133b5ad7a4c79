"""Process lifecycle: parse flags, hold memory, join the group, wait out startup, serve, exit cleanly.

Exit status: 0 after SIGTERM/SIGINT, 1 when the group fails (a rank lost, join timeout, bind error),
2 for command-line errors (argparse).
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any, Awaitable, Dict, List, Optional, Union

import aiohttp
from aiohttp import web

from . import VERSION
from .api import Api, build_app
from .cluster import GroupFailure, GroupSpec, Head, Worker, engine_fingerprint
from .config import Behaviour, ServeConfig, serve_config
from .engine import Engine

log = logging.getLogger("standin")
PAGE = 4096


def setup_logging(level: str) -> None:
    """vLLM-like log lines on stdout; the access log follows --uvicorn-log-level."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(name)s] %(message)s", "%m-%d %H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    access = logging.getLogger("aiohttp.access")
    access.setLevel(logging.INFO if level in ("trace", "debug", "info") else logging.WARNING)


def hold_memory(megabytes: int) -> bytearray:
    """Allocate and touch every page so the RSS (and any memory guard) sees real pressure."""
    size = max(megabytes, 0) * 1024 * 1024
    buf = bytearray(size)
    if size:
        buf[::PAGE] = b"\x01" * len(range(0, size, PAGE))
        log.info("holding %d MiB of resident memory (STANDIN_MEMORY_MB)", megabytes)
    return buf


def group_spec(args: argparse.Namespace, beh: Behaviour) -> GroupSpec:
    return GroupSpec(nnodes=args.nnodes, rank=args.node_rank, tp=args.tensor_parallel_size,
                     master_addr=args.master_addr, master_port=args.master_port,
                     fingerprint=engine_fingerprint(args), join_timeout_s=beh.join_timeout_s,
                     heartbeat_s=beh.heartbeat_s, heartbeat_timeout_s=beh.heartbeat_timeout_s)


async def first_of(main: Awaitable[Any], *events: asyncio.Event) -> bool:
    """Run `main` until it finishes or any event fires; True when `main` finished first."""
    task = asyncio.ensure_future(main)
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    done, _ = await asyncio.wait([task, *waiters], return_when=asyncio.FIRST_COMPLETED)
    for pending in [task, *waiters]:
        if not pending.done():
            pending.cancel()
    return task in done and not any(e.is_set() for e in events)


def make_runner(app: web.Application, access: bool) -> web.AppRunner:
    """aiohttp >= 3.9 takes shutdown_timeout on the runner, 3.8 on the site."""
    kwargs: Dict[str, Any] = {"access_log_format": '%a "%r" %s'} if access else {"access_log": None}
    if aiohttp_version() >= (3, 9):
        kwargs["shutdown_timeout"] = 2.0
    return web.AppRunner(app, handle_signals=False, **kwargs)


def aiohttp_version() -> tuple:
    parts: List[int] = []
    for piece in aiohttp.__version__.split(".")[:2]:
        parts.append(int("".join(ch for ch in piece if ch.isdigit()) or 0))
    return tuple(parts)


async def start_http(args: argparse.Namespace, api: Api) -> web.AppRunner:
    app = build_app(api, args.api_key or os.environ.get("VLLM_API_KEY") or None)
    runner = make_runner(app, args.uvicorn_log_level in ("trace", "debug", "info"))
    await runner.setup()
    site_kwargs: Dict[str, Any] = {} if aiohttp_version() >= (3, 9) else {"shutdown_timeout": 2.0}
    await web.TCPSite(runner, args.host, args.port, **site_kwargs).start()
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    print(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)", flush=True)
    return runner


def log_start(args: argparse.Namespace, cfg: ServeConfig, beh: Behaviour) -> None:
    log.info("vLLM API server version %s (stand-in test double, not an inference engine)", VERSION)
    log.info("args: %s", {k: v for k, v in vars(args).items() if v not in (None, False)})
    log.info("behaviour: %s", beh)
    if args.node_rank == 0:
        log.info("GPU KV cache size: %d tokens; maximum concurrency for %d tokens per request: %.2fx",
                 cfg.kv_tokens, cfg.max_model_len, cfg.kv_tokens / cfg.max_model_len)


class Lifecycle:
    """One process: optional group membership, startup delay, HTTP on rank 0, clean shutdown."""

    def __init__(self, args: argparse.Namespace, beh: Behaviour) -> None:
        self.args = args
        self.beh = beh
        self.cfg = serve_config(args, beh)
        self.stop = asyncio.Event()
        self.failure = GroupFailure()
        self.member: Optional[Union[Head, Worker]] = None
        self.runner: Optional[web.AppRunner] = None
        self.api: Optional[Api] = None

    def install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.on_signal, sig)

    def on_signal(self, sig: int) -> None:
        log.info("received %s, shutting down", signal.Signals(sig).name)
        self.stop.set()

    async def join_group(self) -> bool:
        """Become part of the group; False when the group failed or a signal came first."""
        spec = group_spec(self.args, self.beh)
        if self.args.nnodes == 1:
            return True
        if spec.rank == 0:
            head = Head(spec, self.failure)
            self.member = head
            await head.start()
            return await first_of(head.wait_joined(), self.stop, self.failure.event)
        worker = Worker(spec, self.failure)
        self.member = worker
        return await first_of(worker.join(), self.stop, self.failure.event)

    async def run(self) -> int:
        self.install_signals()
        memory = hold_memory(self.beh.memory_mb)
        log_start(self.args, self.cfg, self.beh)
        try:
            return await self.lifetime()
        except OSError as exc:
            log.error("cannot start: %s", exc)
            return 1
        finally:
            await self.shutdown()
            del memory

    async def lifetime(self) -> int:
        if not await self.join_group():
            return self.exit_code()
        if self.args.headless:
            log.info("rank %d is headless: engine worker only, no API server", self.args.node_rank)
        else:
            log.info("loading model (stand-in: waiting STANDIN_STARTUP_S=%g s)", self.beh.startup_s)
            if not await first_of(asyncio.sleep(self.beh.startup_s), self.stop, self.failure.event):
                return self.exit_code()
            await self.serve()
        await first_of(asyncio.Event().wait(), self.stop, self.failure.event)
        return self.exit_code()

    async def serve(self) -> None:
        extra = {"nnodes": self.args.nnodes, "ranks_joined": self.args.nnodes,
                 "memory_mb": self.beh.memory_mb, "pid": os.getpid()}
        self.api = Api(self.cfg, self.beh, Engine(self.cfg, self.beh), extra)
        self.runner = await start_http(self.args, self.api)
        if isinstance(self.member, Head):
            await self.member.broadcast({"type": "ready"})

    def exit_code(self) -> int:
        return 1 if self.failure.event.is_set() else 0

    async def shutdown(self) -> None:
        if self.member is not None:
            await self.member.stop()
        if self.api is not None:
            aborted = self.api.abort_all()
            if aborted:
                log.info("aborted %d in-flight request(s)", aborted)
        if self.runner is not None:
            await self.runner.cleanup()
        log.info("shutdown complete (exit %d)", self.exit_code())


def run(args: argparse.Namespace) -> int:
    """Run one stand-in process with already validated arguments."""
    setup_logging(args.uvicorn_log_level)
    beh = Behaviour.from_env(os.environ)
    return asyncio.run(Lifecycle(args, beh).run())
