#!/usr/bin/env python3
"""Draft a command's JSON Schema from the outputs the test suite really printed.

    KVTOOL_JSON_SAMPLES=/tmp/samples python -m pytest tests/cli   # keeps every --json printed
    python docs/json/draft.py /tmp/samples                        # writes docs/json/*.schema.json

A draft says what every sample had: a key present in all of them is required, a value seen
as null somewhere may be null, an object whose keys are data (tier names, context lengths,
model names) becomes a map. The committed schemas are these drafts, checked by hand; the
tests (tests/conftest.py) then hold every ``--json`` any test prints to them, so a field that
changes type or goes missing fails the suite.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
MAPS = {"sources"}  # objects whose keys are data wherever they appear (a field -> its source)
DATA_KEY = re.compile(r"^(T[1-4]|\d+|[\w.-]+/[\w./-]+|.*[^\w].*)$")  # tiers, sizes, Hub ids


def merge(schemas: list[dict[str, Any]], name: str = "") -> dict[str, Any]:
    """One schema that every one of ``schemas`` (each from one value) satisfies."""
    types: set[str] = set()
    objects, arrays = [], []
    for schema in schemas:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        types.update(kinds)
        if "object" in kinds:
            objects.append(schema)
        if "array" in kinds:
            arrays.append(schema)
    if {"integer", "number"} <= types:
        types.discard("integer")
    out: dict[str, Any] = {"type": sorted(types)[0] if len(types) == 1 else sorted(types)}
    if objects:
        keys: dict[str, list[dict[str, Any]]] = {}
        mapped = [
            s["additionalProperties"]
            for s in objects
            if isinstance(s.get("additionalProperties"), dict)
        ]
        for schema in objects:
            for key, sub in schema.get("properties", {}).items():
                keys.setdefault(key, []).append(sub)
        dynamic = [k for k in keys if DATA_KEY.match(k)]
        if mapped or name in MAPS or (keys and len(dynamic) == len(keys)):
            values = mapped + [s for subs in keys.values() for s in subs]
            if values:
                out["additionalProperties"] = merge(values)
        else:
            out["properties"] = {key: merge(subs, key) for key, subs in keys.items()}
            out["required"] = sorted(
                k for k in keys if all(k in s.get("properties", {}) for s in objects)
            )
            out["additionalProperties"] = False
    if arrays:
        items = [s["items"] for s in arrays if "items" in s]
        if items:
            out["items"] = merge(items, name)
    return out


def infer(value: Any) -> dict[str, Any]:
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        schema: dict[str, Any] = {"type": "array"}
        if value:
            schema["items"] = merge([infer(v) for v in value])
        return schema
    return {"type": "object", "properties": {k: infer(v) for k, v in value.items()}}


def main() -> None:
    samples = Path(sys.argv[1])
    for folder in sorted(p for p in samples.iterdir() if p.is_dir()):
        outputs = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
        schema = merge([infer(o) for o in outputs])
        schema["properties"]["schema_version"] = {"const": 1}
        schema["properties"]["command"] = {"const": folder.name.replace("-", " ")}
        document = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://kvtool.dev/json/{folder.name}.schema.json",
            "title": f"kvtool {folder.name.replace('-', ' ')} --json",
            **schema,
        }
        path = HERE / f"{folder.name}.schema.json"
        path.write_text(json.dumps(document, indent=2) + "\n")
        print(f"{path.name}: {len(outputs)} samples")


if __name__ == "__main__":
    main()
