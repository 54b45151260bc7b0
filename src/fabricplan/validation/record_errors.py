"""Rerun the training suites and record the model's error on every row in
``recorded_errors.toml``, which the validated envelope reads so that ``step`` and ``advise``
need not rerun 59 published runs (about 1.5 s) to say how close a result is to them.

    python -m fabricplan.validation.record_errors

A test reruns the suites and fails when the recorded errors no longer match the model.
"""

from __future__ import annotations

from fabricplan.congestion.network_backend import DEFAULT_BACKEND
from fabricplan.validation.runs import RECORDED_ERRORS
from fabricplan.validation.training_runs import (
    TrainingCheck,
    check_held_back,
    check_recipes,
    check_training,
)

# Decimals kept: 0.01 percentage points, far below any difference the envelope reports.
ERROR_DECIMALS = 4

HEADER = """\
# The workload model's error (predicted / measured throughput - 1) on every row of
# `fabricplan validate --suite training`, `held-back` and `recipes`, congestion priced by the
# default backend ({backend}). Written by `python -m fabricplan.validation.record_errors`;
# the validated envelope (validation/envelope.py) reads it. Do not edit by hand.
"""


def current_checks() -> list[TrainingCheck]:
    """The three suites rerun with the packaged catalog and the default network backend."""
    return (
        check_training(backend=DEFAULT_BACKEND)
        + check_held_back(backend=DEFAULT_BACKEND)
        + check_recipes(backend=DEFAULT_BACKEND)
    )


def render(checks: list[TrainingCheck]) -> str:
    rows = "".join(
        f'\n[[row]]\nsource = "{c.row["source"]}"\nlabel = "{c.label}"\n'
        f"error = {round(c.error, ERROR_DECIMALS)}\n"
        for c in checks
    )
    return HEADER.format(backend=DEFAULT_BACKEND.name) + rows


def main() -> None:
    checks = current_checks()
    RECORDED_ERRORS.write_text(render(checks))
    print(f"{len(checks)} errors recorded in {RECORDED_ERRORS.name}")


if __name__ == "__main__":
    main()
