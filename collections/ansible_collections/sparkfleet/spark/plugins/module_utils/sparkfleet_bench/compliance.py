"""The compliance suite's data and scoring: eight record types, "a JSON array of exactly 12 objects", and a
validator for the small JSON Schema subset the item schemas use (standard library only, so no jsonschema
package is needed on the controller or a node).

Pure functions only. Pass per answer (bench method reference 1.4): a natural stop (finish_reason other than
length), exactly 12 objects, nothing around the array (no code fence, no commentary), every object valid.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

ITEMS = 12
ARMS = ("prompt", "constrained")

_S, _I, _N, _B = ({"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"})
# record type -> (what the objects describe, {field: schema}); the order of fields is the order asked for.
RECORDS: dict[str, tuple[str, dict[str, dict[str, str]]]] = {
    "library_books": ("library books", {"title": _S, "author": _S, "year": _I, "isbn": _S, "available": _B}),
    "server_telemetry": ("server telemetry samples", {"hostname": _S, "cpu_percent": _N, "memory_gib": _N,
                                                      "uptime_s": _I, "healthy": _B}),
    "employees": ("employees", {"employee_id": _I, "name": _S, "department": _S, "salary": _N, "remote": _B}),
    "retail_products": ("retail products", {"sku": _S, "name": _S, "price": _N, "stock": _I, "on_sale": _B}),
    "airline_flights": ("airline flights", {"flight": _S, "origin": _S, "destination": _S, "duration_min": _I,
                                            "delayed": _B}),
    "weather_observations": ("weather observations", {"station": _S, "temperature_c": _N, "humidity_pct": _N,
                                                      "wind_kmh": _N, "raining": _B}),
    "invoices": ("invoices", {"invoice_id": _S, "customer": _S, "amount": _N, "items": _I, "paid": _B}),
    "iot_readings": ("IoT sensor readings", {"device_id": _S, "sensor": _S, "value": _N, "battery_pct": _I,
                                             "online": _B}),
}


def item_schema(record: str) -> dict[str, Any]:
    """JSON Schema of one object of a record type: exactly its fields, each of its type."""
    fields = RECORDS[record][1]
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


def array_schema(record: str) -> dict[str, Any]:
    """JSON Schema of the whole answer: an array of exactly 12 objects (the constrained arm's response_format)."""
    return {"type": "array", "items": item_schema(record), "minItems": ITEMS, "maxItems": ITEMS}


def prompt(record: str) -> str:
    """The request: the record type, the count, the item schema verbatim and the output rule."""
    what = RECORDS[record][0]
    return (f"Return a JSON array of exactly {ITEMS} objects describing {what}. Each object must validate "
            f"against this JSON Schema: {json.dumps(item_schema(record), separators=(', ', ': '))}. "
            "Output only the JSON array: no code fence, no commentary.")


def response_format(record: str) -> dict[str, Any]:
    """The constrained arm's OpenAI `response_format` (json_schema, strict)."""
    return {"type": "json_schema", "json_schema": {"name": record, "schema": array_schema(record), "strict": True}}


def prompts_sha256() -> str:
    """Hash of every compliance prompt and schema (recorded beside the other prompts' hash)."""
    blob = "\n".join(prompt(r) + json.dumps(response_format(r), sort_keys=True) for r in sorted(RECORDS))
    return hashlib.sha256(blob.encode()).hexdigest()


_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                       "boolean": (bool,), "object": (dict,), "array": (list,)}


def type_error(value: Any, expected: str) -> Optional[str]:
    """Why value is not of the JSON Schema type (bool is not an integer or a number), or None."""
    if expected in ("integer", "number") and isinstance(value, bool):
        return f"is a boolean, not {expected}"
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        return None
    if not isinstance(value, _TYPES[expected]):
        return f"is {type(value).__name__}, not {expected}"
    return None


def object_error(obj: Any, schema: dict[str, Any]) -> Optional[str]:
    """Why one object does not validate against an item schema, or None."""
    wrong = type_error(obj, "object")
    if wrong:
        return wrong
    fields = schema["properties"]
    missing = [k for k in schema["required"] if k not in obj]
    if missing:
        return f"missing {missing}"
    extra = sorted(k for k in obj if k not in fields)
    if extra and schema.get("additionalProperties") is False:
        return f"extra fields {extra}"
    for key, spec in fields.items():
        wrong = type_error(obj[key], spec["type"])
        if wrong:
            return f"{key} {wrong}"
    return None


def score(record: str, content: str, finish_reason: Optional[str]) -> str:
    """'pass' or the first named failure of one answer."""
    if finish_reason == "length":
        return "stopped by the length limit"
    text = content.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return "not a bare JSON array (code fence or commentary around it)"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"not JSON ({exc})"
    if not isinstance(data, list):
        return "not a JSON array"
    if len(data) != ITEMS:
        return f"{len(data)} objects, not {ITEMS}"
    schema = item_schema(record)
    for index, obj in enumerate(data, 1):
        why = object_error(obj, schema)
        if why:
            return f"object {index}: {why}"
    return "pass"
