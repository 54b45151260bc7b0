"""Rerun every published measurement we compare against: predicted vs measured, and the error."""

from __future__ import annotations

from typing import Any

__all__ = ["RunCheck", "check_runs", "load_manifest"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the workload layer reads the validated envelope from this package
    # at every `step`, and should not pay for the nccl-tests parsers it does not need.
    if name in __all__:
        from fabricplan.validation import nccl_runs

        return getattr(nccl_runs, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
