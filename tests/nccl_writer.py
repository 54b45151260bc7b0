"""nccl-tests ``-J`` files laid out as its writer (src/util.cu) writes them, by version.

The writer prints compact JSON by hand: doubles with ``%lf`` (six decimals), NaN as the text
"nan", ``root`` as text padded to six characters, ``nwrong`` as a double or null, one
``config.devices`` entry per process (its first rank), and, from version 2 with -I, the
per-iteration report after each half of a result. Version 1 spells the average's keys
``average_bus_bandwidith`` / ``bandwidith``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _d(value: float | str) -> str:
    return '"nan"' if value == "nan" else f"{value:f}"


@dataclass
class Row:
    size: int
    count: int
    time_us: float | str
    algbw: float | str
    busbw: float | str
    root: int = -1
    redop: str = "sum"
    null_out_of_place: bool = False
    times_us: list[float] = field(default_factory=list)  # per-iteration (version >= 2, -I)


def _half(key: str, r: Row, check: bool) -> str:
    wrong = "0.000000" if check else "null"
    return (
        f'"{key}":{{"time":{_d(r.time_us)},"alg_bw":{_d(r.algbw)},'
        f'"bus_bw":{_d(r.busbw)},"nwrong":{wrong}}}'
    )


def _per_iter(key: str, r: Row, version: int) -> str:
    t = r.times_us
    mean = sum(t) / len(t)
    sd = (sum((x - mean) ** 2 for x in t) / len(t)) ** 0.5
    skipped = '"skipped_iterations":0,' if version >= 3 else ""
    return (
        f'"{key}":{{{skipped}"min_us":{min(t):f},"max_us":{max(t):f},"avg_us":{mean:f},'
        f'"p50_us":{sorted(t)[len(t) // 2]:f},"p95_us":{max(t):f},"p99_us":{max(t):f},'
        f'"stdev_us":{sd:f},"cv_pct":{100 * sd / mean:f},'
        f'"times_us":[{",".join(f"{x:f}" for x in t)}]}}'
    )


def _result(r: Row, version: int, check: bool) -> str:
    parts = [
        f'"size":{r.size}',
        f'"count":{r.count}',
        '"type":"float"',
        f'"redop":"{r.redop}"',
        f'"root":"{r.root:6d}"',
    ]
    if r.null_out_of_place:
        parts.append('"out_of_place":null')
    else:
        parts.append(_half("out_of_place", r, check))
        if r.times_us and version >= 2:
            parts.append(_per_iter("out_of_place_per_iter", r, version))
    parts.append(_half("in_place", r, check))
    if r.times_us and version >= 2:
        parts.append(_per_iter("in_place_per_iter", r, version))
    parts += ['"actual_iterations":20', '"experiment_name":"AllReduce"']
    return "{" + ",".join(parts) + "}"


def writer_json(
    rows: list[Row],
    *,
    version: int = 3,
    program: str = "./build/all_reduce_perf",
    env: tuple[str, ...] = (),
    processes: list[str] = ("node-a", "node-b"),  # type: ignore[assignment]
    ngpus: int = 1,
    nthreads: int = 1,
    nccl_version: int = 22602,
    check: bool = True,
) -> str:
    """One file as nccl-tests ``version`` writes it: ``processes`` lists each process's host."""
    per = nthreads * ngpus
    devices = ",".join(
        f'{{"rank":{i * per},"group":0,"pid":{1000 + i},"hostname":"{host}","device":0,'
        f'"device_hex":"0000:19:00","device_info":"NVIDIA H100 80GB HBM3"}}'
        for i, host in enumerate(processes)
    )
    # booleans are written as text ("true"), as the writer's jsonBool does
    per_iter = ',"per_iter_timing":"true"' if version >= 2 else ""
    skip = ',"per_iter_skip":0' if version >= 3 else ""
    config = (
        f'"config":{{"nthreads":{nthreads},"ngpus":{ngpus},"minimum_bytes":8,'
        f'"maximum_bytes":17179869184,"step_factor":2,"warmup_iters":5,"iterations":20,'
        f'"aggregated_iterations":1,"validation":{int(check)},"graph":0,'
        f'"blocking_collectives":"false"{per_iter}{skip},"parallel_init":"false",'
        f'"devices":[{devices}]}}'
    )
    avg_key, bw_key = (
        ("average_bus_bandwidith", "bandwidith")
        if version == 1
        else ("average_bus_bandwidth", "bandwidth")
    )
    return (
        f'{{"version":{version},"start_time":"2025-10-20 10:00:00",'
        f'"args":["{program}","-b","8","-e","16G","-f","2","-J","out.json"],'
        f'"env":[{",".join(f"{chr(34)}{e}{chr(34)}" for e in env)}],'
        f'"nccl_version":{nccl_version},{config},'
        f'"results":[{",".join(_result(r, version, check) for r in rows)}],'
        f'"out_of_bounds":{{"count":0,"okay":"true"}},'
        f'"{avg_key}":{{"{bw_key}":12.500000,"okay":"unchecked"}},'
        f'"errors":[],"end_time":"2025-10-20 10:01:00"}}'
    )
