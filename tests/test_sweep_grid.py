"""``--grid`` parsing: values typed and range-checked by the scenario field they set."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.sweep.grid import (
    MAX_VALUES_PER_KEY,
    GridError,
    count,
    parse_axis,
    parse_grid,
    points,
    range_values,
)


def test_lists_are_typed_by_the_field():
    a = parse_axis("cluster.gpus=256,512")
    assert a.values == (256, 512) and a.kind == "int"
    b = parse_axis("costs.gpu_hour_price=2,2.5")
    assert b.values == (2.0, 2.5) and all(isinstance(v, float) for v in b.values)
    assert b.kind == "float"
    m = parse_axis("organization.network_maturity=low,high")
    assert m.values == ("low", "high") and m.kind == "text"
    f = parse_axis("cluster.fabric=ib-ndr,[ib-ndr, roce-400g]")
    assert f.values == (["ib-ndr"], ["ib-ndr", "roce-400g"])
    assert parse_axis("workload.overlap_dp=true,false").values == (True, False)


def test_ranges_geometric_and_arithmetic():
    assert parse_axis("cluster.gpus=256..8192:x2").values == (256, 512, 1024, 2048, 4096, 8192)
    assert parse_axis("costs.gpu_hour_price=2..4:+0.5").values == (2.0, 2.5, 3.0, 3.5, 4.0)
    assert parse_axis("costs.pue=1.1..1.3:+0.1").values == (1.1, 1.2, 1.3)
    assert parse_axis("workload.parallel.pp=1..4").values == (1, 2, 3, 4)
    # a geometric range of whole numbers: rounded, repeats dropped
    assert parse_axis("cluster.gpus=8..20:x1.5").values == (8, 12, 18)


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ("cluster.gpu=h100", None, None),  # fine: a text field
        ("cluster.gpus=0,8", "cluster.gpus", "outside the allowed range, above 0 to 1,000,000"),
        ("cluster.gpus=2000000", "cluster.gpus", "outside the allowed range"),
        ("costs.pue=0.5", "costs.pue", "outside the allowed range, 1.0 to 3.0"),
        ("cluster.gpus=8.5", "cluster.gpus", "whole number"),
        ("cluster.gpus=many", "cluster.gpus", "valid integer"),
        ("cluster.gpu_count=8", "cluster.gpu_count", "unknown key; allowed under cluster"),
        ("cluster.topology=x", "cluster.topology", "is a section"),
        ("organization.network_maturity=mid", "organization.network_maturity", "'low'"),
        ("cluster.gpus=8..4:x2", "cluster.gpus", "ends (4) below its start (8)"),
        ("cluster.gpus=8..64:x1", "cluster.gpus", "factor must be above 1"),
        ("cluster.gpus=8..64:+0", "cluster.gpus", "step must be above 0"),
        ("cluster.gpus=8,8", "cluster.gpus", "lists a value twice"),
        ("cluster.gpus", "--grid", "expected KEY=V1,V2"),
        ("cluster.gpus=8,,16", "cluster.gpus", "empty value"),
    ],
)
def test_errors_name_the_key_the_value_and_what_is_allowed(spec, field, words):
    if field is None:
        parse_axis(spec)
        return
    with pytest.raises(GridError) as exc:
        parse_axis(spec)
    (p,) = exc.value.problems
    assert p.field == field and words in p.message


def test_grid_wide_checks():
    with pytest.raises(GridError) as exc:
        parse_grid(["cluster.gpus=8,16", "cluster.gpus=32"])
    assert "more than one --grid" in str(exc.value)
    with pytest.raises(GridError):
        parse_grid([])
    with pytest.raises(GridError) as exc:
        parse_grid(["cluster.gpus=1..1000", "costs.pue=1..3:+0.001"])
    assert "combinations; at most" in str(exc.value)
    # every problem at once
    with pytest.raises(GridError) as exc:
        parse_grid(["cluster.gpus=0", "costs.pue=9"])
    assert [p.field for p in exc.value.problems] == ["cluster.gpus", "costs.pue"]


def test_points_vary_the_last_key_fastest():
    axes = parse_grid(["cluster.gpus=8,16", "costs.pue=1.1,1.2"])
    assert count(axes) == 4
    assert list(points(axes))[:2] == [
        {"cluster.gpus": 8, "costs.pue": 1.1},
        {"cluster.gpus": 8, "costs.pue": 1.2},
    ]


@settings(max_examples=200, deadline=None)
@given(
    start=st.floats(0.01, 1e4),
    factor=st.floats(1.01, 16),
    span=st.floats(1, 1e4),
)
def test_geometric_range_properties(start, factor, span):
    end = start * span
    try:
        values = range_values("k", start, end, "x", factor)
    except GridError as exc:  # only when too many
        assert "values; at most" in str(exc)
        return
    assert values[0] == pytest.approx(start)
    assert all(b > a for a, b in itertools.pairwise(values))
    assert values[-1] <= end * (1 + 1e-9)
    assert values[-1] * factor > end * (1 - 1e-9)  # no value short of END is left out
    assert len(values) <= MAX_VALUES_PER_KEY


@settings(max_examples=200, deadline=None)
@given(start=st.integers(1, 10_000), step=st.integers(1, 500), n=st.integers(0, 50))
def test_arithmetic_int_range_matches_python_range(start, step, n):
    end = start + n * step + step // 2
    a = parse_axis(f"cluster.gpus={start}..{end}:+{step}")
    assert a.values == tuple(range(start, end + 1, step))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 1_000_000), min_size=1, max_size=20, unique=True))
def test_lists_round_trip(values):
    a = parse_axis("cluster.gpus=" + ",".join(map(str, values)))
    assert a.values == tuple(values)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_is_taken_or_refused_with_the_key(value):
    try:
        a = parse_axis(f"costs.pue={value!r}")
    except GridError as exc:
        assert all(p.field == "costs.pue" for p in exc.problems)
        return
    assert math.isfinite(a.values[0]) and 1.0 <= a.values[0] <= 3.0
