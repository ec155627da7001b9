"""Faults as users meet them: hostile text in exports, a served index stopped by SIGTERM."""

from __future__ import annotations

import csv
import io
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
import sqlite_utils
from markdown_it import MarkdownIt

from gputalks.tables.curation import load_curation
from gputalks.tables.export import render

from tests.conftest import children, gputalks_serve

HOSTILE = "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1)) | =cmd"


def test_exports_are_safe_to_publish(fresh_db_path):
    db = sqlite_utils.Database(fresh_db_path)
    db.table("talks").update("gpumode-lecture-012", {"title": HOSTILE, "url": "javascript:alert(1)"})
    db.table("talks").update("gpumode-lecture-001", {"title": "=HYPERLINK(\"http://x\")"})
    table = load_curation()["gpu-mode-core"]
    markdown, _ = render(db, table, fmt="markdown")
    html = MarkdownIt("commonmark").render(markdown)
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and 'href="javascript' not in html
    assert markdown.count("\n") == len(table.rows) + 2  # no cell broke the table apart
    rows = list(csv.reader(io.StringIO(render(db, table, fmt="csv")[0])))
    cells = [cell for row in rows for cell in row]
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)
    assert "'=HYPERLINK(\"http://x\")" in cells


def gone_within(pids: list[int], seconds: float) -> list[int]:
    """The processes of `pids` still running after waiting up to `seconds` for them to end."""
    deadline = time.monotonic() + seconds
    while (running := [pid for pid in pids if Path(f"/proc/{pid}").exists()]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return running


@pytest.mark.parametrize(("workers", "stop"), [(2, signal.SIGTERM), (2, signal.SIGKILL), (1, signal.SIGTERM)])
def test_serve_stops_with_its_workers_and_frees_its_port(fresh_db_path, workers, stop):
    """SIGTERM stops the server and its workers; after a SIGKILL of the server (nothing to pass
    it on) its workers stop by themselves rather than serving on as orphans. One worker serves
    in the server's own process."""
    served = gputalks_serve(fresh_db_path, workers)
    server, port = served.process, served.port
    processes: list[int] = []
    try:
        assert httpx.get(f"{served.base}/-/versions.json").status_code == 200
        processes = [int(line.split(":")[0]) for line in children(server.pid)]
        if workers > 1:
            assert len(processes) >= workers, processes  # the workers (and multiprocessing's helper)
        server.send_signal(stop)
        started = time.monotonic()
        server.wait(timeout=5)
        assert time.monotonic() - started < 5
        assert gone_within(processes, 5) == []
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # the port is free again
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        for pid in gone_within(processes, 0):
            os.kill(pid, signal.SIGKILL)
