"""Redaction of secrets from what sparkfleet prints or saves: docker inspect documents, container
environments, engine arguments and log text. Pure functions; nothing here reads or writes.

A secret is recognised two ways: by value (the values a site marks secret: the Hugging Face token, the bench
API key, the MOK password, extra site secrets) wherever it appears, and by name (an environment variable or
a `NAME=value` pair whose name says token, secret, password, API key or credential, and the argument after
an engine flag such as --api-key), so a secret the site did not list is still hidden where it is labelled.
Values shorter than MIN_SECRET_LEN are ignored: replacing two letters everywhere would mangle every text.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Dict, List

MARK = "<redacted>"
MIN_SECRET_LEN = 4
# A name is secret when it ends in one of these words (HF_TOKEN, VLLM_API_KEY, MY_PASSWORD), not when the word
# is inside it: VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD and max_tokens are settings.
_SECRET_WORDS = r"(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)"
SECRET_NAME = re.compile(_SECRET_WORDS + r"$", re.I)
SECRET_FLAGS = ("--api-key", "--token", "--hf-token", "--password", "--secret")
# NAME=value and "NAME": "value" pairs in free text whose NAME is secret.
_PAIR = re.compile(r"""(?P<name>\b[A-Za-z0-9_]*""" + _SECRET_WORDS + r""")(?P<sep>=|"?\s*:\s*"?)(?P<value>[^\s"',;]+)""",
                   re.I)
ARGV_KEYS = ("Cmd", "Args", "Entrypoint", "cmd", "command")
# The variables that hold a secret value, and the vaulted list a site adds its own to.
SECRET_VARIABLES = ("spark_model_hf_token", "spark_bench_api_key", "spark_memory_saver_mok_password")
SITE_SECRETS = "spark_site_secrets"


def known_secrets(variables: Mapping[str, Any]) -> List[str]:
    """The values of SECRET_VARIABLES and of the SITE_SECRETS list, as far as `variables` defines them."""
    found = [variables.get(name) for name in SECRET_VARIABLES]
    extra = variables.get(SITE_SECRETS) or []
    if isinstance(extra, (str, bytes, Mapping)) or not isinstance(extra, Iterable):
        raise ValueError(f"{SITE_SECRETS} must be a list of secret values, got {type(extra).__name__}")
    return [str(v) for v in found + list(extra) if v]


def secret_values(values: Iterable[Any]) -> List[str]:
    """The distinct usable secret strings, longest first (so a secret that contains another goes first)."""
    unique = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LEN}
    return sorted(unique, key=lambda v: (-len(v), v))


def redact_text(text: str, secrets: Iterable[Any]) -> str:
    """`text` with every secret value and every value of a secret-named pair replaced by MARK."""
    for secret in secret_values(secrets):
        text = text.replace(secret, MARK)
    return _PAIR.sub(lambda m: m.group("name") + m.group("sep") + MARK, text)


def _redact_env_value(name: str, value: str, secrets: List[str]) -> str:
    if SECRET_NAME.search(name) or any(secret in value for secret in secrets):
        return MARK
    return value


def redact_env(env: Any, secrets: Iterable[Any]) -> Any:
    """A container environment, as Docker's ["K=V", ...] or as a mapping, with secret values replaced."""
    values = secret_values(secrets)
    if isinstance(env, Mapping):
        return {k: _redact_env_value(str(k), str(v), values) for k, v in env.items()}
    out = []
    for entry in env:
        name, sep, value = str(entry).partition("=")
        out.append(name + sep + _redact_env_value(name, value, values) if sep else redact_text(name, values))
    return out


def redact_argv(argv: Iterable[Any], secrets: Iterable[Any]) -> List[str]:
    """An argument list with the argument after a secret flag, `--flag=value` forms and secret values hidden."""
    values = secret_values(secrets)
    out: List[str] = []
    hide_next = False
    for arg in (str(a) for a in argv):
        flag, sep, _ = arg.partition("=")
        if hide_next:
            out.append(MARK)
        elif sep and flag in SECRET_FLAGS:
            out.append(flag + "=" + MARK)
        else:
            out.append(redact_text(arg, values))
        hide_next = not hide_next and not sep and arg in SECRET_FLAGS
    return out


def secret_key(key: Any) -> bool:
    """A mapping key that labels its value secret: an engine flag (a profile's `args: {--api-key: ...}`) or a
    secret name (`hf_token`, `VLLM_API_KEY`)."""
    return isinstance(key, str) and (key in SECRET_FLAGS or bool(SECRET_NAME.search(key)))


def redact_inspect(doc: Any, secrets: Iterable[Any]) -> Any:
    """A copy of a docker inspect document (or any JSON-like value) with secrets hidden: `Env` lists and
    mappings by name and value, argument lists (ARGV_KEYS: `Cmd`, `Args`, `Entrypoint`, the doctor's `cmd`, a
    serve spec's `command`) by flag and value, a scalar under a secret key (secret_key), every other string by
    value."""
    values = secret_values(secrets)
    return _walk(doc, values)


def _walk(node: Any, values: List[str]) -> Any:
    if isinstance(node, Mapping):
        out: Dict[Any, Any] = {}
        for key, item in node.items():
            if key in ("Env", "env") and isinstance(item, (list, Mapping)):
                out[key] = redact_env(item, values)
            elif key in ARGV_KEYS and isinstance(item, list):
                out[key] = redact_argv(item, values)
            elif secret_key(key) and isinstance(item, (str, int, float)) and not isinstance(item, bool):
                out[key] = MARK
            else:
                out[key] = _walk(item, values)
        return out
    if isinstance(node, (list, tuple)):
        return [_walk(item, values) for item in node]
    if isinstance(node, str):
        return redact_text(node, values)
    return node


def holds_secret(value: Any, secrets: Iterable[Any]) -> bool:
    """Whether redact would change `value`: it carries a secret value, or a value labelled secret."""
    return redact(value, secrets) != value


def redact(value: Any, secrets: Iterable[Any]) -> Any:
    """Text through redact_text, structures through redact_inspect, anything else as it is."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, (Mapping, list, tuple)):
        return redact_inspect(value, secrets)
    return value
