"""Write catalog entries back as TOML (the stdlib reads TOML but does not write it)."""

from __future__ import annotations

import json
import math
from typing import Any

from fabricplan.catalog.models import Entry


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML cannot hold {v}")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a JSON string is a valid TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        inner = ", ".join(f"{k} = {_value(x)}" for k, x in v.items() if x is not None)
        return "{ " + inner + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def entries_to_toml(entries: list[Entry], header: str = "") -> str:
    """TOML text that :func:`fabricplan.catalog.load_catalog` reads back to equal entries."""
    lines = [f"# {line}" for line in header.splitlines()]
    for e in entries:
        lines += ["", f"[[{e.KIND}]]"]
        lines += [
            f"{k} = {_value(v)}" for k, v in e.model_dump(mode="json").items() if v is not None
        ]
    return "\n".join(lines).lstrip("\n") + "\n"
