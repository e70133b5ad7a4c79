"""HTTP shape, usage, reasoning, errors, prefix cache, /metrics and fault injection against a live stand-in."""
from __future__ import annotations

import json
import uuid

from standin_client import MODEL, Server, chat, get, metrics, post, stream

QUALITY = ("Write a short Python LRU cache class with get and put methods using OrderedDict. Give code and one "
           "sentence on complexity.")
NO_THINK = {"chat_template_kwargs": {"thinking": False}}


def test_streaming_chat_shape_usage_and_done(fast_server: Server) -> None:
    res = stream(fast_server, "/v1/chat/completions",
                 chat("Say hello", max_tokens=12, ignore_eos=True, stream_options={"include_usage": True}, **NO_THINK))
    assert res.status == 200 and res.done and res.error is None
    first, last_token, usage_chunk = res.events[0], res.events[-2], res.events[-1]
    assert first["object"] == "chat.completion.chunk" and first["model"] == MODEL
    assert first["choices"][0]["delta"]["role"] == "assistant"
    assert len({e["id"] for e in res.events}) == 1
    assert last_token["choices"][0]["finish_reason"] == "length"
    assert all(e["choices"][0]["finish_reason"] is None for e in res.events[:-2])
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 2 + 4, "completion_tokens": 12, "total_tokens": 18,
                                    "prompt_tokens_details": {"cached_tokens": 0},
                                    "completion_tokens_details": {"reasoning_tokens": 0}}
    assert len(res.token_times()) == 12


def test_usage_absent_without_include_usage(fast_server: Server) -> None:
    res = stream(fast_server, "/v1/completions", {"model": MODEL, "prompt": "one two", "max_tokens": 3})
    assert res.done and all("usage" not in e for e in res.events)
    assert [e["object"] for e in res.events] == ["text_completion"] * 3


def test_reasoning_is_on_by_default_for_chat_and_off_on_request(fast_server: Server) -> None:
    body = chat("Explain speculative decoding", max_tokens=40, stream_options={"include_usage": True})
    on = stream(fast_server, "/v1/chat/completions", body)
    assert on.usage["completion_tokens_details"]["reasoning_tokens"] == 32
    assert on.text("reasoning_content").strip() and len(on.token_times()) == 40
    for knob in ({"thinking": False}, {"enable_thinking": False}):
        off = stream(fast_server, "/v1/chat/completions", dict(body, chat_template_kwargs=knob))
        assert off.usage["completion_tokens_details"]["reasoning_tokens"] == 0
        assert off.text("reasoning_content") == ""
    completion = stream(fast_server, "/v1/completions",
                        {"model": MODEL, "prompt": "x", "max_tokens": 4, "stream_options": {"include_usage": True}})
    assert completion.usage["completion_tokens_details"]["reasoning_tokens"] == 0


def test_non_streaming_quality_answer(fast_server: Server) -> None:
    status, body = post(fast_server, "/v1/chat/completions",
                        chat(QUALITY, max_tokens=256, temperature=0, seed=42, **NO_THINK))
    assert status == 200 and body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["reasoning_content"] is None
    assert "```python" in choice["message"]["content"] and "def put(self, key, value)" in choice["message"]["content"]
    assert body["usage"]["completion_tokens"] < 256
    again = post(fast_server, "/v1/chat/completions", chat(QUALITY, max_tokens=256, temperature=0, seed=42,
                                                           **NO_THINK))[1]
    assert again["choices"][0]["message"]["content"] == choice["message"]["content"]


def test_needle_answer_and_tokenize(fast_server: Server) -> None:
    messages = [{"role": "user", "content": "words " * 100 + "The vault access phrase is COPPER-OTTER-90-CEDAR. "
                                            "What is the vault access phrase? Reply with the phrase only."}]
    status, tok = post(fast_server, "/tokenize", {"model": MODEL, "messages": messages})
    assert status == 200 and tok["max_model_len"] == 4096
    assert tok["count"] == len(tok["tokens"]) == 100 + 13 + 7 + 6 + 4  # filler, phrase, question, order, template
    status, body = post(fast_server, "/v1/chat/completions", {"model": MODEL, "messages": messages,
                                                              "max_tokens": 32, **NO_THINK})
    assert "COPPER-OTTER-90-CEDAR" in body["choices"][0]["message"]["content"]
    assert body["usage"]["prompt_tokens"] == tok["count"]
    assert post(fast_server, "/tokenize", {"prompt": "a b c"})[1]["count"] == 3


