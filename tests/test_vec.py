"""The element-wise helpers the step model calls: on one plan's scalars they give exactly what
NumPy gives (NaN and infinities included) as float64 scalars; anything with an array goes to
NumPy unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricplan.workload import Plans, vec

# every float64, the special values included, as Python floats, NumPy scalars and integers
FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
SCALARS = st.one_of(
    FLOATS,
    FLOATS.map(np.float64),
    st.integers(-(2**53), 2**53),
    st.integers(0, 64).map(np.int64),
)


def _same(got: object, want: object) -> None:
    """Exactly NumPy's value, as a float64 scalar (NaN equal to NaN)."""
    assert type(got) is np.float64
    w = np.float64(want)
    assert (np.isnan(got) and np.isnan(w)) or got == w


@given(SCALARS, SCALARS)
def test_maximum_and_minimum_of_scalars_are_numpy_s(a, b):
    _same(vec.maximum(a, b), np.maximum(a, b))
    _same(vec.minimum(a, b), np.minimum(a, b))


@given(st.booleans().map(np.bool_) | st.booleans(), SCALARS, SCALARS)
def test_where_of_scalars_is_numpy_s(cond, a, b):
    _same(vec.where(cond, a, b), np.where(cond, a, b))


@given(SCALARS)
def test_ceil_floor_and_floats_of_scalars_are_numpy_s(x):
    f = np.float64(x)
    _same(vec.ceil(x), np.ceil(f))
    _same(vec.floor(x), np.floor(f))
    _same(vec.floats(x), f)


def test_arrays_go_to_numpy_unchanged():
    a = np.array([1.0, np.nan, -np.inf, 2.5])
    b = np.array([0.5, 1.0, 3.0, np.inf])
    np.testing.assert_array_equal(vec.maximum(a, 1.0), np.maximum(a, 1.0))
    np.testing.assert_array_equal(vec.minimum(2.0, b), np.minimum(2.0, b))
    np.testing.assert_array_equal(vec.where(a > 1, a, b), np.where(a > 1, a, b))
    np.testing.assert_array_equal(vec.where(True, a, 0.0), a)
    np.testing.assert_array_equal(vec.ceil(a), np.ceil(a))
    np.testing.assert_array_equal(vec.floor(b), np.floor(b))
    ints = np.array([1, 2, 3])
    assert vec.floats(ints).dtype == np.float64 and vec.floats(ints).tolist() == [1.0, 2.0, 3.0]
    assert vec.floats(a) is a  # already float64: not copied
    assert vec.bools([1, 0]).tolist() == [True, False]
    assert vec.full(a, 7.0).tolist() == [7.0] * 4
    assert vec.rows(a) is a


def test_one_plan_s_values_and_back():
    assert vec.full(np.float64(3.0), 7.0) == 7.0 and type(vec.full(3.0, 7.0)) is np.float64
    assert vec.rows(np.float64(2.5)).tolist() == [2.5]
    assert type(vec.bools(1)) is np.bool_
    # a division by a zero that vec made stays NumPy's: inf and a warning, not an exception
    with pytest.warns(RuntimeWarning):
        assert vec.floats(1.0) / vec.maximum(0, -1.0) == np.inf


def test_a_plan_s_scalars_are_its_one_row():
    p = Plans.of(tp=2, pp=4, dp=8, global_batch=64, seq_len=4096, sp=True, recompute="full")
    one = p.scalars
    assert len(one) == 1 and one.recompute == "full"
    assert type(one.tp) is np.float64 and one.tp == 2.0 and type(one.sp) is np.bool_
    assert one.microbatches == 64 / 8 and one.sp_split == 2.0
    with pytest.raises(ValueError, match="2 plans, not one"):
        _ = Plans.stack([p, p]).scalars
