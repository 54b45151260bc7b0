"""Figures as a report prints them: whole, with thousands separators and their unit, never
rounded to a few significant digits (a table is read by someone who checks the arithmetic)."""

from __future__ import annotations

import math

NONE = "\u2013"  # an en dash: a figure that does not apply (a rental has no capex)


def _missing(v: float | None) -> bool:
    """None, or a float that is not a figure (inf, nan)."""
    return v is None or not math.isfinite(v)


def money(v: float | None) -> str:
    """Whole dollars, cents below $100: $26,965,307; $17.57; -$1,234."""
    if v is None or _missing(v):
        return NONE
    if v < 0:
        return "-" + money(-v)
    return f"${v:,.2f}" if v < 100 else f"${v:,.0f}"


def number(v: float | None, digits: int = 0, unit: str = "") -> str:
    """``4,495,606 GPU-h``, ``17.677 s``: fixed decimals, thousands separators."""
    if v is None or _missing(v):
        return NONE
    text = f"{v:,.{digits}f}"
    return f"{text} {unit}" if unit else text


def seconds(v: float | None, digits: int = 3) -> str:
    return number(v, digits, "s")


def millis(v: float | None, digits: int = 2) -> str:
    return number(None if v is None else v * 1e3, digits, "ms")


def days(v: float | None) -> str:
    return number(v, 1, "days")


def share(v: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.2073 -> 20.7 %."""
    if v is None or _missing(v):
        return NONE
    return f"{v * 100:.{digits}f} %"


def gpus(n: int | None) -> str:
    return NONE if n is None else f"{n:,} GPUs"


def size_bytes(n: int) -> str:
    """A message size as nccl-tests users write it: 8 B, 64 KiB, 1 MiB, 8 GiB."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:g} {unit}" if v == int(v) else f"{v:.2f} {unit}"
    return f"{n} B"


def multiplier(v: float | None) -> str:
    return NONE if v is None or _missing(v) else f"x{v:.2f}"
