"""Hypothesis strategies for hostile command lines: each draws the argv of one `fabricplan`
command and the files it reads (scenario YAML, --set overrides, nccl-tests text and JSON,
catalog overlays, numeric flags), mixing valid values with extreme, malformed and hostile ones."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from hypothesis import strategies as st

# The files a case may write, named as the command line names them.
SCENARIO, RESULTS, CATALOG, FLOWS = "scenario.yaml", "results.txt", "overlay.toml", "flows.csv"


@dataclass(frozen=True)
class FuzzCase:
    """One command line and the files beside it."""

    family: str
    argv: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)

    def describe(self) -> str:
        shown = " ".join(a if len(a) < 80 else a[:77] + "..." for a in self.argv)
        return f"[{self.family}] fabricplan {shown}"


# --- numbers as a user or a broken file writes them -------------------------------------------

EXTREME_NUMBERS = [
    "0",
    "-1",
    "1",
    "2",
    "-0",
    "0.5",
    "1e30",
    "1e308",
    "1e309",
    "-1e309",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "9223372036854775808",
    "99999999999999999999",
    "9" * 400,
    "1" * 5000,
    "0x10",
    "1_000",
    "1e-320",
    "",
    " ",
    "abc",
    "1,2",
    "--",
    "١٢",
]


def numbers(low: int = 0, high: int = 1 << 20) -> st.SearchStrategy[str]:
    """Number text: mostly plausible, often extreme or not a number at all."""
    return st.one_of(
        st.integers(low, high).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.integers(-(2**70), 2**70).map(str),
        st.sampled_from(EXTREME_NUMBERS),
    )


SIZES = st.one_of(
    st.sampled_from(["8", "1K", "64M", "1G", "16G", "1T", "2T", "1e23", "0", "-8", "8.5", "1KiB"]),
    numbers(1, 1 << 34),
)

# --- scenario YAML ------------------------------------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**66), 2**66),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        ["h100", "a100", "ib-ndr", "roce-400g", "auto", "llama3-8b", "llama3-70b", "deepspeed"]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = [
    "name",
    "cluster.gpu",
    "cluster.gpus",
    "cluster.gpus_per_node",
    "cluster.nics_per_node",
    "cluster.fabric",
    "cluster.topology.design",
    "cluster.topology.oversubscription",
    "cluster.topology.spine_oversubscription",
    "cluster.topology.switch",
    "cluster.roce_quality",
    "cluster.placement",
    "cluster.routing",
    "cluster.flow_control.pfc_xoff_kb",
    "cluster.flow_control.buffer_kb",
    "cluster.flow_control.ecn_kmin_kb",
    "workload.kind",
    "workload.model",
    "workload.tokens",
    "workload.seq_len",
    "workload.global_batch",
    "workload.micro_batch",
    "workload.parallel.tp",
    "workload.parallel.pp",
    "workload.parallel.dp",
    "workload.parallel.ep",
    "workload.parallel.cp",
    "workload.parallel.zero",
    "workload.parallel.vp",
    "workload.parallel.pipeline_engine",
    "workload.parallel.pipeline_layout",
    "workload.parallel.ep_dispatch",
    "workload.mtp_layers",
    "workload.recompute_modules",
    "workload.precision",
    "workload.recompute",
    "workload.serving.prompt_tokens",
    "workload.serving.output_tokens",
    "workload.serving.concurrency",
    "organization.network_maturity",
    "organization.time_to_production_weeks",
    "organization.growth.target_gpus",
    "organization.growth.months",
    "costs.mode",
    "costs.gpu_hour_price",
    "costs.lifecycle_years",
    "costs.pue",
]


def _base(gpus: int, model: str) -> dict:
    return {
        "cluster": {"gpu": "h100", "gpus": gpus},
        "workload": {"model": model, "parallel": {"tp": 8}},
    }


def _put(data: dict, path: str, value: object) -> None:
    node = data
    *parents, last = path.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {}
        node = child
    node[last] = value


@st.composite
def scenario_text(draw: st.DrawFn) -> str:
    """A scenario: valid, mutated, or hostile YAML (alias bombs, deep nesting, merge keys)."""
    kind = draw(
        st.sampled_from(["valid", "valid", "mutated", "mutated", "bomb", "deep", "merge", "junk"])
    )
    if kind == "valid":  # plausible clusters and plans, small to frontier-sized
        gpus = draw(st.sampled_from([8, 16, 64, 256, 1024, 4096, 16384]))
        data = _base(gpus, draw(st.sampled_from(["llama3-8b", "llama3-70b", "llama3-405b"])))
        data["workload"]["parallel"] = {
            "tp": draw(st.sampled_from([1, 2, 4, 8])),
            "pp": draw(st.sampled_from([1, 2, 4])),
            "zero": draw(st.integers(0, 3)),
        }
        data["cluster"]["fabric"] = draw(
            st.sampled_from(["ib-ndr", "roce-400g", ["ib-ndr", "roce-400g"]])
        )
        data["cluster"]["topology"] = {
            "design": draw(st.sampled_from(["rail-optimized", "fat-tree", "dragonfly"])),
            "oversubscription": draw(st.sampled_from([1, 2, 4])),
        }
        if draw(st.booleans()):
            data["workload"]["kind"] = "inference"
        return json.dumps(data)
    if kind == "bomb":
        width, levels = draw(st.integers(2, 12)), draw(st.integers(2, 10))
        lines = ['a0: &a0 ["x"]']
        for i in range(1, levels):
            lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
        where = draw(st.sampled_from(["name", "cluster", "cluster.fabric"]))
        body = {"name": f"*a{levels - 1}", "cluster": "{gpus: 16}"}
        if where == "cluster":
            body["cluster"] = f"*a{levels - 1}"
        elif where == "cluster.fabric":
            body["cluster"] = f"{{gpus: 16, fabric: *a{levels - 1}}}"
        return "\n".join(lines + [f"{k}: {v}" for k, v in body.items()]) + "\n"
    if kind == "deep":
        depth = draw(st.sampled_from([10, 40, 1000, 100_000]))
        opener = draw(st.sampled_from(["[", "{a: "]))
        return "name: " + opener * depth + "\ncluster: {gpus: 16}\n"
    if kind == "merge":
        return (
            "base: &base {gpus: 16, gpu: h100}\ncluster:\n  <<: *base\n"
            f"  gpus: {draw(numbers(1, 4096))}\n"
        )
    if kind == "junk":
        return draw(st.text(max_size=300))
    data = _base(draw(st.sampled_from([8, 16, 64, 256])), draw(st.sampled_from(["llama3-8b"])))
    for path, value in draw(st.lists(st.tuples(st.sampled_from(FIELDS), VALUES), max_size=3)):
        _put(data, path, value)
    return json.dumps(data, allow_nan=True)  # JSON is YAML; NaN and Infinity stay as text


@st.composite
def set_overrides(draw: st.DrawFn) -> list[str]:
    """--set KEY=VALUE: known keys with hostile values, and hostile keys."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        key = draw(
            st.one_of(
                st.sampled_from(FIELDS),
                st.text(max_size=20),
                st.integers(1, 1000).map(lambda n: ".".join(["a"] * n)),
            )
        )
        value = draw(
            st.one_of(
                numbers(),
                st.text(max_size=20),
                st.sampled_from(["[ib-ndr, roce-400g]", "{a: 1}", "&a [*a]", "*x", "[[[[[[", "~"]),
            )
        )
        out.append(f"{key}={value}")
    return out


