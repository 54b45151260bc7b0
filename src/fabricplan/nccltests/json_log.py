"""Read nccl-tests ``-J`` JSON as its writer (``src/util.cu``) has laid it out since 2.17.

One object per invocation, ``version`` 1 to 3 so far:
- top level: ``version``, ``start_time``, ``args`` (argv), ``env`` ("NAME=value" strings),
  ``nccl_version`` (NCCL's version code, e.g. 22602), ``config``, ``results``, then the
  summary (``out_of_bounds``, ``average_bus_bandwidth`` - spelt ``average_bus_bandwidith`` /
  ``bandwidith`` in version 1), ``errors`` and ``end_time``;
- ``config``: ``nthreads``, ``ngpus``, sizes and iterations, and ``devices``: one entry per
  *process* (its first rank: ``rank``, ``hostname``, ``device``, ...), so a process driving
  several GPUs (-t, -g) owns ``nthreads * ngpus`` consecutive ranks;
- each result: ``size``, ``count`` (whole numbers), ``type``, ``redop``, ``root`` (text padded
  to six characters, "    -1"), ``out_of_place`` and ``in_place`` (``time`` or ``cpu_time`` in
  us, ``alg_bw``, ``bus_bw`` in GB/s, ``nwrong`` a number or null), either of which may be null
  (a record the writer closed early); from version 2 with per-iteration timing (-I),
  ``out_of_place_per_iter`` / ``in_place_per_iter`` (``min_us`` ... ``cv_pct``, ``times_us``).
The writer prints NaN as the text "nan"; every value is checked as the text parser checks it.
"""

from __future__ import annotations

import math
from typing import Any

from fabricplan.collectives.busbw import resolve_op
from fabricplan.nccltests.parse import (
    _ENV,
    _OP,
    MAX_RANK,
    ParseError,
    Result,
    Run,
    _check_counts,
    _check_size,
    _number,
    _whole,
)

# Characters kept of a JSON run's type and redop labels (nccl-tests writes "float", "sum").
MAX_LABEL_CHARS = 32
# Ranks one process may own (-t threads x -g GPUs): the GPUs of one node, at most 1,024 (the
# largest node the scenario file takes).
MAX_RANKS_PER_PROCESS = 1024
# NCCL's version code: major*10000 + minor*100 + patch from 2.9 on (20900); before,
# major*1000 + minor*100 + patch.
NEW_VERSION_CODE = 20900


def _json_whole(value: Any, what: str) -> int:
    """A JSON count: a whole number, written as an integer, a float or text (root: " -1")."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ParseError(f"{what} should be a whole number")
    return _whole(value.strip(), what, 0, "")


def _json_number(value: Any, what: str) -> float:
    """A JSON time or bandwidth: a finite number >= 0, written as a number or text ("nan" is
    refused, as in a text log)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ParseError(f"{what} should be a number")
    return _number(str(value).strip(), what, 0, "")


def _optional(d: dict[str, Any], key: str, what: str) -> float | None:
    return _json_number(d[key], what) if d.get(key) is not None else None


def nccl_version(code: Any) -> str | None:
    """NCCL's version code (22602) as its release (2.26.2)."""
    if isinstance(code, str) and code.strip().isdigit():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool) or code <= 0:
        return None if code is None else str(code)[:MAX_LABEL_CHARS]
    if code >= NEW_VERSION_CODE:
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return f"{code // 1000}.{code // 100 % 10}.{code % 100}"


def _devices(run: Run, obj: dict[str, Any]) -> None:
    """Ranks and hosts from ``config.devices`` (one entry per process)."""
    config = obj.get("config")
    if not isinstance(config, dict):
        return
    per_process = 1
    for key in ("nthreads", "ngpus"):
        if config.get(key) is not None:
            per_process *= _json_whole(config[key], f"config.{key}")
    if not 1 <= per_process <= MAX_RANKS_PER_PROCESS:
        raise ParseError(
            f"config.nthreads x config.ngpus is {per_process:,}; a process drives 1 to "
            f"{MAX_RANKS_PER_PROCESS:,} GPUs"
        )
    devices = config.get("devices")
    if not isinstance(devices, list):
        return
    for d in devices:
        if not isinstance(d, dict) or d.get("rank") is None:
            continue
        first = _json_whole(d["rank"], "config.devices rank")
        if not 0 <= first < MAX_RANK:
            raise ParseError(f"config.devices rank {first:,} is not 0 to {MAX_RANK:,}")
        host = str(d.get("hostname"))[: MAX_LABEL_CHARS * 8]
        for rank in range(first, first + per_process):
            run.rank_hosts[rank] = host
        run.hosts.add(host)
        run.quote(
            "ranks",
            "JSON config.devices",
            f"rank {first} on {host} device "
            f"{d.get('device')} {str(d.get('device_info') or '')[:60]}",
        )
    if run.rank_hosts:
        run.nranks = max(run.rank_hosts) + 1


