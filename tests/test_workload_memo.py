"""Workload evaluations kept across calls (workload.memo): a kept result is the result, and
nothing a caller does to its copy reaches the next caller."""

from __future__ import annotations

from conftest import DESIGN_EXAMPLE
from fabricplan.advise import advise
from fabricplan.scenario import load_scenario
from fabricplan.workload import evaluate_scenario
from fabricplan.workload.memo import MEMO


def test_advice_with_kept_evaluations_is_the_advice_without(cat):
    base = load_scenario(DESIGN_EXAMPLE, catalog=cat)
    other = load_scenario(DESIGN_EXAMPLE, overrides=["costs.power_price_kwh=0.2"], catalog=cat)
    advise(base, cat, break_even=False)  # keeps every evaluation of this cluster and workload
    warm = advise(other, cat, break_even=False).to_dict()
    MEMO.clear()
    cold = advise(other, cat, break_even=False).to_dict()
    assert warm == cold


def test_each_caller_gets_its_own_copy(cat):
    sc = load_scenario(DESIGN_EXAMPLE, catalog=cat)
    first = evaluate_scenario(sc, cat)
    first[0].figures.breakdown["compute_s"] = -1.0  # the records are frozen; their maps are not
    again = evaluate_scenario(sc, cat)
    assert again[0].figures.breakdown["compute_s"] > 0
    assert again[0].to_dict() == evaluate_scenario(sc, cat)[0].to_dict()
