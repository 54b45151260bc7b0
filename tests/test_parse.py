"""nccl-tests parsing: the real files, each format variant, and fuzzing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricplan.nccltests import ParseError, parse, parse_file
from fabricplan.nccltests.parse import parse_row
from nccl_writer import Row, writer_json

DATA = Path(__file__).resolve().parents[1] / "src/fabricplan/validation/data/nccl-tests"
HEADER = """#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""  # noqa: E501
ROWS = """     1048576        262144     float     sum      -1    71.93   14.58   27.33      0    71.47   14.67   27.51      0
    67108864      16777216     float     sum      -1    466.1  143.99  269.98      0    466.3  143.91  269.83      0
"""  # noqa: E501


def test_real_files():
    a = parse_file(next(DATA.glob("01_*")))
    assert len(a) == 7
    first = a[0]
    assert first.op == "all_reduce" and first.nranks == 16 and len(first.hosts) == 2
    assert first.results[0].size_bytes == 8 and first.results[0].time_us == 68.52
    assert first.results[0].inplace_time_us == 24.70
    assert first.results[-1].busbw_GBps == 469.21
    assert first.avg_busbw_GBps == 139.56
    assert a[6].env["NCCL_ALGO"] == "Ring"
    assert a[2].inferred_nranks() == 64  # rank lines elided: from busbw/algbw = 2(n-1)/n
    slurm = parse_file(next(DATA.glob("02_*")))
    assert [len(r.results) for r in slurm] == [6, 11, 11]
    assert slurm[1].results[0].wrong is None  # "N/A"
    roce = parse_file(next(DATA.glob("10_*")))[0]
    assert roce.gdr is False and roce.transport == "roce" and roce.nics_in_use == 1
    assert len(roce.results) == 13 and roce.env["NCCL_ALGO"] == "RING"


def test_without_root_column_and_without_hash():
    text = (
        "size count type redop time algbw busbw error time algbw busbw error\n"
        "1024 256 float sum 25.1 0.04 0.08 0 25.0 0.04 0.08 0\n"
    )
    r = parse(text)[0].results[0]
    assert r.root is None and r.redop == "sum" and r.busbw_GBps == 0.08


def test_all_gather_rows_have_no_reduction():
    r = parse_row("1048576 16384 float none -1 40.0 26.2 24.6 0 39.0 26.9 25.2 0")
    assert r.redop == "none" and r.root == -1


@pytest.mark.parametrize("prefix", ["", " 0: ", "[1,0]<stdout>:", "node17: ", " 12: "])
def test_launcher_prefixes(prefix):
    text = "".join(prefix + line + "\n" for line in (HEADER + ROWS).splitlines())
    run = parse(text)[0]
    assert [r.size_bytes for r in run.results] == [1048576, 67108864]
    assert run.results[1].busbw_GBps == 269.98


def test_several_runs_and_metadata():
    text = (
        "# nThread 1 nGpus 1 minBytes 8\n#  Rank  0 Group  0 Pid 1 on a device 0 [0x1] H100\n"
        "#  Rank  1 Group  0 Pid 2 on b device 0 [0x1] H100\n"
        + HEADER
        + ROWS
        + "# Avg bus bandwidth    : 148.6\n"
        "x:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n"
        "# nThread 1 nGpus 1 minBytes 8\nhost:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB "
        "[1]mlx5_1:1/IB ; OOB eth0\n" + HEADER + ROWS + "# Collective test concluded: all_gather\n"
    )
    first, second = parse(text)
    assert first.nranks == 2 and first.hosts == {"a", "b"} and first.avg_busbw_GBps == 148.6
    assert first.gdr is True
    assert second.nics_in_use == 2 and second.transport == "ib" and second.op == "all_gather"


ROW_1G = Row(2**30, 2**28, 2323.0, 462.22, 866.66, times_us=[2300.0, 2320.0, 2349.0])


@pytest.mark.parametrize("version", [1, 2, 3])
def test_json_as_each_writer_version_lays_it_out(version):
    text = writer_json(
        [Row(8, 2, 25.31, 0.0, 0.0), ROW_1G],
        version=version,
        env=("NCCL_ALGO=Ring", "HOME=/root"),
        processes=["a", "a", "b", "b"],
    )
    run = parse(text)[0]
    assert run.op == "all_reduce" and run.env == {"NCCL_ALGO": "Ring"}
    assert run.nranks == 4 and run.hosts == {"a", "b"} and run.gpus_per_host() == 2
    assert run.nccl_version == "2.26.2" and run.avg_busbw_GBps == 12.5
    first, big = run.results
    assert (first.size_bytes, first.root, first.redop, first.wrong) == (8, -1, "sum", 0)
    assert (big.time_us, big.algbw_GBps, big.busbw_GBps) == (2323.0, 462.22, 866.66)
    assert big.inplace_busbw_GBps == 866.66
    # per-iteration timing is written from version 2: its spread, % of the mean
    assert big.cv_pct == (pytest.approx(0.866, abs=1e-3) if version >= 2 else None)
    assert run.evidence["NCCL_ALGO"][0].text == "NCCL_ALGO=Ring"


def test_json_one_process_driving_eight_gpus_lists_one_device():
    run = parse(writer_json([ROW_1G], processes=["solo"], ngpus=8))[0]
    assert run.nranks == 8 and run.hosts == {"solo"} and run.gpus_per_host() == 8


