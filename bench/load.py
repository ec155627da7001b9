"""Serving as users meet it: the real `gputalks serve` process against bare Datasette of a copy
of the same file (the same settings, page size and number of processes), in the same run, under
1 and 8 concurrent clients (keep-alive HTTP/1.1 connections, one thread each), every request on a
URL no earlier request asked (bench/pages.py).

    .venv/bin/python -m bench.load --db talks.db [--requests 200] [--kind "talk page" ...]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from gputalks.site.serve import default_workers

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Load:
    """One page under one number of clients."""

    requests: int
    errors: int
    req_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


@dataclass
class Server:
    process: subprocess.Popen
    port: int

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command: list[str], port: int, env: dict[str, str] | None = None) -> Server:
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited with {process.returncode}: {' '.join(command)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return Server(process, port)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"server did not start: {' '.join(command)}")


def gputalks_serve(db_path: Path) -> Server:
    port = free_port()
    # Its inspect file goes beside the generated index, which the benchmark removes, not in /tmp.
    return start([sys.executable, "-m", "gputalks", "serve", "--db", str(db_path), "--port", str(port)],
                 port, env={**os.environ, "TMPDIR": str(db_path.parent)})


def bare_datasette(db_path: Path, workers: int) -> Server:
    """Bare Datasette (no gputalks plugin) of the file, as `datasette -i --inspect-file` serves it,
    with gputalks' serve settings (the same page size; suggested facets off, which only makes it
    faster), as many worker processes as `gputalks serve` runs, and its log level (`info`, as
    `datasette serve` and `gputalks serve` run uvicorn: a line for every request)."""
    from gputalks.site.serve import inspect_file

    port = free_port()
    inspected = inspect_file(db_path, "bare")
    return start([sys.executable, "-m", "uvicorn", "bench.bare:app", "--factory", "--workers", str(workers),
                  "--host", "127.0.0.1", "--port", str(port), "--log-level", "info"], port,
                 env={**os.environ, "BENCH_BARE_DB": str(db_path), "BENCH_BARE_INSPECT": str(inspected),
                      "TMPDIR": str(db_path.parent)})


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def hammer(port: int, paths: list[str], clients: int, max_seconds: float = 40.0) -> Load:
    """Each of `paths` requested once, by `clients` threads in turn, each on its own keep-alive
    connection; no warm-up (a client stops early once `max_seconds` have passed: a very slow
    page is measured on fewer requests)."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def client(mine: list[str]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        timings, failed = [], 0
        for path in mine:
            if time.perf_counter() > stop_at:
                break
            started = time.perf_counter()
            try:
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    failed += 1
            except (OSError, http.client.HTTPException):
                failed += 1
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            timings.append((time.perf_counter() - started) * 1000)
        connection.close()
        with lock:
            latencies.extend(timings)
            errors[0] += failed

    threads = [threading.Thread(target=client, args=(paths[offset::clients],)) for offset in range(clients)]
    started = time.perf_counter()
    stop_at = started + max_seconds
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    return Load(len(latencies), errors[0], round(len(latencies) / elapsed, 1),
                round(statistics.median(latencies), 1), round(percentile(latencies, 0.95), 1),
                round(percentile(latencies, 0.99), 1))


def timed_get(port: int, path: str) -> tuple[int, float, int]:
    """(status, milliseconds, bytes) of one request on a new connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    connection.request("GET", path)
    response = connection.getresponse()
    size = len(response.read())
    connection.close()
    return response.status, round((time.perf_counter() - started) * 1000, 1), size


def compare(db_path: Path, work: Path, requests: int = 160, client_counts: tuple[int, ...] = (1, 8),
            only: tuple[str, ...] = ()) -> dict:
    """Every kind of page (or those named in `only`) on both servers, in this run, at each number
    of clients, each request on a URL no request before it asked; then the full CSV stream,
    alternating servers."""
    from bench.pages import page_kinds

    name = db_path.stem
    copy = work / "bare" / db_path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(db_path, copy)
    workers = default_workers()
    kinds = [k for k in page_kinds(db_path, requests * len(client_counts)) if not only or k.name in only]
    if not kinds:
        raise SystemExit(f"no kind of page named {', '.join(only)}")
    ours, bare = gputalks_serve(db_path), bare_datasette(copy, workers)
    results = []
    try:
        # A cold worker's first request, reported apart (nothing warms either server up).
        first = {"gputalks": timed_get(ours.port, kinds[0].ours[0])[1], "bare": timed_get(bare.port, kinds[0].bare[0])[1]}
        for kind in kinds:
            for number, clients in enumerate(client_counts):
                part = slice(number * requests + 1, (number + 1) * requests + 1)
                print(f"  {kind.name}, {clients} client(s) ...", flush=True)
                mine = hammer(ours.port, kind.ours[part], clients)
                theirs = hammer(bare.port, kind.bare[part], clients)
                results.append({"page": kind.name, "clients": clients, "reader": kind.reader,
                                "gputalks_example": kind.ours[part][0], "bare_example": kind.bare[part][0],
                                "gputalks": asdict(mine), "bare": asdict(theirs),
                                "ratio_req_per_s": round(mine.req_per_s / theirs.req_per_s, 2)})
        stream = f"/{name}/talks.csv?_stream=1&_size=max"
        runs = [(timed_get(ours.port, stream), timed_get(bare.port, stream)) for _ in range(3)]
        csv = {"path": stream, "gputalks_s": [round(o[1] / 1000, 2) for o, _ in runs],
               "bare_s": [round(b[1] / 1000, 2) for _, b in runs],
               "statuses": sorted({o[0] for o, _ in runs} | {b[0] for _, b in runs}),
               "gputalks_mib": round(runs[0][0][2] / 2**20, 1), "bare_mib": round(runs[0][1][2] / 2**20, 1)}
        csv["ratio_time"] = round(statistics.median(csv["gputalks_s"]) / statistics.median(csv["bare_s"]), 2)
    finally:
        ours.stop()
        bare.stop()
    return {"requests_per_case": requests, "gputalks_workers": workers, "bare_workers": workers,
            "first_request_ms": first, "pages": results, "csv_stream": csv}


def served_load(db_path: Path, paths: list[str], clients: int = 8, expected: int = 200) -> dict:
    """`paths` through the real `gputalks serve`, `clients` at a time, each once; an answer other
    than `expected` (or none) is an error."""
    server = gputalks_serve(db_path)
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    chunks = [paths[i::clients] for i in range(clients)]

    def client(mine: list[str]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        for path in mine:
            started = time.perf_counter()
            try:
                connection.request("GET", path)
                response = connection.getresponse()
                response.read()
                failed = response.status != expected
            except (OSError, http.client.HTTPException):
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
                failed = True
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)
                errors[0] += failed
        connection.close()

    try:
        timed_get(server.port, "/-/versions.json")
        threads = [threading.Thread(target=client, args=(chunk,)) for chunk in chunks]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        server.stop()
    return {"clients": clients, "requests": len(latencies), "errors": errors[0],
            "req_per_s": round(len(latencies) / elapsed, 1), "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(percentile(latencies, 0.95), 1), "p99_ms": round(percentile(latencies, 0.99), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--kind", action="append", default=[], help="only this kind of page (repeatable)")
    args = parser.parse_args()
    work = Path(args.db).parent / "load"
    print(json.dumps(compare(args.db, work, args.requests, only=tuple(args.kind)), indent=2))


if __name__ == "__main__":
    main()
