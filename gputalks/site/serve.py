"""Serving the index with Datasette and gputalks' Datasette plugin (registered by its entry points)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


# The settings every served index runs with (`serve` and `publish` alike).
SERVE_SETTINGS: dict[str, Any] = {"default_page_size": 50, "default_facet_size": 10,
                                  "facet_time_limit_ms": 1000, "suggest_facets": False}


def inspect_file(db_path: Path, key: str) -> Path:
    """`datasette inspect` data (hash, table counts) for this version of the file, computed once
    per version: Datasette then serves counts without counting on its first requests."""
    stat = db_path.stat()
    version = f"{stat.st_size}-{stat.st_mtime_ns}"
    directory = Path(tempfile.gettempdir())
    target = directory / f"gputalks-inspect-{db_path.stem}-{key}-{version}.json"
    if not target.exists():
        for stale in directory.glob(f"gputalks-inspect-{db_path.stem}-{key}-*.json"):
            stale.unlink(missing_ok=True)
        partial = target.with_suffix(".partial")
        done = subprocess.run([sys.executable, "-m", "datasette", "inspect", str(db_path),
                               "--inspect-file", str(partial)], capture_output=True, text=True)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            said = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"{db_path}: Datasette cannot read it ({said[0]})")
        partial.replace(target)
    return target


# What each worker process needs to build the app, passed by `gputalks serve` in the environment.
SERVE_ENV = "GPUTALKS_SERVE"


@dataclass(frozen=True)
class ServeSpec:
    db: str
    inspect_file: str
    supervisor: int  # the pid of `gputalks serve`, which uvicorn takes over
    workers: int = 1


def default_workers() -> int:
    """One worker process per core: a Datasette page is mostly Python (templates, plugin hooks),
    which one process runs on one core at a time."""
    return max(1, os.cpu_count() or 1)


def serve_command(db_path: str | Path, port: int = 8001, host: str = "127.0.0.1",
                  workers: int | None = None) -> tuple[list[str], dict[str, str]]:
    """uvicorn running `workers` processes of the app below, and the environment they read."""
    db_path = Path(db_path)
    if not db_path.exists():
        raise FileNotFoundError(f"{db_path}: no index here; run `gputalks refresh` first")
    key = hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:12]
    workers = workers or default_workers()
    spec = ServeSpec(db=str(db_path), inspect_file=str(inspect_file(db_path, key)), supervisor=os.getpid(),
                     workers=workers)
    command = [sys.executable, "-m", "uvicorn", f"{__name__}:app", "--factory",
               "--workers", str(workers), "--host", host, "--port", str(port),
               "--log-level", "info"]
    return command, {**os.environ, SERVE_ENV: json.dumps(asdict(spec))}


def stop_with_supervisor(supervisor: int) -> None:
    """A worker ends when the process that started it ends, even by SIGKILL (which it cannot
    pass on): no orphaned worker keeps serving, and holding the port, after `serve` is gone."""
    if os.getpid() == supervisor:  # one worker: uvicorn serves in the `serve` process itself
        return
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:  # it ended while this worker was starting
        raise SystemExit(0)


def served_datasette(db_path: str | Path, inspect_data: dict | None = None):
    """Datasette as `gputalks serve` runs it (as `datasette serve -i` would build it) with its
    settings; metadata, templates and pages come from the installed plugin. The tests serve
    through this too."""
    from datasette.app import Datasette

    return Datasette([], immutables=[str(db_path)], inspect_data=inspect_data, settings=SERVE_SETTINGS)


def app():
    """The ASGI app of one worker process."""
    spec = ServeSpec(**json.loads(os.environ[SERVE_ENV]))
    stop_with_supervisor(spec.supervisor)
    inspect_data = json.loads(Path(spec.inspect_file).read_text(encoding="utf-8"))
    served = served_datasette(spec.db, inspect_data).app()
    return spread_connections(served) if spec.workers > 1 else served


def spread_connections(app):
    """ASGI middleware for a worker among several: while it answers other requests, it asks
    the client to reconnect (`Connection: close`), so the next request goes to whichever
    worker accepts first, most often an idle one. Otherwise the worker that accepts a burst
    of connections keeps them all (keep-alive) while the others idle: 8 clients on 2 workers
    ran at 50-65% of the throughput in about half the runs, p95 twice as long."""
    in_flight = 0

    async def spread(scope, receive, send):
        nonlocal in_flight
        if scope.get("type") != "http":
            return await app(scope, receive, send)
        in_flight += 1

        async def send_closing_when_busy(message):
            if message.get("type") == "http.response.start" and in_flight > 1:
                message = dict(message, headers=[*message.get("headers", []), (b"connection", b"close")])
            await send(message)

        try:
            await app(scope, receive, send_closing_when_busy)
        finally:
            in_flight -= 1

    return spread