def test_json_null_out_of_place_reads_the_in_place_half():
    rows = [Row(2**20, 2**18, 50.0, 20.97, 39.32, null_out_of_place=True), ROW_1G]
    run = parse(writer_json(rows, check=False))[0]
    assert run.results[0].time_us == 50.0 and run.results[0].wrong is None
    assert run.results[0].inplace_time_us is None
    # a record the writer closed before any figure (an early error) is not a measurement
    doc = json.loads(writer_json([ROW_1G]))
    doc["results"].append(
        {
            "size": 2**31,
            "count": 2**29,
            "type": "float",
            "redop": "sum",
            "root": "    -1",
            "out_of_place": None,
        }
    )
    assert len(parse(json.dumps(doc))[0].results) == 1


def test_older_nccl_version_codes():
    assert parse(writer_json([ROW_1G], nccl_version=2804))[0].nccl_version == "2.8.4"


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (Row(2**30, 2**28, 2323.0, "nan", 866.66), "alg_bw should be a finite number >= 0"),
        (Row(2**30, 2**28, 2323.0, 462.22, -1.0), "bus_bw should be a finite number >= 0"),
        (Row(2**30, 2**28, "nan", 462.22, 866.66), "time should be a finite number >= 0"),
    ],
)
def test_json_values_are_checked_as_in_text(row, match):
    with pytest.raises(ParseError, match=f"JSON run 1, result 1: {match}"):
        parse(writer_json([row]))
    text_row = f"{row.size} {row.count} float sum -1 {row.time_us} {row.algbw} {row.busbw} 0"
    with pytest.raises(ParseError, match=match.replace("_bw", "bw")):
        parse(text_row)


def test_json_without_results_names_the_run():
    with pytest.raises(ParseError, match="result 1: expected size, count, type"):
        parse(json.dumps({"results": [{"size": 1, "out_of_place": {"time": 2.0}}]}))
    with pytest.raises(ParseError, match="JSON input has no results"):
        parse(json.dumps({"results": [{"size": 1}]}))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**40), st.floats(0.01, 1e7), st.floats(0, 1e4), st.floats(0, 1e4)
        ),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from([1, 2, 3]),
)
def test_json_rows_round_trip(rows, version):
    written = [Row(s, s // 4, round(t, 6), round(a, 6), round(b, 6)) for s, t, a, b in rows]
    got = parse(writer_json(written, version=version))[0].results
    assert [(r.size_bytes, r.time_us, r.algbw_GBps, r.busbw_GBps) for r in got] == [
        (w.size, w.time_us, w.algbw, w.busbw) for w in written
    ]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("hello world\n", "no nccl-tests result rows"),
        (HEADER + "1024 256 float sum -1 25.1 0.04\n", "line 4: expected time, algbw"),
        (HEADER + "1024 256 float sum -1 25.1 fast 0.08 0 1 2 3 0\n", "line 4: algbw should"),
        (HEADER + "1024 256 float sum -1 25.1 0.04 0.08 x 1 2 3 0\n", "#wrong should"),
        ('{"results": 3}', "no 'results' list"),
        ("{not json", "invalid JSON"),
    ],
)
def test_malformed_input_names_the_line(text, match):
    with pytest.raises(ParseError, match=match):
        parse(text)


def test_unreadable_file(tmp_path):
    with pytest.raises(ParseError, match="cannot read"):
        parse_file(tmp_path / "nope.txt")


# --- fuzzing -------------------------------------------------------------------------------

numbers = st.floats(min_value=0, max_value=1e7, allow_nan=False).map(lambda x: round(x, 2))
rows = st.tuples(
    st.integers(0, 2**40),
    st.integers(0, 2**38),
    st.sampled_from(["float", "half", "bfloat16"]),
    st.sampled_from(["sum", "max", "none", None]),
    st.one_of(st.none(), st.integers(-1, 63)),
    numbers,
    numbers,
    numbers,
    st.one_of(st.just("N/A"), st.integers(0, 9)),
)


def fmt_row(r, cv: float | None = None, stamp: bool = False) -> str:
    """A row as nccl-tests prints it; with ``cv`` the -I per-iteration columns (i_min, i_max,
    i_p99, i_cv%) after each half, with ``stamp`` the -S timestamp at the end."""
    size, count, dtype, redop, root, t, a, b, w = r
    cols = [size, count, dtype] + ([redop] if redop else []) + ([root] if root is not None else [])
    half = [t, a, b, w] + ([t, t, t, cv] if cv is not None else [])
    return "  ".join(
        map(str, [*cols, *half, *half] + (["2026-11-25", "09:30:00"] if stamp else []))
    )


@settings(max_examples=150, deadline=None)
@given(
    st.lists(rows, min_size=1, max_size=8),
    st.sampled_from(["", " 3: ", "[0,1]<stdout>:", "gpu-node-1: "]),
    st.booleans(),
    st.one_of(st.none(), numbers),
    st.booleans(),
)
def test_rows_round_trip(rs, prefix, with_header, cv, stamp):
    body = (HEADER if with_header else "") + "\n".join(fmt_row(r, cv, stamp) for r in rs)
    text = "\n".join(prefix + line for line in body.splitlines())
    results = parse(text)[0].results
    assert len(results) == len(rs)
    for got, r in zip(results, rs, strict=True):
        assert (got.size_bytes, got.count, got.dtype) == r[:3]
        assert (got.time_us, got.algbw_GBps, got.busbw_GBps) == r[5:8]
        assert (got.inplace_time_us, got.inplace_busbw_GBps) == (r[5], r[7])
        assert got.wrong == (None if r[8] == "N/A" else r[8])
        assert got.cv_pct == cv


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_text_parses_or_fails_cleanly(text):
    try:
        runs = parse(text)
    except ParseError as exc:
        assert str(exc)
    else:
        assert all(run.results for run in runs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=40), st.builds(fmt_row, rows)), max_size=10))
def test_mixed_lines_parse_or_fail_cleanly(lines):
    try:
        parse("\n".join(lines))
    except ParseError as exc:
        assert str(exc)