def test_errors_have_vllm_shape(fast_server: Server) -> None:
    cases = [
        (chat("hi", model="other-model"), 404, "does not exist"),
        ({"model": MODEL}, 400, "messages"),
        (chat("hi", max_tokens=0), 400, "max_tokens"),
        (chat("word " * 5000), 400, "maximum context length is 4096"),
        (chat("hi", max_tokens=4095), 400, "maximum context length"),
        (chat("hi", stream_options={"include_usage": True}), 400, "stream=True"),
        (chat("hi", temperature=-1), 400, "temperature"),
    ]
    for body, code, needle in cases:
        status, err = post(fast_server, "/v1/chat/completions", body)
        assert status == code, (body, err)
        assert err["error"]["code"] == code and needle in err["error"]["message"]
        assert err["error"]["type"] == ("NotFoundError" if code == 404 else "BadRequestError")
    assert post(fast_server, "/v1/completions", {"model": MODEL})[0] == 400


def test_models_version_health(fast_server: Server) -> None:
    status, body = get(fast_server, "/v1/models")
    models = json.loads(body)
    assert status == 200 and models["data"][0]["id"] == MODEL and models["data"][0]["max_model_len"] == 4096
    assert json.loads(get(fast_server, "/version")[1])["version"]
    assert get(fast_server, "/health")[0] == 200


def long_prompt(nonce: str) -> str:
    return "The river bends past the old mill and the heron waits. " * 40 + nonce


def test_prefix_cache_hits_on_replay_and_misses_with_another_salt(fast_server: Server) -> None:
    before = metrics(fast_server)
    salt = uuid.uuid4().hex
    body = {"model": MODEL, "prompt": long_prompt("end"), "max_tokens": 1, "cache_salt": salt,
            "stream_options": {"include_usage": True}}
    cold = stream(fast_server, "/v1/completions", body).usage
    warm = stream(fast_server, "/v1/completions", body).usage
    other = stream(fast_server, "/v1/completions", dict(body, cache_salt=uuid.uuid4().hex)).usage
    prompt = cold["prompt_tokens"]
    assert cold["prompt_tokens_details"]["cached_tokens"] == 0
    assert warm["prompt_tokens_details"]["cached_tokens"] == (prompt - 1) // 16 * 16
    assert other["prompt_tokens_details"]["cached_tokens"] == 0
    after = metrics(fast_server)
    assert after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"] == 3 * prompt
    assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] == (prompt - 1) // 16 * 16


def test_metrics_counters_move_with_requests(fast_server: Server) -> None:
    before = metrics(fast_server)
    usage = [stream(fast_server, "/v1/chat/completions",
                    chat(f"count {i}", max_tokens=10, ignore_eos=True, stream_options={"include_usage": True},
                         **NO_THINK)).usage for i in range(3)]
    post(fast_server, "/v1/chat/completions", chat("natural stop please", max_tokens=3000, **NO_THINK))
    after = metrics(fast_server)
    key = 'vllm:request_success_total{engine="0",model_name="%s",finished_reason="%s"}'
    assert after[key % (MODEL, "length")] - before[key % (MODEL, "length")] == 3
    assert after[key % (MODEL, "stop")] - before[key % (MODEL, "stop")] == 1
    gen = after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"]
    assert gen > 30 and (gen - 30) < 3000
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == \
        sum(u["prompt_tokens"] for u in usage) + 3 + 4
    assert after["vllm:num_requests_running"] == 0 and after["vllm:num_requests_waiting"] == 0
    assert after["vllm:spec_decode_num_drafts_total"] == 0


