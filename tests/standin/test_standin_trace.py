"""/standin/trace (when the server really wrote each request's first and last token) and
STANDIN_DECODE_TICK_S (tokens grouped into fewer writes, first and last token still on their due time)."""
from __future__ import annotations

import json
import time

import pytest
from standin_client import MODEL, get, stream

# Asserts wall-clock figures of the stand-in: run alone, after the lanes that load the machine (Makefile).
pytestmark = pytest.mark.timing

ITL = 0.01


def _body(out: int) -> dict[str, object]:
    return {"model": MODEL, "prompt": "trace me please", "max_tokens": out, "ignore_eos": True,
            "stream_options": {"include_usage": True}}


def _trace(server) -> list[dict]:  # type: ignore[no-untyped-def]
    status, data = get(server, "/standin/trace")
    assert status == 200
    doc = json.loads(data)
    assert doc["clock"] == "monotonic"
    return doc["requests"]


@pytest.mark.parametrize("tick", [0.0, 0.05])
def test_trace_records_real_write_times_and_ticks_group_tokens(spawn, tick: float) -> None:  # type: ignore[no-untyped-def]
    server = spawn(env={"STANDIN_ITL_S": str(ITL), "STANDIN_TTFT_BASE_S": "0.02", "STANDIN_PREFILL_TPS": "1000000",
                        "STANDIN_DECODE_TICK_S": str(tick), "STANDIN_TRACE_WRITES": "1" if tick else "0"})
    before = time.monotonic()
    result = stream(server, "/v1/completions", _body(60))
    assert result.done and result.usage["completion_tokens"] == 60
    [rec] = _trace(server)
    assert rec["id"] == result.events[0]["id"] and rec["tokens"] == 60
    # one clock: the server's stamps sit between the client's send and its reads
    assert before <= result.t_send <= rec["received"] <= rec["first_sent"] <= result.token_times()[0]
    assert rec["first_sent"] - rec["first_due"] < 0.05 and rec["first_due"] - rec["received"] >= 0.02
    # the first token alone and the last one at its own due time, 59 steps apart, whatever the grouping
    assert rec["last_due"] - rec["first_due"] == pytest.approx(59 * ITL, abs=1e-6)
    assert rec["last_sent"] <= result.token_times()[-1] and rec["last_sent"] - rec["last_due"] < 0.02
    times = result.token_times()
    if tick:
        # 59 later tokens in writes at most every 50 ms: far fewer writes, bursts of ~5 tokens
        assert rec["writes"] <= 2 + 59 * ITL / tick + 3
        assert sum(1 for a, b in zip(times, times[1:]) if b - a < 0.002) >= 40
        log = rec["write_log"]
        assert len(log) == rec["writes"] and log[-1] == [rec["last_sent"], 60] and log[0][1] == 1
    else:
        assert rec["writes"] >= 50 and "write_log" not in rec
    assert (times[-1] - times[0]) == pytest.approx(59 * ITL, abs=0.015)
