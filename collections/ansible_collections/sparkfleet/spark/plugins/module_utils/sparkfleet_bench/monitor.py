"""Safety monitors during a benchmark run (bench method reference §1.6).

One stream per rank: the sampler (sparkfleet_bench.sampler, fed to the rank's `python3` over its own connection) prints a
sample every second. The run halts -- in-flight requests cancelled, the partial report written, verdict fail with
the reason -- when a rank's MemAvailable falls below its floor (the steady memory guard plus a margin), a GPU
comes within its headroom of the slowdown limit or passes its temperature limit, a thermal zone passes its limit,
a rank's telemetry falls silent, its sampler exits, or (device policy `require`) its GPU cannot be read. A GPU
held at a low SM clock while busy (the GB10 clock latch) and any thermal slowdown are recorded and flagged.

The rules and the per-rank record are pure functions here; `Monitors` is the asyncio part.
"""
from __future__ import annotations

import asyncio
import json
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from . import sampler

GIB_KIB = 1024 * 1024
# Clock event reasons (nvidia-smi clocks_event_reasons.active) that mean the GPU slowed for heat.
THERMAL_SLOWDOWN_BITS = 0x08 | 0x20 | 0x40
# What runs the sampler on the rank: reads the program's text (its length is the first argument) from stdin and
# keeps stdin open, so the sampler sees the end of the stream when the bench stops or dies.
BOOT = ("import sys;n=int(sys.argv[1]);src=sys.stdin.buffer.read(n).decode();"
        "sys.argv=['spark-bench-sampler']+sys.argv[2:];"
        "exec(compile(src,'spark-bench-sampler','exec'),{'__name__':'__main__'})")
STDERR_TAIL = 400


@dataclass
class MonitorLimits:
    """When a run halts, and how often ranks are sampled. Names match the playbook's spark_bench_monitor_* variables."""

    gpu_temp_c: float = 90.0
    gpu_headroom_c: float = 5.0
    zone_c: float = 98.0
    silence_s: float = 15.0
    latch_mhz: float = 1000.0
    latch_util_pct: float = 50.0
    interval_s: float = 1.0
    gpu_interval_s: float = 15.0
    timeline_s: float = 10.0


@dataclass
class MonitorSpec:
    """One rank's stream: `argv` reaches the rank (empty: this machine); with `remote_shell` the rank's command is
    passed as one shell word (ssh). `memory_floor_gib` is where the run halts; `gpu_required` fails closed on a
    GPU that cannot be read (device policy `require`)."""

    node: str
    argv: list[str] = field(default_factory=list)
    remote_shell: bool = False
    memory_floor_gib: float = 4.0
    gpu_required: bool = True
    python: str = "python3"


