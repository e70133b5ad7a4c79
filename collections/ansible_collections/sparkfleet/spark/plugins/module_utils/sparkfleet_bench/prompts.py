"""Benchmark prompts and texts as data, plus the pure builders that size them.

The standard decode prompts are the reference's (unchanged wording keeps results comparable with its
baselines). Long texts come from two local sources only, so a bench needs no download: a repeating
filler of nature words, and "real text" taken from the controller's own Python standard library source.
"""
from __future__ import annotations

import ast
import hashlib
import random
import re
import sysconfig
from pathlib import Path
from typing import Optional

QUALITY_PROMPT = ("Write a short Python LRU cache class with get and put methods using OrderedDict. "
                  "Give code and one sentence on complexity.")
_PROSE = "Explain how speculative decoding speeds up large language model inference, step by step."
_JSON = ("Return a JSON array of exactly 12 objects describing library books, each with title, author, year, "
         "isbn and available fields. Output only the JSON.")

# case -> (prompt, reasoning on?). `-nothink` variants switch reasoning off through chat_template_kwargs.
DECODE_CASES: dict[str, tuple[str, bool]] = {
    "prose": (_PROSE, True),
    "code": (QUALITY_PROMPT, True),
    "json": (_JSON, True),
    "prose-nothink": (_PROSE, False),
    "code-nothink": (QUALITY_PROMPT, False),
    "json-nothink": (_JSON, False),
}
REASONING_OFF = {"thinking": False}
# The sampled suite's cases (T=1.0, top_p 0.95, seeds 1000+i, reasoning off): an essay and a code module, whose
# texts differ in how well speculative drafts are accepted.
SAMPLED_CASES: dict[str, str] = {
    "essay": "Write an essay of about 200 words on why lighthouses were built where they stand.",
    "module": ("Write a Python module with a function that parses ISO 8601 dates, a function that formats them, "
               "and docstrings for both."),
}

FILLER_WORDS = ("river", "forest", "meadow", "mountain", "valley", "stone", "cloud", "rain", "willow",
                "canyon", "breeze", "harbor", "glacier", "moss", "thunder", "prairie", "orchard", "lantern")
PREFILL_TAIL = "\nReply with the word ok."
ADMISSION_TAIL = "\n\nWrite a 400-word story about a lighthouse keeper who finds a message in a bottle."
NEEDLE_PHRASE = "COPPER-OTTER-{depth}-CEDAR"
NEEDLE_SENTENCE = "\n# Note for the reader: the vault access phrase is {phrase}. Remember it.\n"
NEEDLE_QUESTION = "\n\nWhat is the vault access phrase mentioned in the text above? Answer with the phrase only."


def filler_text(n_words: int, offset: int = 0) -> str:
    """n_words of the repeating filler, starting at a word offset (so prompts differ beyond the nonce)."""
    size = len(FILLER_WORDS)
    return " ".join(FILLER_WORDS[(offset + i) % size] for i in range(n_words))


def source_files() -> list[Path]:
    """The controller's Python standard library sources, in a stable order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(p for p in root.glob("*.py") if p.is_file())


def source_text(n_chars: int, seed: int) -> str:
    """n_chars of standard-library source, from a seeded file onward (wrapping around)."""
    files = source_files()
    if not files:
        raise RuntimeError("no Python standard library sources found for real-text prompts")
    start = random.Random(seed).randrange(len(files))
    parts: list[str] = []
    total = 0
    i = start
    while total < n_chars:
        text = files[i % len(files)].read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        total += len(text)
        i += 1
        if i - start > 10 * len(files):
            break
    return "".join(parts)[:n_chars]


def text_of_chars(kind: str, n_chars: int, seed: int) -> str:
    """A text of about n_chars of the given kind (filler or source)."""
    if kind == "filler":
        text = filler_text(max(1, n_chars // 5 + 1), offset=seed)[:n_chars]
        return text.rsplit(" ", 1)[0] if " " in text else text
    if kind == "source":
        return source_text(n_chars, seed)
    raise ValueError(f"unknown prefill text {kind!r} (expected filler or source)")


def nonce_prefix(rng: random.Random) -> str:
    """A unique marker for the START of a prompt: an end-of-prompt nonce does not stop prefix reuse."""
    return f"[bench nonce {rng.getrandbits(64):016x}]\n"


def needle_haystack(body: str, depth_pct: int) -> str:
    """body with the needle sentence inserted at depth_pct of its length (at a line boundary)."""
    phrase = NEEDLE_PHRASE.format(depth=depth_pct)
    cut = body.rfind("\n", 0, len(body) * depth_pct // 100)
    cut = cut if cut >= 0 else len(body) * depth_pct // 100
    return body[:cut] + NEEDLE_SENTENCE.format(phrase=phrase) + body[cut:]


def prompts_sha256() -> str:
    """Hash of every fixed prompt, recorded so a comparison can tell when the workload changed."""
    blob = "\n".join([QUALITY_PROMPT, *(f"{k}:{v[0]}:{v[1]}" for k, v in sorted(DECODE_CASES.items())),
                      " ".join(FILLER_WORDS), PREFILL_TAIL, ADMISSION_TAIL, NEEDLE_SENTENCE, NEEDLE_QUESTION])
    return hashlib.sha256(blob.encode()).hexdigest()


def sampled_sha256() -> str:
    """Hash of the sampled suite's prompts (kept apart so the decode prompts' hash of older baselines holds)."""
    return hashlib.sha256("\n".join(f"{k}:{v}" for k, v in sorted(SAMPLED_CASES.items())).encode()).hexdigest()


_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def check_quality(answer: str) -> str:
    """'pass' or a named failure: a fenced Python block that parses and defines get and put(self, key, value)."""
    blocks = _FENCE.findall(answer)
    if not blocks:
        return "no fenced Python block"
    tree: Optional[ast.Module] = None
    for block in blocks:
        try:
            tree = ast.parse(block)
            break
        except SyntaxError:
            continue
    if tree is None:
        return "code block does not parse"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
            if "get" in methods and "put" in methods:
                args = [a.arg for a in methods["put"].args.args]
                return "pass" if args[:3] == ["self", "key", "value"] else "put is not put(self, key, value)"
    return "no class defining get and put"
