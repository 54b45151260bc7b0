"""Megatron-Core's pipeline layout, as a scenario writes it (``workload.parallel.pipeline_layout``):
read and checked here; what each stage then runs is the workload layer's
(:mod:`fabricplan.workload.pipeline_layout`).

The layout (core_v0.14.0, transformer/pipeline_parallel_layer_layout.py) writes the model as
virtual stages (chunks) separated by ``|``: ``E`` the embedding, ``t`` a decoder layer, ``m`` a
multi-token-prediction (MTP) module, ``L`` the loss with the output head; ``(...)*n`` and
``x*n`` repeat, commas are cosmetic. Chunk ``c`` runs on stage ``c % pp``.
"""

from __future__ import annotations

import re
from functools import lru_cache

LAYOUT_SYMBOLS = {
    "E": "the embedding",
    "t": "a decoder layer",
    "m": "an MTP module",
    "L": "the loss",
}


class LayoutError(ValueError):
    """A pipeline layout that cannot be read, or does not fit the model and plan."""


# Symbols a layout may unroll to: far more layers than any model has, and a bound on the work a
# hostile repeat count could ask for.
MAX_LAYOUT_SYMBOLS = 100_000


def _repeat(x: re.Match[str]) -> str:
    times = int(x.group(2))
    if times * len(x.group(1)) > MAX_LAYOUT_SYMBOLS:
        raise LayoutError(f"repeats {x.group(0)!r} to over {MAX_LAYOUT_SYMBOLS:,} symbols")
    return x.group(1) * times


def _unrolled(text: str) -> str:
    s = text.replace(",", "").replace(" ", "")
    s = re.sub(r"\(([^()]+)\)\*(\d+)", _repeat, s)
    s = re.sub(r"(.)\*(\d+)", _repeat, s)
    if len(s) > MAX_LAYOUT_SYMBOLS:
        raise LayoutError(f"unrolls to over {MAX_LAYOUT_SYMBOLS:,} symbols")
    return s


@lru_cache(maxsize=256)
def chunks(text: str) -> tuple[str, ...]:
    """The layout's chunks in order, each a string of ``LAYOUT_SYMBOLS``."""
    parts = tuple(_unrolled(text).split("|"))
    bad = sorted({ch for part in parts for ch in part if ch not in LAYOUT_SYMBOLS})
    if bad:
        known = ", ".join(f"{k} ({v})" for k, v in LAYOUT_SYMBOLS.items())
        raise LayoutError(f"unknown symbol {', '.join(map(repr, bad))}; use {known}")
    return parts


def check_layout(text: str, layers: int, mtp_layers: int, pp: int, vp: int) -> None:
    """Megatron-Core's rules for a layout (validate_layer_layout, and pp x vp chunks)."""
    parts = chunks(text)
    flat = "".join(parts)
    if len(parts) != pp * vp:
        raise LayoutError(f"has {len(parts)} chunks; pp x vp is {pp} x {vp} = {pp * vp}")
    if flat.count("E") != 1 or not flat.startswith("E"):
        raise LayoutError("must begin with the embedding E, once")
    if flat.count("L") != 1 or not flat.endswith("L"):
        raise LayoutError("must end with the loss L, once")
    if flat.count("t") != layers:
        raise LayoutError(f"has {flat.count('t')} decoder layers t; the model has {layers}")
    if flat.count("m") != mtp_layers:
        raise LayoutError(
            f"has {flat.count('m')} MTP modules m; workload.mtp_layers is {mtp_layers}"
        )
    if mtp_layers and ("t" in flat[flat.index("m") :] or "m" not in parts[-1]):
        raise LayoutError("MTP modules m must follow every decoder layer, in the loss's chunk")