# --- nccl-tests logs ------------------------------------------------------------------------

HEADER = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"


@st.composite
def nccl_text(draw: st.DrawFn) -> str:
    """A text log: plausible rows with hostile numbers, prefixes and noise."""
    lines = [draw(st.sampled_from(["# nThread 1 nGpus 8 minBytes 8", "", "NCCL INFO x"]))]
    for _ in range(draw(st.integers(0, 3))):
        lines.append(HEADER)
        for _ in range(draw(st.integers(0, 6))):
            size = draw(st.one_of(st.integers(0, 2**34).map(str), numbers()))
            time_us, alg, bus = (draw(st.one_of(numbers(), st.just("10.5"))) for _ in range(3))
            wrong = draw(st.sampled_from(["0", "N/A", "-1", "9" * 30, "x"]))
            prefix = draw(st.sampled_from(["", "0: ", "[1,0]<stdout>: ", "host1: "]))
            lines.append(
                f"{prefix}{size} {draw(numbers())} float sum -1 {time_us} {alg} {bus} {wrong}"
            )
        if draw(st.booleans()):
            rank = draw(numbers())
            lines.append(f"#  Rank {rank} Group 0 Pid 1 on host{rank} device 0 [0x18] H100")
    return "\n".join(lines) + "\n"


@st.composite
def nccl_json(draw: st.DrawFn) -> str:
    """nccl-tests -J output with hostile values, empty runs and deep nesting."""
    kind = draw(st.sampled_from(["runs", "runs", "deep", "junk"]))
    if kind == "deep":
        return "[" * draw(st.sampled_from([100, 10_000, 100_000])) + "]"
    if kind == "junk":
        return json.dumps(draw(VALUES), allow_nan=True)
    value = st.one_of(
        st.integers(0, 2**34),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-(2**80), 2**80),
        st.text(max_size=8),
        st.none(),
    )
    runs = []
    for _ in range(draw(st.integers(1, 3))):
        results = [
            {
                "size": draw(value),
                "count": draw(value),
                "type": "float",
                "redop": "sum",
                "root": draw(st.sampled_from([-1, None, "x", 2**70])),
                "out_of_place": {
                    "time": draw(value),
                    "alg_bw": draw(value),
                    "bus_bw": draw(value),
                    "nwrong": draw(st.sampled_from([0, None, "x", 2**70])),
                },
            }
            for _ in range(draw(st.integers(0, 4)))
        ]
        runs.append({"results": results})
    return json.dumps(runs if len(runs) > 1 else runs[0], allow_nan=True)


