"""The cost of one run and of the share of it a fabric wastes (seed 001's arithmetic)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0
DAYS_PER_YEAR = 365.0
HOURS_PER_WEEK = 7 * HOURS_PER_DAY
HOURS_PER_YEAR = DAYS_PER_YEAR * HOURS_PER_DAY
MONTHS_PER_YEAR = 12
# Below this, ``dollars`` keeps the cents: a short rented run's loss is cents, not $0.
DOLLARS_WITH_CENTS = 1000.0


@dataclass(frozen=True)
class RunCost:
    gpus: int
    days: float
    gpu_hour_price: float
    loss: float  # share of the run's GPU-hours lost to the network
    gpu_hours: float
    cost_usd: float
    wasted_gpu_hours: float
    wasted_usd: float
    extra_days: float  # the lost share, made up at the end of the schedule

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def run_cost(gpus: int, days: float, gpu_hour_price: float, loss: float = 0.0) -> RunCost:
    """``gpus`` busy for ``days`` at ``gpu_hour_price``; ``loss`` of those GPU-hours wasted.

    The waste is a share of the run as booked (seed 001: 5 % of 737,280 GPU-hours is 36,864),
    and making it up takes the same share of the schedule again.
    """
    gpu_hours = gpus * days * HOURS_PER_DAY
    wasted = gpu_hours * loss
    return RunCost(
        gpus=gpus,
        days=days,
        gpu_hour_price=gpu_hour_price,
        loss=loss,
        gpu_hours=gpu_hours,
        cost_usd=gpu_hours * gpu_hour_price,
        wasted_gpu_hours=wasted,
        wasted_usd=wasted * gpu_hour_price,
        extra_days=days * loss,
    )


def usd(v: float | None, sig: int = 3) -> str:
    """Dollars to ``sig`` significant figures, as people quote them: $711M, $53.1M, $2.2M
    (sig 2); whole dollars under $1,000. Rounded before the unit is picked, so $999,600 is $1M,
    not $1e+03k."""
    if v is None:
        return "-"
    if v == 0:
        return "$0"
    if v < 0:  # a loss or a negative margin: -$582k, as people write it
        return "-" + usd(-v, sig)
    r = float(f"{v:.{sig}g}")
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(r) >= scale:
            return f"${r / scale:g}{unit}"
    return f"${r:,.0f}"  # under $1,000: whole dollars


def dollars(v: float | None) -> str:
    """``usd``, but amounts under $1,000 keep their cents: $0.35, $150.61, $35.2k."""
    if v is not None and abs(v) < DOLLARS_WITH_CENTS:
        return f"-${-v:,.2f}" if v < 0 else f"${v:,.2f}"
    return usd(v)
