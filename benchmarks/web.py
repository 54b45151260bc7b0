"""Load on the web planner: `/api/advise` on the demo scenario from 20 concurrent clients.

Targets (issue 24): p99 under 1 s at 20 concurrent clients; repeated (cached) requests p99 under
50 ms. The server is `fabricplan serve` in its own process on a free loopback port; each client
has its own HTTP connection and sends its next request as soon as the last is answered.

- uncached: every request is a distinct computation (its own costs.power_price_kwh, a value
  that changes the answer), so no answer comes from the response cache; the workload model's
  results for the same cluster and workload are shared across requests (workload.memo), as
  they are when a person edits prices or rates;
- uncached, the model re-run: every request has its own workload.tokens, so each re-runs the
  workload model everywhere advise needs it (nothing shared but the congestion simulations'
  own caches);
- cached: the same request again and again, after one that puts its answer in the cache.

    python benchmarks/web.py [--clients 20] [--requests 200] [--workers 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "examples" / "llama3-70b-512-h100.yaml"
TARGET_P99_S = 1.0
TARGET_CACHED_P99_S = 0.050


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, workers: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "fabricplan", "serve", "--port", str(port)]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/options", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start within 60 s")


def load(url: str, bodies: list[dict], clients: int) -> tuple[list[float], float]:
    """Send ``bodies`` from ``clients`` concurrent clients, each with its own connection and
    its next request as soon as its last is answered (each connects before the clock starts,
    as a page keeps its connection): every request's latency, and the wall time of the whole.
    The clients are coroutines in one thread: on a small machine, threads fighting over the
    interpreter would measure the load generator, not the server."""

    async def run() -> tuple[list[float], float]:
        latencies: list[float] = []
        queue = iter(bodies)
        connected = asyncio.Barrier(clients + 1)

        async def client() -> None:
            async with httpx.AsyncClient(timeout=120) as http:
                await http.get(url.replace("/api/advise", "/api/options"))  # connect first
                await connected.wait()
                for body in queue:  # shared: each body is sent once
                    t0 = time.perf_counter()
                    r = await http.post(url, json=body)
                    latencies.append(time.perf_counter() - t0)
                    assert r.status_code == 200, r.text[:300]

        tasks = [asyncio.create_task(client()) for _ in range(clients)]
        await connected.wait()
        t0 = time.perf_counter()
        await asyncio.gather(*tasks)
        return latencies, time.perf_counter() - t0

    return asyncio.run(run())


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def report(label: str, latencies: list[float], wall: float, target: float) -> None:
    print(
        f"{label}: {len(latencies)} requests, {len(latencies) / wall:.1f} requests/s, "
        f"p50 {statistics.median(latencies) * 1e3:.0f} ms, p99 {p99(latencies) * 1e3:.0f} ms "
        f"({p99(latencies) / target:.2f}x the {target * 1e3:g} ms target), "
        f"max {max(latencies) * 1e3:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    args = parser.parse_args()
    port = free_port()
    server = start_server(port, args.workers)
    url = f"http://127.0.0.1:{port}/api/advise"
    text = DEMO.read_text()
    try:
        t0 = time.perf_counter()
        httpx.post(url, json={"scenario": text, "set": []}, timeout=120).raise_for_status()
        print(f"first request (the server's first computation): {time.perf_counter() - t0:.2f} s")
        distinct = [
            {"scenario": text, "set": [f"costs.power_price_kwh={0.1 + (i + 1) * 1e-5:.5f}"]}
            for i in range(args.requests)
        ]
        report(
            f"uncached, {args.clients} clients, {args.workers} worker(s)",
            *load(url, distinct, args.clients),
            TARGET_P99_S,
        )
        rerun = [
            {"scenario": text, "set": [f"workload.tokens={1.5e13 + (i + 1) * 1e9:.6g}"]}
            for i in range(max(args.requests // 2, args.clients))
        ]
        report(
            f"uncached, the model re-run, {args.clients} clients, {args.workers} worker(s)",
            *load(url, rerun, args.clients),
            TARGET_P99_S,
        )
        same = [{"scenario": text, "set": []}] * max(args.requests, 1000)
        httpx.post(url, json=same[0], timeout=120).raise_for_status()  # kept from here on
        report(
            f"cached, {args.clients} clients, {args.workers} worker(s)",
            *load(url, same, args.clients),
            TARGET_CACHED_P99_S,
        )
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