# --- catalog overlays ---------------------------------------------------------------------------

FABRIC_FIELDS = {
    "line_rate_gbps": "400.0",
    "nic_goodput_GBps": "{ low = 46.0, high = 49.2, typical = 48.0 }",
    "rdma_latency_us": "{ low = 1.0, high = 2.0, typical = 1.1 }",
    "switch_latency_ns": "{ low = 130.0, high = 250.0, typical = 150.0 }",
    "mtu_bytes": "4096",
}
FABRIC_REST = """id = "ib-ndr"
name = "overlay"
family = "infiniband"
transport = "rdma"
flow_control = "credit"
congestion_control = ["ib-cc"]
routing = ["adaptive", "static"]
default_routing = "adaptive"
lossless = true
gpudirect_rdma = true
default_nic = "cx7"
default_switch = "qm9700"
source = "fuzz overlay"
as_of = "2025-01"
"""
TOML_NUMBERS = ["0", "0.0", "-1.0", "inf", "nan", "1e308", "99999999999999999", "0.001", '"x"']


@st.composite
def catalog_overlay(draw: st.DrawFn) -> str:
    """A fabric overlay replacing ib-ndr, with hostile values, or hostile TOML."""
    kind = draw(st.sampled_from(["fabric", "fabric", "fabric", "deep", "junk"]))
    if kind == "deep":
        return "x = " + "[" * draw(st.sampled_from([10, 3000])) + "\n"  # never closed
    if kind == "junk":
        return draw(st.text(max_size=200))
    values = dict(FABRIC_FIELDS)
    for name in draw(st.lists(st.sampled_from(sorted(FABRIC_FIELDS)), max_size=2)):
        bad = draw(st.sampled_from(TOML_NUMBERS))
        if values[name].startswith("{"):
            values[name] = f"{{ low = {bad}, high = {draw(st.sampled_from(TOML_NUMBERS))} }}"
        else:
            values[name] = bad
    return "[[fabric]]\n" + FABRIC_REST + "".join(f"{k} = {v}\n" for k, v in values.items())


# --- the command lines --------------------------------------------------------------------------


def _maybe(draw: st.DrawFn, flag: str, value: st.SearchStrategy[str]) -> list[str]:
    return [flag, draw(value)] if draw(st.booleans()) else []


@st.composite
def scenario_case(draw: st.DrawFn) -> FuzzCase:
    text = draw(scenario_text())
    cmd = draw(
        st.sampled_from(
            [["scenario", "check"], ["scenario", "show"], ["step"], ["advise", "--no-break-even"]]
        )
    )
    argv = [*cmd, SCENARIO]
    if cmd[0] in ("step", "advise"):
        argv += ["--congestion", draw(st.sampled_from(["none", "closed-form", "flow"]))]
    return FuzzCase("scenario", (*argv, "--json"), {SCENARIO: text.encode("utf-8", "replace")})


@st.composite
def set_case(draw: st.DrawFn) -> FuzzCase:
    base = json.dumps(_base(16, "llama3-8b"))
    cmd = draw(st.sampled_from([["scenario", "check", SCENARIO], ["step", SCENARIO]]))
    sets = [a for s in draw(set_overrides()) for a in ("--set", s)]
    extra = ["--congestion", "none"] if cmd[0] == "step" else []
    return FuzzCase("set", (*cmd, *sets, *extra, "--json"), {SCENARIO: base.encode()})


