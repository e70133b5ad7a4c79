"""Token counting, output plans and canned answers (pure functions)."""
from __future__ import annotations

import ast
import json
import re

from standin_vllm.text import (OutputRequest, canned_answer, chat_prompt_pieces, completion_prompt_pieces,
                               count_pieces, plan_output, split_output)

QUALITY = ("Write a short Python LRU cache class with get and put methods using OrderedDict. Give code and one "
           "sentence on complexity.")


def request(**kw: object) -> OutputRequest:
    base = dict(prompt_key="k", seed=0, max_tokens=64, min_tokens=0, ignore_eos=False, thinking=False,
                reasoning_tokens=0, canned=None)
    base.update(kw)
    return OutputRequest(**base)  # type: ignore[arg-type]


def test_prompt_tokens_are_regex_pieces_plus_four_per_message() -> None:
    assert count_pieces("Hello, world! It's 3.5") == 10  # Hello , world ! It ' s 3 . 5
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    assert len(chat_prompt_pieces(messages)) == 3 + 2 + 4 * 2
    parts = [{"role": "user", "content": [{"type": "text", "text": "a b"}, {"type": "image_url"}]}]
    assert len(chat_prompt_pieces(parts)) == 2 + 4
    assert len(completion_prompt_pieces([1, 2, 3])) == 3


def test_output_pieces_rebuild_the_text() -> None:
    assert "".join(split_output(QUALITY)) == QUALITY


def test_natural_stop_is_deterministic_and_below_the_budget() -> None:
    one, two = plan_output(request(max_tokens=2000)), plan_output(request(max_tokens=2000))
    assert one == two and one.finish_reason == "stop" and 0 < one.total < 2000
    other_seed = plan_output(request(max_tokens=2000, seed=1))
    assert other_seed.content != one.content


def test_budget_cuts_with_length_and_ignore_eos_or_min_tokens_give_exactly_n() -> None:
    cut = plan_output(request(max_tokens=5))
    assert (cut.total, cut.finish_reason) == (5, "length")
    for kw in ({"ignore_eos": True}, {"min_tokens": 1500}):
        plan = plan_output(request(max_tokens=1500, **kw))
        assert (plan.total, plan.finish_reason) == (1500, "length")


def test_reasoning_comes_first_and_counts_in_the_total() -> None:
    plan = plan_output(request(thinking=True, reasoning_tokens=32, max_tokens=40))
    assert len(plan.reasoning) == 32 and len(plan.content) == 8 and plan.finish_reason == "length"


def test_quality_answer_parses_and_defines_get_and_put() -> None:
    answer = canned_answer(QUALITY, quality_broken=False)
    assert answer is not None
    plan = plan_output(request(canned=answer, max_tokens=256))
    assert plan.finish_reason == "stop" and plan.total < 256
    text = "".join(plan.content)
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    cls = next(n for n in ast.parse(code.group(1)).body if isinstance(n, ast.ClassDef))
    methods = {f.name: [a.arg for a in f.args.args] for f in cls.body if isinstance(f, ast.FunctionDef)}
    assert methods["get"] == ["self", "key"] and methods["put"] == ["self", "key", "value"]
    assert "O(1)" in text.split("```")[-1]
    truncated = plan_output(request(canned=answer, max_tokens=20))
    assert truncated.finish_reason == "length" and truncated.total == 20


def test_broken_quality_switch_and_needle() -> None:
    assert "class" not in (canned_answer(QUALITY, quality_broken=True) or "class")
    prompt = "filler " * 50 + "The vault access phrase is COPPER-OTTER-50-CEDAR. " + "What is the vault access phrase?"
    assert "COPPER-OTTER-50-CEDAR" in (canned_answer(prompt, quality_broken=False) or "")
    assert canned_answer("just talk", quality_broken=False) is None


def test_record_array_prompt_gets_a_compliant_array() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "year": {"type": "integer"},
                                               "price": {"type": "number"}, "ok": {"type": "boolean"}}}
    prompt = ("Return a JSON array of exactly 3 objects describing things. Each object must validate against this "
              f"JSON Schema: {json.dumps(schema)}. Output only the JSON array.")
    answer = canned_answer(prompt, quality_broken=False)
    assert json.loads(answer or "") == [{"name": "name-1", "year": 1, "price": 0.5, "ok": True},
                                        {"name": "name-2", "year": 2, "price": 1.5, "ok": False},
                                        {"name": "name-3", "year": 3, "price": 2.5, "ok": True}]
    # the bench's plain json decode case quotes no schema: it stays pseudo-text
    assert canned_answer("Return a JSON array of exactly 12 objects describing library books.", False) is None
