"""The bench's monitor sampler: a program that runs on a rank for the length of one benchmark run.

The bench (sparkfleet_bench.monitor.Monitors) starts it over the rank's own connection (ssh, docker exec) with
`python3 -c BOOT`: BOOT reads this file's text from stdin and runs it, and stdin stays open, so the sampler ends
when the bench closes it or goes away. Nothing is installed on the rank and nothing is left running there.

Every `--interval` seconds it prints one JSON line: MemAvailable and swap in use (/proc/meminfo), the hottest
thermal zone; every `--gpu-interval` seconds also the GPUs as `nvidia-smi --query-gpu` reports them (temperature,
headroom to the slowdown limit, SM clock, power, utilisation, clock event reasons), or why they were not read.
Standard library only: it runs on the rank's system Python, whatever is installed there.
"""
from __future__ import annotations

import argparse
import glob
import json
import shutil
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Optional, Sequence

# nvidia-smi --query-gpu fields, in the order asked for; tlimit is the margin to the slowdown temperature.
GPU_FIELDS = ("index", "temperature.gpu", "temperature.gpu.tlimit", "clocks.sm", "power.draw", "utilization.gpu",
              "clocks_event_reasons.active")
# An nvidia-smi too old for the headroom field refuses the whole query; it is then asked without it.
GPU_FIELDS_NO_TLIMIT = tuple(f for f in GPU_FIELDS if f != "temperature.gpu.tlimit")
GPU_KEYS = {"index": "index", "temperature.gpu": "temp_c", "temperature.gpu.tlimit": "headroom_c",
            "clocks.sm": "sm_clock_mhz", "power.draw": "power_w", "utilization.gpu": "util_pct",
            "clocks_event_reasons.active": "event_reasons"}
# Byte strings as /proc/meminfo prints them ("MemAvailable:   12345678 kB").
MEMINFO_KEYS = ("MemAvailable", "SwapTotal", "SwapFree")
THERMAL_GLOB = "/sys/class/thermal/thermal_zone*/temp"


def parse_meminfo(text: str) -> dict[str, int]:
    """{mem_available_kib, swap_used_kib} from /proc/meminfo; a field the kernel did not print is left out."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name in MEMINFO_KEYS and rest.split():
            values[name] = int(rest.split()[0])
    out = {}
    if "MemAvailable" in values:
        out["mem_available_kib"] = values["MemAvailable"]
    if "SwapTotal" in values and "SwapFree" in values:
        out["swap_used_kib"] = values["SwapTotal"] - values["SwapFree"]
    return out


def hottest_zone_c(readings: Sequence[str]) -> Optional[float]:
    """The hottest of the thermal zones' `temp` files (millidegrees Celsius); None when none reads as a number."""
    temps = []
    for text in readings:
        try:
            temps.append(int(text.strip()) / 1000.0)
        except ValueError:
            continue
    return max(temps) if temps else None


def _cell(field: str, text: str) -> Any:
    """One CSV cell as a number; `[N/A]`, `[Not Supported]` and the like as None."""
    text = text.strip()
    if not text or text.startswith("[") or text.upper() in ("N/A", "NOT SUPPORTED"):
        return None
    try:
        if field == "clocks_event_reasons.active":
            return int(text, 16)
        number = float(text)
    except ValueError:
        return None
    return int(number) if field == "index" else number


def parse_gpu_csv(text: str, fields: Sequence[str] = GPU_FIELDS) -> list[dict[str, Any]]:
    """One dict per GPU line of `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(fields):
            raise ValueError(f"nvidia-smi printed {len(cells)} fields where {len(fields)} were asked for: {line!r}")
        gpus.append({GPU_KEYS[f]: _cell(f, c) for f, c in zip(fields, cells)})
    return gpus


Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def _run(argv: Sequence[str]) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)


def query_gpus(smi: Optional[str], run: Run = _run) -> dict[str, Any]:
    """{"gpus": [...]} from nvidia-smi, or {"error": why} when it is absent, fails or prints no GPU."""
    if not smi:
        return {"error": "nvidia-smi not found"}
    for fields in (GPU_FIELDS, GPU_FIELDS_NO_TLIMIT):
        try:
            done = run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"])
        except (OSError, subprocess.SubprocessError) as exc:
            return {"error": f"nvidia-smi: {exc}"}
        if done.returncode == 0:
            try:
                gpus = parse_gpu_csv(done.stdout, fields)
            except ValueError as exc:
                return {"error": str(exc)}
            return {"gpus": gpus} if gpus else {"error": "nvidia-smi listed no GPU"}
        if "tlimit" not in (done.stdout + done.stderr):
            break
    message = (done.stderr or done.stdout).strip().splitlines()
    return {"error": f"nvidia-smi exited {done.returncode}: {message[-1] if message else 'no output'}"}


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def sample(args: argparse.Namespace, gpu_due: bool, smi: Optional[str]) -> dict[str, Any]:
    """One sample of this node, as the line the bench reads."""
    out: dict[str, Any] = {"t": time.time(), **parse_meminfo(_read(args.meminfo))}
    out["zone_max_c"] = hottest_zone_c([_read(p) for p in sorted(glob.glob(args.thermal_glob))])
    if gpu_due:
        out["gpu"] = query_gpus(smi)
    return out


def _stdin_closed(done: threading.Event) -> None:
    """Sets `done` once stdin reaches its end: the bench closed it, or the stream carrying it went away."""
    try:
        while sys.stdin.buffer.read(4096):
            continue
    except (OSError, ValueError):
        pass
    done.set()


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spark-bench-sampler", description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument("--gpu-interval", type=float, default=15.0, help="seconds between nvidia-smi reads")
    parser.add_argument("--lifetime", type=float, default=86400.0, help="seconds after which it ends regardless")
    parser.add_argument("--meminfo", default="/proc/meminfo", help="the meminfo file to read")
    parser.add_argument("--thermal-glob", default=THERMAL_GLOB, help="the thermal zones' temp files")
    parser.add_argument("--nvidia-smi", default="nvidia-smi", help="the nvidia-smi to run (found on PATH)")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    done = threading.Event()
    threading.Thread(target=_stdin_closed, args=(done,), daemon=True).start()
    smi = shutil.which(args.nvidia_smi)
    start, gpu_next = time.monotonic(), 0.0
    while not done.is_set() and time.monotonic() - start < args.lifetime:
        now = time.monotonic() - start
        line = sample(args, now >= gpu_next, smi)
        if now >= gpu_next:
            gpu_next = now + args.gpu_interval
        try:
            sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            return 0
        done.wait(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