@st.composite
def nccl_case(draw: st.DrawFn) -> FuzzCase:
    as_json = draw(st.booleans())
    text = draw(nccl_json() if as_json else nccl_text())
    cmd = draw(st.sampled_from(["grade", "calibrate"]))
    argv = [cmd, RESULTS, "--nodes", draw(st.sampled_from(["2", "1", "4"]))]
    if cmd == "calibrate":
        argv += ["--out", draw(st.sampled_from(["fit.toml", "-", RESULTS]))]
        argv += _maybe(draw, "--id", st.sampled_from(["", 'a"b', "ok-id", "x" * 300]))
    return FuzzCase(
        "nccl-json" if as_json else "nccl-text",
        (*argv, "--json"),
        {RESULTS: text.encode("utf-8", "replace")},
    )


@st.composite
def catalog_case(draw: st.DrawFn) -> FuzzCase:
    cmd = draw(
        st.sampled_from(
            [
                ["collective", "--nodes", "2", "--fabric", "ib-ndr"],
                ["topology", "--gpus", "64", "--fabric", "ib-ndr"],
                ["congestion", "--gpus", "16", "--fabric", "ib-ndr", "--seeds", "1"],
                ["step", SCENARIO, "--congestion", "none"],
                ["scenario", "check", SCENARIO],
            ]
        )
    )
    files = {CATALOG: draw(catalog_overlay()).encode("utf-8", "replace")}
    if SCENARIO in cmd:
        files[SCENARIO] = json.dumps(
            {**_base(16, "llama3-8b"), "cluster": {"gpus": 16, "fabric": "ib-ndr"}}
        ).encode()
    return FuzzCase("catalog", (*cmd, "--catalog", CATALOG, "--json"), files)


@st.composite
def flags_case(draw: st.DrawFn) -> FuzzCase:
    """Numeric flags of every command that takes them, valid or hostile."""
    cmd = draw(st.sampled_from(["collective", "topology", "congestion", "cost", "providers"]))
    n = numbers
    if cmd == "collective":
        argv = ["collective", "--nodes", draw(n(1, 64))]
        argv += _maybe(draw, "--gpus-per-node", n(1, 16)) + _maybe(draw, "--hops", n(1, 8))
        if draw(st.booleans()):
            listed = draw(st.lists(SIZES, min_size=1, max_size=5))
            many = draw(st.sampled_from([1, 1, 1, 5000]))  # 5,000 sizes: over the cap
            argv += ["--sizes", ",".join(listed * many)]
        else:
            argv += _maybe(draw, "--min", SIZES) + _maybe(draw, "--max", SIZES)
            argv += _maybe(draw, "--factor", n(1, 8))
    elif cmd == "topology":
        argv = ["topology", "--gpus", draw(n(1, 200_000))]
        argv += _maybe(draw, "--oversubscription", n(0, 8))
        argv += _maybe(draw, "--design", st.sampled_from(["fat-tree", "dragonfly", "rail-only"]))
        argv += _maybe(draw, "--cable-length", st.sampled_from(["node_leaf=3", "x=nan", "=1"]))
    elif cmd == "congestion":
        argv = [
            "congestion",
            "--gpus",
            draw(st.one_of(st.sampled_from(["16", "64", "1024"]), n(2, 200_000))),
        ]
        argv += ["--seeds", draw(st.one_of(st.sampled_from(["1", "2"]), n(1, 100_000)))]
        argv += _maybe(
            draw,
            "--pattern",
            st.sampled_from(
                ["incast", "tree-allreduce", "alltoall", "permutation", "pipeline", "x"]
            ),
        )
        for flag in (
            "--qps",
            "--jitter-us",
            "--background",
            "--pfc-xoff-kb",
            "--shift",
            "--cluster-gpus",
            "--size",
            "--oversubscription",
        ):
            argv += _maybe(draw, flag, n(0, 64)) if draw(st.integers(0, 3)) == 0 else []
    elif cmd == "cost":
        argv = ["cost", "--gpus", draw(n(1, 4096)), "--days", draw(n(0, 90))]
        argv += _maybe(draw, "--loss", n(0, 1)) + _maybe(draw, "--gpu-hour-price", n(0, 10))
    else:
        argv = ["providers", *_maybe(draw, "--min-gpus", n(1, 10**6))]
    return FuzzCase("flags", (*argv, "--json"))


CASES = st.one_of(scenario_case(), set_case(), nccl_case(), catalog_case(), flags_case())
# The fast subset: the families whose every case runs in well under a second.
FAST_CASES = st.one_of(
    set_case(),
    nccl_case(),
    catalog_case(),
    scenario_case().filter(lambda c: c.argv[0] == "scenario"),
)
