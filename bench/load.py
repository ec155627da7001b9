"""Serving as users meet it: the real `gputalks serve` process against a bare
`datasette -i` of a copy of the same file (suggested facets off), in the same run, under 1 and 8
concurrent clients (keep-alive HTTP/1.1 connections, one thread each).

    .venv/bin/python -m bench.load --db talks.db [--requests 200]
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

from bench.generate import WORDS
from gputalks.index.serve import default_workers

REPO = Path(__file__).resolve().parent.parent
# The facets `gputalks serve` shows by default, asked of bare Datasette by URL.
SAME_FACETS = ("_facet=series&_facet=event&_facet=year&_facet_array=speakers&_facet_array=sources"
               "&_facet=duration_bucket&_facet_array=topics")


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
    return start([sys.executable, "-m", "gputalks.index.cli", "serve", "--db", str(db_path), "--port", str(port)],
                 port, env={**os.environ, "TMPDIR": str(db_path.parent)})


def bare_datasette(db_path: Path) -> Server:
    port = free_port()
    # Suggested facets off: otherwise every bare table page tries a facet on each of 25 columns
    # (0.5 req/s at 100k), which would flatter the comparison.
    return start([sys.executable, "-m", "bench.bare", "serve", "-i", str(db_path), "--port", str(port),
                  "--setting", "suggest_facets", "off"], port)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


WARM_UP_CONNECTIONS = 4  # new connections before measuring: each worker process gets some


def hammer(port: int, path: str | list[str], clients: int, requests: int, max_seconds: float = 30.0) -> Load:
    """`requests` GETs of `path` (or of each of a list of paths in turn: a different search each
    time) shared by `clients` threads, each on its own keep-alive connection (each client stops
    early once `max_seconds` have passed: a very slow page is measured on fewer requests)."""
    paths = [path] if isinstance(path, str) else path
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    per_client = max(1, requests // clients)

    def client(offset: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine, failed = [], 0
        for n in range(per_client):
            if time.perf_counter() > stop_at:
                break
            started = time.perf_counter()
            try:
                connection.request("GET", paths[(offset + n * clients) % len(paths)])
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    failed += 1
            except (OSError, http.client.HTTPException):
                failed += 1
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            mine.append((time.perf_counter() - started) * 1000)
        connection.close()
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    for _ in range(WARM_UP_CONNECTIONS):  # first-request work is not what a reader waits for every time
        hammer_once(port, paths[0])
    threads = [threading.Thread(target=client, args=(offset,)) for offset in range(clients)]
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


def hammer_once(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    connection.request("GET", path)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response.status


def pages(db_path: Path, name: str) -> list[tuple[str, str | list[str], str | list[str]]]:
    """(page, path on gputalks serve, path on bare Datasette) for every HTML page type and JSON."""
    import sqlite3

    with sqlite3.connect(db_path) as db:
        talk_id = db.execute("select id from talks order by rowid limit 1 offset 777").fetchone()[0]
        speaker_id = db.execute("select id from speakers order by rowid limit 1 offset 77").fetchone()[0]
    table = f"/{name}/talks"
    # Readers search for many things: 60 words in turn, each asked two or three times a run (its counts are
    # computed on its first request in each worker process, then found in memory).
    words = WORDS[:60]
    searches = [f"{table}?_search={word}" for word in words]
    return [
        ("home page", "/", "/"),
        ("talks table, default facets", table, table),
        ("talks table vs bare with the same 7 facets", table, f"{table}?{SAME_FACETS}"),
        ("table search _search=kernel", f"{table}?_search=kernel", f"{table}?_search=kernel"),
        ("table search, a different word each request", searches, searches),
        ("ranked search page /search?q=kernel", "/search?q=kernel", f"{table}?_search=kernel"),
        ("ranked search page, a different word each request", [f"/search?q={word}" for word in words],
         searches),
        ("talk page", f"{table}/{talk_id}", f"{table}/{talk_id}"),
        ("speaker page", f"/{name}/speakers/{speaker_id}", f"/{name}/speakers/{speaker_id}"),
        ("JSON .json?_shape=array", f"{table}.json?_shape=array", f"{table}.json?_shape=array"),
    ]


def compare(db_path: Path, work: Path, requests: int = 200, client_counts: tuple[int, ...] = (1, 8)) -> dict:
    """Every page on both servers, in this run, at each number of clients."""
    name = db_path.stem
    copy = work / "bare" / db_path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(db_path, copy)
    ours, bare = gputalks_serve(db_path), bare_datasette(copy)
    results = []
    try:
        for page, our_path, bare_path in pages(db_path, name):
            for clients in client_counts:
                print(f"  {page}, {clients} client(s) ...", flush=True)
                mine = hammer(ours.port, our_path, clients, requests)
                theirs = hammer(bare.port, bare_path, clients, requests)
                results.append({"page": page, "clients": clients, "gputalks_path": our_path,
                                "bare_path": bare_path, "gputalks": asdict(mine), "bare": asdict(theirs),
                                "ratio_req_per_s": round(mine.req_per_s / theirs.req_per_s, 2)})
    finally:
        ours.stop()
        bare.stop()
    return {"requests_per_case": requests, "gputalks_workers": default_workers(), "pages": results}


def inside_load(db_path: Path, queries: list[str], clients: int = 8) -> dict:
    """search_inside_talks through the real `gputalks serve`, `clients` at a time, each query once."""
    server = gputalks_serve(db_path)
    name = db_path.stem
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    chunks = [queries[i::clients] for i in range(clients)]

    def client(mine: list[str]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        for q in mine:
            started = time.perf_counter()
            connection.request("GET", f"/{name}/search_inside_talks.json?q={q.replace(' ', '+')}&talk=&_shape=objects")
            response = connection.getresponse()
            response.read()
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)
                errors[0] += response.status != 200
        connection.close()

    try:
        hammer_once(server.port, f"/{name}/search_inside_talks.json?q=tma&talk=")
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
    args = parser.parse_args()
    work = Path(args.db).parent / "load"
    print(json.dumps(compare(args.db, work, args.requests), indent=2))


if __name__ == "__main__":
    main()