def _result(r: Any) -> Result | None:
    """One result record; None when the writer closed it with no measurement."""
    if not isinstance(r, dict):
        raise TypeError
    oop, ip = r.get("out_of_place"), r.get("in_place")
    main = oop if isinstance(oop, dict) else ip if isinstance(ip, dict) else None
    if main is None:
        return None
    second = ip if main is oop and isinstance(ip, dict) else {}
    size, count = _json_whole(r["size"], "size"), _json_whole(r["count"], "count")
    _check_size(size, count, "")
    per_iter = r.get("out_of_place_per_iter" if main is oop else "in_place_per_iter")
    cv = None
    if isinstance(per_iter, dict):
        for t in per_iter.get("times_us") or []:
            _json_number(t, "times_us")
        cv = _optional(per_iter, "cv_pct", "cv_pct")
    wrong = main.get("nwrong")
    return Result(
        size,
        count,
        str(r["type"])[:MAX_LABEL_CHARS],
        None if r.get("redop") is None else str(r["redop"])[:MAX_LABEL_CHARS],
        _json_whole(r["root"], "root") if r.get("root") is not None else None,
        _json_number(main["time"] if "time" in main else main["cpu_time"], "time"),
        _json_number(main["alg_bw"], "alg_bw"),
        _json_number(main["bus_bw"], "bus_bw"),
        None if wrong is None else _json_whole(wrong, "nwrong"),
        _optional(second, "time", "time")
        if "time" in second
        else _optional(second, "cpu_time", "time"),
        _optional(second, "alg_bw", "alg_bw"),
        _optional(second, "bus_bw", "bus_bw"),
        cv_pct=cv,
    )


def _json_run(obj: dict[str, Any], index: int) -> Run:
    name = f"JSON run {index + 1}"
    results = obj.get("results")
    if not isinstance(results, list):
        raise ParseError(f"{name}: no 'results' list")
    run = Run(first_line=0, label=name)
    args = " ".join(map(str, obj.get("args") or []))
    if m := _OP.search(args):
        run.op = resolve_op(m.group(1))
    for item in obj.get("env") or []:
        if m := _ENV.search(str(item)):
            run.env[m.group(1)] = m.group(2)
            run.quote(m.group(1), "JSON env", str(item))
    run.nccl_version = nccl_version(obj.get("nccl_version"))
    try:
        _devices(run, obj)
        avg = obj.get("average_bus_bandwidth", obj.get("average_bus_bandwidith"))
        if isinstance(avg, dict):
            value = avg.get("bandwidth", avg.get("bandwidith"))
            run.avg_busbw_GBps = None if value is None else _json_number(value, "bandwidth")
    except ParseError as exc:
        raise ParseError(f"{name}: {exc.reason}") from None
    for i, r in enumerate(results):
        where = f"{name}, result {i + 1}: "
        try:
            result = _result(r)
        except ParseError as exc:
            raise ParseError(where + exc.reason) from None
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ParseError(
                f"{where}expected size, count, type and out_of_place or in_place "
                "{time, alg_bw, bus_bw}"
            ) from None
        if result is not None:
            run.results.append(result)
    return run


def parse_json(data: Any) -> list[Run]:
    """nccl-tests ``-J`` output: one object, or a list of them."""
    objs = data if isinstance(data, list) else [data]
    if not objs or not all(isinstance(o, dict) for o in objs):
        raise ParseError("JSON input must be an nccl-tests result object or a list of them")
    results = (o.get("results") for o in objs)
    _check_counts(len(objs), sum(len(r) for r in results if isinstance(r, list)))
    # a run without results (nccl-tests killed before its first size) is skipped, as in text
    runs = [run for i, o in enumerate(objs) if (run := _json_run(o, i)).results]
    if not runs:
        raise ParseError("JSON input has no results")
    return runs
