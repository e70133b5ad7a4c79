"""Token counting and deterministic output text, without a tokenizer.

Prompt tokens are regex pieces (`\\w+` runs and single punctuation marks); every chat message adds four
template tokens (start marker, role, separator, end marker). Output tokens are whole text pieces, one
per stream delta, so a client that counts deltas and one that reads `usage` agree.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, List, Optional, Sequence, Tuple

PIECE = re.compile(r"\w+|[^\w\s]")
# Output pieces keep their leading whitespace so joining the deltas reproduces the text exactly.
OUTPUT_PIECE = re.compile(r"\s*(?:\w+|[^\w\s])|\s+$")
TEMPLATE_TOKENS_PER_MESSAGE = 4
VOCAB_SIZE = 129280
NEEDLE = re.compile(r"COPPER-OTTER-(\d+)-CEDAR")
# The bench's compliance prompts: "a JSON array of exactly N objects" with the item schema quoted after the marker.
ARRAY_OF = re.compile(r"JSON array of exactly (\d+) objects")
SCHEMA_MARKER = "validate against this JSON Schema: "

WORDS = (
    "the model keeps a steady pace while each request waits for its turn in the queue and every token "
    "arrives on time because the clock never drifts so tests can trust what they measure across nodes "
    "cables links ranks heads workers memory cache blocks prefill decode stream latency throughput"
).split()

QUALITY_ANSWER = '''```python
from collections import OrderedDict


class LRUCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: OrderedDict = OrderedDict()

    def get(self, key):
        if key not in self.items:
            return -1
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key, value) -> None:
        if key in self.items:
            self.items.move_to_end(key)
        self.items[key] = value
        if len(self.items) > self.capacity:
            self.items.popitem(last=False)
```

Both get and put run in O(1) time, because OrderedDict keeps keys in a hash map plus a linked list.'''

GARBAGE_ANSWER = "Sure! Here is a cache: cache = cache + 1 put get put get ``` end."

REASONING_TEXT = (
    "The user wants an answer ; I should think about what they asked , keep it short , check the details "
    "and then write the reply carefully ."
)


def count_pieces(text: str) -> int:
    """Number of regex token pieces in one text."""
    return sum(1 for _ in PIECE.finditer(text))


def message_text(content: Any) -> str:
    """Text of one chat message content: a string or a list of typed parts (non-text parts ignored)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise ValueError("message content must be a string or a list of parts")


def chat_prompt_pieces(messages: Sequence[dict]) -> List[str]:
    """Token pieces of a chat prompt: four template tokens per message around its content."""
    pieces: List[str] = []
    for msg in messages:
        role = str(msg.get("role", "user"))
        pieces.extend(("<|msg|>", role, "<|sep|>"))
        pieces.extend(PIECE.findall(message_text(msg.get("content"))))
        pieces.append("<|end|>")
    return pieces


def completion_prompt_pieces(prompt: Any) -> List[str]:
    """Token pieces of a /v1/completions prompt: a string, a one-element list, or token ids."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return PIECE.findall(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [f"<id:{t}>" for t in prompt]
    raise ValueError("prompt must be a non-empty string or a list of token ids")


def token_id(piece: str) -> int:
    """A stable pseudo token id for one piece."""
    return zlib.crc32(piece.encode()) % VOCAB_SIZE


def block_hashes(pieces: Sequence[str], block_size: int, salt: str) -> List[bytes]:
    """Chained hashes of the full blocks of a prompt; the salt seeds the chain so salts never share blocks."""
    digests: List[bytes] = []
    prev = hashlib.sha256(("salt:" + salt).encode()).digest()
    for start in range(0, len(pieces) - block_size + 1, block_size):
        h = hashlib.sha256(prev)
        h.update("\x00".join(pieces[start:start + block_size]).encode())
        prev = h.digest()
        digests.append(prev)
    return digests


def split_output(text: str) -> List[str]:
    """Split answer text into output pieces whose concatenation is the text."""
    return [m.group(0) for m in OUTPUT_PIECE.finditer(text) if m.group(0)]


def last_user_text(messages: Sequence[dict]) -> str:
    """All message text, newest last, used to recognise canned prompts."""
    return "\n".join(message_text(m.get("content")) for m in messages)


def is_quality_prompt(text: str) -> bool:
    """The reference quality prompt: an LRU cache class built on OrderedDict."""
    low = text.lower()
    return "lru" in low and "ordereddict" in low


def _schema_value(field: str, kind: Any, index: int) -> Any:
    """A deterministic value of a JSON Schema type for object `index` of a record array."""
    if kind == "integer":
        return index + 1
    if kind == "number":
        return index + 0.5
    if kind == "boolean":
        return index % 2 == 0
    return f"{field}-{index + 1}"


def record_array(text: str) -> Optional[str]:
    """The answer a compliant model gives to "a JSON array of exactly N objects" whose item JSON Schema is quoted
    in the prompt: N objects with exactly the schema's properties, nothing around the array."""
    count = ARRAY_OF.search(text)
    marker = text.find(SCHEMA_MARKER)
    if not count or marker < 0:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(text, marker + len(SCHEMA_MARKER))
    except ValueError:
        return None
    fields = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(fields, dict):
        return None
    items = [{name: _schema_value(name, (spec or {}).get("type"), i) for name, spec in fields.items()}
             for i in range(int(count.group(1)))]
    return json.dumps(items)


