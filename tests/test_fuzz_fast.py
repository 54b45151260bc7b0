"""The fast subset of the hostile-input fuzz harness (`make fuzz` runs thousands): a few hundred
cases through the command's entry point, each a clean refusal or a result in bounded time and
memory."""

from __future__ import annotations

from fuzz.runner import TARGET_BYTES, TARGET_SECONDS, explore, lines
from fuzz.strategies import FAST_CASES

# Cases per `make test`: about 13 s on a shared 2-core machine (the suite stays under 5 min).
FAST_CASES_COUNT = 240


def test_hostile_inputs_are_refused_cleanly_in_bounded_time_and_memory():
    report = explore(FAST_CASES, FAST_CASES_COUNT, seed_value=20251125)
    summary = report.summary()
    assert summary["cases"] >= FAST_CASES_COUNT * 0.9
    assert not report.bad, "\n".join(lines(report))
    assert max(o.seconds for o in report.outcomes) < TARGET_SECONDS
    assert max(o.peak_bytes for o in report.outcomes) < TARGET_BYTES
    # both kinds of outcome occur: the harness reaches past the parsers
    assert summary["outcomes"].get("refused", 0) > 0 and summary["outcomes"].get("ok", 0) > 0