def spec_problems(specs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every problem with the monitor list, named by node and field (empty when usable)."""
    problems, seen = [], set()
    for index, raw in enumerate(specs):
        node = raw.get("node") or f"monitors[{index}]"
        if not raw.get("node"):
            problems.append(f"monitors[{index}].node: missing")
        if node in seen:
            problems.append(f"monitors: node {node} named twice")
        seen.add(node)
        argv = raw.get("argv", [])
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            problems.append(f"monitors {node}.argv: must be a list of strings, got {argv!r}")
        try:
            if float(raw.get("memory_floor_gib", 4.0)) <= 0:
                problems.append(f"monitors {node}.memory_floor_gib: must be positive")
        except (TypeError, ValueError):
            problems.append(f"monitors {node}.memory_floor_gib: not a number: {raw.get('memory_floor_gib')!r}")
    return problems


def sampler_argv(spec: MonitorSpec, limits: MonitorLimits, program_bytes: int, lifetime_s: float) -> list[str]:
    """The command line that starts the sampler on the rank through its stream."""
    remote = [spec.python, "-c", BOOT, str(program_bytes), "--interval", f"{limits.interval_s:g}",
              "--gpu-interval", f"{limits.gpu_interval_s:g}", "--lifetime", f"{lifetime_s:g}"]
    return list(spec.argv) + ([shlex.join(remote)] if spec.remote_shell else remote)


def sampler_program() -> bytes:
    """The sampler's text, as shipped to the ranks (its loader has it, in a module's zip payload too)."""
    loader = getattr(sampler, "__loader__", None)
    source = loader.get_source(sampler.__name__) if loader is not None else None
    if source is None:
        source = Path(sampler.__file__).read_text(encoding="utf-8")
    return source.encode()


# ---------------------------------------------------------------- rules (pure)

def _gib(kib: float) -> float:
    return kib / GIB_KIB


def memory_halt(node: str, sample: Mapping[str, Any], floor_gib: float) -> Optional[str]:
    avail = sample.get("mem_available_kib")
    if avail is None:
        return f"{node}: MemAvailable missing from /proc/meminfo"
    if _gib(avail) < floor_gib:
        return f"{node}: MemAvailable {_gib(avail):.2f} GiB below the floor {floor_gib:g} GiB"
    return None


def gpu_halt(node: str, gpu: Mapping[str, Any], required: bool, limits: MonitorLimits) -> Optional[str]:
    """Why this GPU reading halts the run, or None."""
    if "error" in gpu:
        return f"{node}: GPU not readable under device policy require: {gpu['error']}" if required else None
    for one in gpu.get("gpus", []):
        temp, headroom = one.get("temp_c"), one.get("headroom_c")
        if temp is not None and temp >= limits.gpu_temp_c:
            return f"{node}: GPU {one.get('index')} at {temp:g} °C, at or above the limit {limits.gpu_temp_c:g} °C"
        if headroom is not None and headroom <= limits.gpu_headroom_c:
            return (f"{node}: GPU {one.get('index')} {headroom:g} °C from its slowdown temperature "
                    f"(halts within {limits.gpu_headroom_c:g} °C)")
    return None


def halt_reason(spec: MonitorSpec, sample: Mapping[str, Any], limits: MonitorLimits) -> Optional[str]:
    """Why this sample halts the run, or None."""
    zone = sample.get("zone_max_c")
    if zone is not None and zone >= limits.zone_c:
        return f"{spec.node}: thermal zone at {zone:g} °C, at or above the limit {limits.zone_c:g} °C"
    gpu = sample.get("gpu")
    reason = gpu_halt(spec.node, gpu, spec.gpu_required, limits) if isinstance(gpu, Mapping) else None
    return reason or memory_halt(spec.node, sample, spec.memory_floor_gib)


def latched(gpu: Mapping[str, Any], limits: MonitorLimits) -> bool:
    """A busy GPU held below the latch clock (the GB10 clock latch: only an AC power cycle clears it)."""
    return any(g.get("sm_clock_mhz") is not None and g["sm_clock_mhz"] < limits.latch_mhz
               and (g.get("util_pct") or 0) >= limits.latch_util_pct for g in gpu.get("gpus", []))


def slowed(gpu: Mapping[str, Any]) -> bool:
    return any((g.get("event_reasons") or 0) & THERMAL_SLOWDOWN_BITS for g in gpu.get("gpus", []))


def _extreme(current: Optional[float], value: Optional[float], pick: Callable[..., float]) -> Optional[float]:
    if value is None:
        return current
    return value if current is None else pick(current, value)


class NodeRecord:
    """What one rank's samples add up to: extremes, flags and a timeline of one sample per `timeline_s`."""

    def __init__(self, spec: MonitorSpec, limits: MonitorLimits) -> None:
        self.spec, self.limits = spec, limits
        self.samples = 0
        self.first_swap: Optional[float] = None
        self.summary: dict[str, Any] = {"min_available_gib": None, "swap_growth_gib": None, "max_zone_c": None,
                                        "max_gpu_c": None, "min_headroom_c": None, "max_power_w": None,
                                        "min_sm_clock_mhz": None, "max_sm_clock_mhz": None,
                                        "thermal_slowdown_samples": 0, "clock_latch_samples": 0, "gpu": None}
        self.timeline: list[dict[str, Any]] = []
        self._next_kept = 0.0

    def add(self, sample: Mapping[str, Any]) -> None:
        self.samples += 1
        s = self.summary
        if sample.get("mem_available_kib") is not None:
            s["min_available_gib"] = _extreme(s["min_available_gib"], round(_gib(sample["mem_available_kib"]), 3), min)
        if sample.get("swap_used_kib") is not None:
            swap = _gib(sample["swap_used_kib"])
            self.first_swap = swap if self.first_swap is None else self.first_swap
            s["swap_growth_gib"] = _extreme(s["swap_growth_gib"], round(swap - self.first_swap, 3), max)
        s["max_zone_c"] = _extreme(s["max_zone_c"], sample.get("zone_max_c"), max)
        if isinstance(sample.get("gpu"), Mapping):
            self._add_gpu(sample["gpu"])
        if sample.get("t", 0) >= self._next_kept:
            self.timeline.append(dict(sample))
            self._next_kept = sample.get("t", 0) + self.limits.timeline_s

    def _add_gpu(self, gpu: Mapping[str, Any]) -> None:
        s = self.summary
        s["gpu"] = f"not sampled: {gpu['error']}" if "error" in gpu else "sampled"
        for one in gpu.get("gpus", []):
            s["max_gpu_c"] = _extreme(s["max_gpu_c"], one.get("temp_c"), max)
            s["min_headroom_c"] = _extreme(s["min_headroom_c"], one.get("headroom_c"), min)
            s["max_power_w"] = _extreme(s["max_power_w"], one.get("power_w"), max)
            s["min_sm_clock_mhz"] = _extreme(s["min_sm_clock_mhz"], one.get("sm_clock_mhz"), min)
            s["max_sm_clock_mhz"] = _extreme(s["max_sm_clock_mhz"], one.get("sm_clock_mhz"), max)
        s["thermal_slowdown_samples"] += int(slowed(gpu))
        s["clock_latch_samples"] += int(latched(gpu, self.limits))

    def report(self) -> dict[str, Any]:
        return {**self.summary, "memory_floor_gib": self.spec.memory_floor_gib, "samples": self.samples,
                "clock_latch": self.summary["clock_latch_samples"] > 0,
                "thermal_slowdown": self.summary["thermal_slowdown_samples"] > 0, "timeline": self.timeline}