def canned_answer(text: str, quality_broken: bool) -> Optional[str]:
    """The answer a real model gives to a prompt the bench checks, else None."""
    needle = NEEDLE.search(text)
    if needle:
        return f"The vault access phrase is {needle.group(0)}."
    records = record_array(text)
    if records is not None:
        return records
    if is_quality_prompt(text):
        return GARBAGE_ANSWER if quality_broken else QUALITY_ANSWER
    return None


@dataclass(frozen=True)
class OutputPlan:
    """What one request will emit: reasoning pieces, content pieces and the finish reason."""

    reasoning: Tuple[str, ...]
    content: Tuple[str, ...]
    finish_reason: str

    @property
    def total(self) -> int:
        return len(self.reasoning) + len(self.content)

    def pieces(self) -> Iterable[Tuple[str, str]]:
        """(kind, text) per output token, kind is 'reasoning' or 'content'."""
        for piece in self.reasoning:
            yield "reasoning", piece
        for piece in self.content:
            yield "content", piece


def pseudo_words(rng: random.Random, count: int) -> List[str]:
    """Deterministic filler prose, one piece per token."""
    out: List[str] = []
    for i in range(count):
        roll = rng.random()
        if i and roll < 0.08:
            out.append(".")
        elif i and roll < 0.13:
            out.append(",")
        else:
            out.append(" " + rng.choice(WORDS))
    return out


@dataclass(frozen=True)
class OutputRequest:
    """The sampling knobs that shape an output plan."""

    prompt_key: str
    seed: int
    max_tokens: int
    min_tokens: int
    ignore_eos: bool
    thinking: bool
    reasoning_tokens: int
    canned: Optional[str]


def natural_length(rng: random.Random) -> int:
    """Where the pseudo-model would stop on its own when nothing canned applies."""
    return rng.randint(48, 480)


def stop_point(natural: int, req: OutputRequest) -> Tuple[int, str]:
    """Output length and finish reason: EOS at the natural end unless ignore_eos/min_tokens push past it."""
    if req.ignore_eos:
        return req.max_tokens, "length"
    wanted = max(natural, req.min_tokens)
    if wanted > req.max_tokens or (wanted == req.max_tokens and natural < req.max_tokens):
        return req.max_tokens, "length"
    return wanted, "stop"


def plan_output(req: OutputRequest) -> OutputPlan:
    """Decide every output piece up front, so timing and usage follow from one plan."""
    rng = random.Random(f"{req.seed}:{req.prompt_key}")
    reasoning: List[str] = []
    if req.thinking and req.reasoning_tokens > 0:
        base = split_output(" " + REASONING_TEXT)
        reasoning = (base * (req.reasoning_tokens // len(base) + 1))[:req.reasoning_tokens]
    body = split_output(req.canned) if req.canned is not None else pseudo_words(rng, natural_length(rng))
    natural = len(reasoning) + len(body)
    target, finish = stop_point(natural, req)
    everything = reasoning + body
    if target > len(everything):
        everything += pseudo_words(rng, target - len(everything))
    everything = everything[:target]
    n_reason = min(len(reasoning), target)
    return OutputPlan(tuple(everything[:n_reason]), tuple(everything[n_reason:]), finish)