def test_fault_injection(fast_server: Server) -> None:
    status, armed = post(fast_server, "/standin/faults", {"http_500": 1, "drop_stream": 1})
    assert status == 200 and armed["pending"]["http_500"] == 1
    body = chat("fault me", max_tokens=20, ignore_eos=True, **NO_THINK)
    failed = stream(fast_server, "/v1/chat/completions", body)
    assert failed.status == 500 and json.loads(failed.error or "{}")["error"]["code"] == 500
    dropped = stream(fast_server, "/v1/chat/completions", body)
    assert dropped.status == 200 and not dropped.done and len(dropped.token_times()) == 3
    post(fast_server, "/standin/faults", {"stall": 1, "stall_s": 0.4})
    stalled = stream(fast_server, "/v1/chat/completions", body)
    assert stalled.done and stalled.ttft >= 0.4
    healthy = stream(fast_server, "/v1/chat/completions", body)
    assert healthy.done and healthy.ttft < 0.2
    state = json.loads(get(fast_server, "/standin/state")[1])
    assert state["faults"]["served"] == {"http_500": 1, "drop_stream": 1, "stall": 1, "preempt": 0}
    assert sum(state["faults"]["pending"].values()) == 0
    assert post(fast_server, "/standin/faults", {"explode": 1})[0] == 400


def test_spec_decode_counters(spawn) -> None:  # type: ignore[no-untyped-def]
    server = spawn(["--speculative-config", '{"method":"dspark","num_speculative_tokens":5}'],
                   {"STANDIN_ITL_S": "0.001", "STANDIN_SPEC_ACCEPT": "3"})
    stream(server, "/v1/completions", {"model": MODEL, "prompt": "go", "max_tokens": 101, "ignore_eos": True})
    m = metrics(server)
    drafts = m["vllm:spec_decode_num_drafts_total"]
    assert drafts == 25 and m["vllm:spec_decode_num_draft_tokens_total"] == 125
    assert m["vllm:spec_decode_num_accepted_tokens_total"] == 75


def test_reasoning_field_rename_and_non_streaming_reasoning(spawn) -> None:  # type: ignore[no-untyped-def]
    server = spawn([], {"STANDIN_ITL_S": "0.001", "STANDIN_REASONING_FIELD": "reasoning",
                        "STANDIN_REASONING_TOKENS": "5"})
    res = stream(server, "/v1/chat/completions", chat("think", max_tokens=8, ignore_eos=True))
    assert res.text("reasoning").strip() and res.text("reasoning_content") == ""
    assert sum(1 for e in res.events if e["choices"][0]["delta"].get("reasoning")) == 5
    message = post(server, "/v1/chat/completions", chat("think", max_tokens=8, ignore_eos=True))[1]
    message = message["choices"][0]["message"]
    assert message["reasoning"] and message["content"] and "reasoning_content" not in message


def test_max_num_seqs_queues_and_gauges_show_it(spawn) -> None:  # type: ignore[no-untyped-def]
    import threading
    import time

    server = spawn(["--max-num-seqs", "1"], {"STANDIN_ITL_S": "0.02", "STANDIN_PREFILL_TPS": "1000000"})
    results: list = []
    body = {"model": MODEL, "prompt": "queue me", "max_tokens": 25, "ignore_eos": True}
    threads = [threading.Thread(target=lambda: results.append(stream(server, "/v1/completions", body)))
               for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    during = metrics(server)
    for t in threads:
        t.join(30)
    assert during["vllm:num_requests_running"] == 1 and during["vllm:num_requests_waiting"] == 1
    assert 0 < during["vllm:kv_cache_usage_perc"] < 1
    ttfts = sorted(r.ttft for r in results)
    # The second starts only after the first's 24 further tokens (0.48 s); run side by side the two first tokens
    # would be milliseconds apart. Half the decode as the bound: a client thread that reads its first token late
    # on a loaded machine shortens the measured gap by up to a scheduling delay.
    assert ttfts[1] - ttfts[0] >= 24 * 0.02 / 2


def test_non_streaming_drop_and_preempt_faults(fast_server: Server) -> None:
    import http.client

    post(fast_server, "/standin/faults", {"drop_stream": 1, "preempt": 1})
    body = chat("drop me", max_tokens=10, ignore_eos=True, **NO_THINK)
    try:
        status, _ = post(fast_server, "/v1/chat/completions", body)
    except (http.client.HTTPException, ConnectionError):
        status = None
    assert status is None
    before = metrics(fast_server)["vllm:num_preemptions_total"]
    assert post(fast_server, "/v1/chat/completions", body)[0] == 200
    assert metrics(fast_server)["vllm:num_preemptions_total"] == before + 1