def monitor_reasons(monitors: Optional[Mapping[str, Any]]) -> list[str]:
    """Verdict reasons a run's monitors give beyond a halt: thermal slowdown makes results not comparable."""
    nodes = (monitors or {}).get("nodes") or {}
    return [f"thermal slowdown on {node} (results are not comparable)"
            for node, rec in nodes.items() if rec.get("thermal_slowdown")]


def monitor_warnings(monitors: Optional[Mapping[str, Any]]) -> list[str]:
    nodes = (monitors or {}).get("nodes") or {}
    return [f"{node}: GPU SM clock held at {rec.get('min_sm_clock_mhz'):g} MHz while busy (clock latch: only an "
            "AC power cycle of at least a minute clears it)" for node, rec in nodes.items() if rec.get("clock_latch")]


# ---------------------------------------------------------------- the streams

class Monitors:
    """Runs every rank's sampler for the length of a run and calls `halt(reason)` once when a rule trips."""

    def __init__(self, specs: Sequence[MonitorSpec], limits: MonitorLimits, halt: Callable[[str], None],
                 log: Callable[[str], None] = lambda _m: None, lifetime_s: float = 86400.0) -> None:
        self.specs, self.limits, self.halt_cb, self.log = list(specs), limits, halt, log
        self.lifetime_s = lifetime_s
        self.records = {s.node: NodeRecord(s, limits) for s in specs}
        self.last: dict[str, float] = {}
        self.procs: dict[str, asyncio.subprocess.Process] = {}
        self.tasks: list[asyncio.Task[Any]] = []
        self.halted: Optional[str] = None
        self.stopping = False
        self.first = {s.node: asyncio.Event() for s in specs}

    def _halt(self, reason: str) -> None:
        if self.halted is None and not self.stopping:
            self.halted = reason
            self.log(f"monitor halt: {reason}")
            self.halt_cb(reason)

    async def start(self) -> Optional[str]:
        """Start every stream and wait for each rank's first sample; the reason a rank gave none, or None."""
        program = sampler_program()
        for spec in self.specs:
            argv = sampler_argv(spec, self.limits, len(program), self.lifetime_s)
            try:
                proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                            stdout=asyncio.subprocess.PIPE,
                                                            stderr=asyncio.subprocess.PIPE)
            except OSError as exc:
                return f"{spec.node}: monitor could not start ({argv[0] if argv else '?'}): {exc}"
            assert proc.stdin is not None
            proc.stdin.write(program)
            self.procs[spec.node] = proc
            self.tasks.append(asyncio.create_task(self._read(spec, proc)))
        self.tasks.append(asyncio.create_task(self._watch()))
        deadline = self.limits.silence_s
        waits = [asyncio.wait_for(self.first[s.node].wait(), deadline) for s in self.specs]
        for spec, outcome in zip(self.specs, await asyncio.gather(*waits, return_exceptions=True)):
            if isinstance(outcome, BaseException):
                return self.halted or f"{spec.node}: no sample within {deadline:g} s{await self._stderr(spec.node)}"
        self.log("monitors: " + ", ".join(self._brief(s.node) for s in self.specs))
        return self.halted

    def _brief(self, node: str) -> str:
        rec = self.records[node].summary
        gpu = rec["gpu"] or "not sampled"
        return f"{node} MemAvailable {rec['min_available_gib']} GiB, GPU {gpu}"

    async def _stderr(self, node: str) -> str:
        proc = self.procs.get(node)
        if proc is None or proc.stderr is None or proc.returncode is None:
            return ""
        text = (await proc.stderr.read()).decode(errors="replace").strip()
        return f": {text[-STDERR_TAIL:]}" if text else ""

    async def _read(self, spec: MonitorSpec, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            line = await proc.stdout.readline()
            if not line:
                break
            try:
                sample = json.loads(line)
            except ValueError:
                continue
            self.last[spec.node] = time.monotonic()
            self.records[spec.node].add(sample)
            self.first[spec.node].set()
            reason = halt_reason(spec, sample, self.limits)
            if reason:
                self._halt(reason)
        code = await proc.wait()
        if not self.stopping:
            self._halt(f"{spec.node}: monitor stream ended (exit {code}){await self._stderr(spec.node)}")

    async def _watch(self) -> None:
        while not self.stopping:
            await asyncio.sleep(min(1.0, self.limits.silence_s / 4))
            now = time.monotonic()
            for node, last in self.last.items():
                if now - last > self.limits.silence_s:
                    self._halt(f"{node}: telemetry silent for {now - last:.0f} s "
                               f"(limit {self.limits.silence_s:g} s)")

    async def stop(self) -> dict[str, Any]:
        """End every stream (stdin closed, then terminated if it lingers) and return the report's `monitors`."""
        self.stopping = True
        for proc in self.procs.values():
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
        for proc in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 3)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        return {"limits": asdict(self.limits), "halted": self.halted,
                "nodes": {node: rec.report() for node, rec in self.records.items()}}
