"""Grading and validation against the published runs (the accuracy figures are asserted)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricplan.collectives import build_system
from fabricplan.nccltests import parse
from fabricplan.nccltests.compare import compare, env_selection, env_system
from fabricplan.nccltests.grade import PASS_BW_RATIO, grade
from fabricplan.validation import check_runs
from fabricplan.validation.nccl_runs import BANDS, accuracy_by_family, band_errors


@pytest.fixture(scope="module")
def checks():
    return check_runs()


def _tcpx_all_reduce(c) -> bool:
    """The held-back GPUDirect-TCPX all_reduce (2 x A3 High, 12 channels): its plateau is 21 %
    above the model's, which gives each of its channels the 8-channel run's rate (README,
    known limits)."""
    return c.setup["file"].startswith("13_")


def _tcpxo_all_reduce(c) -> bool:
    """The held-back GPUDirect-TCPXO all_reduce (2 x A3 Mega): the model is 1.1-2.9x fast from
    4 MiB up, where Google's own tuner picks the algorithms, and slow on small messages
    (README, known limits)."""
    return c.setup["file"].startswith("14_")


def test_every_run_gets_the_expected_grade_and_cause(checks):
    for c in checks:
        assert c.grade_ok, (c.setup["select"], c.grade.verdict, [f.code for f in c.grade.findings])
    tcpx = next(c for c in checks if _tcpx_all_reduce(c))
    # Ring and Simple are TCPX's own deployment, not a limit to report; it delivers more
    # than the model expects, never less
    assert tcpx.grade.verdict == "pass" and not tcpx.grade.findings
    assert tcpx.grade.bandwidth_ratio == pytest.approx(1.21, abs=0.01)
    assert set(tcpx.comparison.algorithm) == {"Ring"}


def test_a_shortfall_only_at_the_plateau_is_not_passed(checks):
    """Run 01 C (8 nodes, default QPs) delivers 96-108 % of the expected busbw up to 512 MiB and
    85-89 % from 1 GiB: the median over sizes >= 64 MiB alone would pass it."""
    c = next(c for c in checks if c.setup["select"] == "(C)")
    large = c.comparison.busbw_ratio[c.comparison.sizes >= 64 * 2**20]
    assert float(np.median(large)) > PASS_BW_RATIO
    assert c.grade.verdict == "warn" and c.grade.bandwidth_ratio < PASS_BW_RATIO


def test_accuracy_on_healthy_runs(checks):
    healthy = [c for c in checks if c.setup["health"] == "healthy"]
    assert len(healthy) >= 6
    for c in healthy:
        # the known misses: 26.1 % (TCPX all_reduce), 16.3 % (TCPXO all_reduce: 1.5-2x fast
        # at 64-128 MiB, where the run is far slower than its tree or NVLS-Tree can be)
        bound = 0.27 if _tcpx_all_reduce(c) else 0.17 if _tcpxo_all_reduce(c) else 0.10
        assert c.busbw_error is not None and c.busbw_error <= bound, c.setup["select"]
        if c.time_error is not None and not c.setup.get("held_back"):
            assert c.time_error <= 0.25, c.setup["select"]


def test_tcpx_mid_sizes_follow_its_per_step_time(checks):
    """TCPX's per-step time is set from the built-on all_gather; the held-back all_reduce's
    1-32 MiB sizes (1.6-2.2 ms each, where the model without it had 0.1-0.9 ms) come out
    within 12 % (-9 to +11 %)."""
    tcpx = next(c for c in checks if _tcpx_all_reduce(c))
    cmp = tcpx.comparison
    mid = (cmp.sizes >= 2**20) & (cmp.sizes <= 32 * 2**20)
    err = cmp.measured_busbw_GBps[mid] / cmp.expected_busbw_GBps[mid] - 1
    assert mid.sum() == 6 and np.all(np.abs(err) <= 0.12)


def test_tcpxo_mid_sizes_follow_its_per_step_time(checks):
    """TCPXO's per-step time is set from the built-on A3 Mega all_gather (64 KiB-8 GiB); the
    held-back one of the dstack documentation comes out within 8 % at 8-32 MiB (they were 18-60 %
    fast without it) and within 2 % at its median from 64 MiB up."""
    tcpxo = next(
        c for c in checks if c.setup["fabric"] == "tcpxo-200g" and c.setup["file"].startswith("11_")
    )
    assert tcpxo.setup.get("held_back")
    cmp = tcpxo.comparison
    mid = (cmp.sizes >= 2**20) & (cmp.sizes <= 32 * 2**20)
    err = cmp.measured_busbw_GBps[mid] / cmp.expected_busbw_GBps[mid] - 1
    assert mid.sum() == 3 and np.all(np.abs(err) <= 0.08)
    assert tcpxo.busbw_error <= 0.02


def test_accuracy_by_family_on_the_held_back_runs(checks):
    """The runs nothing was set from: large sizes within 10 % per family but TCP (the TCPX and
    TCPXO all_reduces, above), as recorded in README; mid sizes and small-message time are
    known to be worse (README, known limits)."""
    rows = {(b.family, b.band): b for b in accuracy_by_family(checks) if b.held_back}
    assert rows[("all", BANDS[0])].median_abs_error <= 0.05  # the target; 4.4 %
    for fam in ("infiniband", "roce"):
        assert rows[(fam, BANDS[0])].median_abs_error <= 0.10, fam
    assert rows[("tcp", BANDS[0])].median_abs_error <= 0.20
    assert rows[("all", BANDS[1])].median_abs_error <= 0.15
    assert rows[("all", BANDS[0])].runs == 6


def test_accuracy_over_every_run_pools_the_built_on_and_held_back_points(checks):
    """Every healthy run together: each band's points are the built-on and held-back ones,
    its median theirs pooled (3.5 %, 12.6 % and 13.7 % today, the small messages between the
    built-on 9.3 % and the held-back 22.4 %)."""
    acc = accuracy_by_family(checks)
    rows = {(b.held_back, b.family, b.band): b for b in acc}
    for band in BANDS:
        built, held, both = (rows[(h, "all", band)] for h in (False, True, None))
        assert both.points == built.points + held.points
        assert both.runs == built.runs + held.runs
        healthy = [c for c in checks if c.setup["health"] == "healthy"]
        errs = np.concatenate([band_errors(c.comparison, band) for c in healthy])
        assert both.median_abs_error == pytest.approx(float(np.median(errs)))
    assert rows[(None, "all", BANDS[0])].median_abs_error <= 0.05
    assert rows[(None, "all", BANDS[1])].median_abs_error <= 0.15
    small = rows[(None, "all", BANDS[2])].median_abs_error
    assert rows[(False, "all", BANDS[2])].median_abs_error < small <= 0.15
    assert rows[(True, "all", BANDS[2])].median_abs_error > 0.15


def test_efa_is_predicted_from_the_plugins_figures(checks):
    """p4de (4 x 100G, Tree/Simple with the 2-node halving: Simple is all its plugin lets NCCL
    run) within 6 % at >= 64 MiB (5.1 %) and within 15 % from 1 to 32 MiB, where it was 21-43 %
    optimistic on LL128; p5 (32 ports as 8 devices of 4 rails) within 5 % at >= 64 MiB;
    small-message time within 20 %."""
    efa = {
        c.setup["select"]: c for c in checks if c.family == "srd" and c.setup["health"] == "healthy"
    }
    assert efa["(p4de)"].busbw_error <= 0.06 and efa["(p5)"].busbw_error <= 0.05
    assert efa["(p4de)"].time_error <= 0.2 and efa["(p5)"].time_error <= 0.2
    cmp = efa["(p4de)"].comparison
    mid = (cmp.sizes >= 2**20) & (cmp.sizes <= 32 * 2**20)
    err = cmp.measured_busbw_GBps[mid] / cmp.expected_busbw_GBps[mid] - 1
    assert mid.sum() == 6 and np.median(np.abs(err)) <= 0.15


def test_gdr_off_is_the_cause_not_the_fabric(checks):
    roce = next(c for c in checks if c.setup["fabric"] == "roce-400g")
    codes = [f.code for f in roce.grade.findings]
    assert codes[0] == "gdr_off"
    assert roce.grade.bandwidth_ratio == pytest.approx(15.0 / 47.0, rel=0.02)


def test_env_selection():
    assert env_selection({"NCCL_ALGO": "Ring"}) == (["ring"], None)
    algos, protos = env_selection({"NCCL_ALGO": "^nvls,nvlstree", "NCCL_PROTO": "Simple"})
    assert "nvls" not in algos and "ring" in algos and protos == ["Simple"]
    assert env_selection({}) == (None, None)


def test_cta_limits_clamp_nvls_channels():
    h100 = build_system("h100", 8, "ib-ndr")
    assert h100.nvls_channels == 16  # nvls.cc default on Hopper
    assert env_system({"NCCL_MIN_CTAS": "24"}, h100).nvls_channels == 24
    assert env_system({"NCCL_MAX_CTAS": "8"}, h100).nvls_channels == 8
    assert env_system({"NCCL_MIN_CTAS": "x"}, h100) is h100


def test_more_nvls_channels_lengthen_the_tree_fill():
    """Each chunk now crosses 24 channels' worth of bytes per step: mid sizes pay a longer
    fill, the bandwidth ceiling does not move."""
    h100 = build_system("h100", 8, "ib-ndr")
    text = "\n".join(
        f"{s} {s // 4} float sum -1 100.0 1.0 1.0 0 100.0 1.0 1.0 0" for s in (2**28, 2**33)
    )
    run = parse(text)[0]
    base = compare(run, h100, "all_reduce").expected_busbw_GBps
    run.env["NCCL_MIN_CTAS"] = "24"
    more = compare(run, h100, "all_reduce").expected_busbw_GBps
    assert more[0] < 0.95 * base[0]
    assert more[1] == pytest.approx(base[1], rel=1e-6)


def _run(busbw: float, time_small: float = 25.0):
    rows = [f"{8} 2 float sum -1 {time_small} 0.00 0.00 0 {time_small} 0.00 0.00 0"]
    size = 2**30
    t = size / (busbw / 1.875) / 1e3
    rows.append(
        f"{size} {size // 4} float sum -1 {t:.1f} {busbw / 1.875:.2f} {busbw:.2f} 0 "
        f"{t:.1f} {busbw / 1.875:.2f} {busbw:.2f} 0"
    )
    return parse("\n".join(rows))[0]


@pytest.mark.parametrize(
    ("busbw", "small_us", "verdict"),
    [(455, 25, "pass"), (380, 25, "warn"), (200, 25, "fail"), (455, 50, "warn"), (455, 80, "fail")],
)
def test_verdict_thresholds(busbw, small_us, verdict):
    system = build_system("h100", 2, "ib-ndr")
    run = _run(busbw, small_us)
    assert grade(run, system, compare(run, system, "all_reduce")).verdict == verdict


def test_socket_fallback_and_missing_nics_fail():
    system = build_system("h100", 2, "ib-ndr")
    run = _run(455)
    run.transport, run.nics_in_use = "socket", 4
    g = grade(run, system, compare(run, system, "all_reduce"))
    assert g.verdict == "fail"
    assert {"socket_transport", "fewer_nics"} <= {f.code for f in g.findings}
