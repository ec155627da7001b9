"""`gputalks serve` under concurrent clients: every worker process takes a share of the load."""

from __future__ import annotations

import asyncio
import http.client
from pathlib import Path

import httpx

from gputalks.site.serve import spread_connections

from tests.conftest import children, gputalks_serve, in_threads


def test_a_busy_worker_asks_its_clients_to_reconnect():
    """The response sent while another request is in flight closes its connection; one sent
    alone keeps it (and the app's own headers)."""
    second_started = asyncio.Event()
    responses: dict[str, list] = {}

    async def downstream(scope, receive, send):
        if scope["path"] == "/first":
            await second_started.wait()  # answered while /second is in flight
        else:
            second_started.set()
            await asyncio.sleep(0.05)  # answered once /first is done
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def request(app, path: str) -> None:
        scope = {"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""}
        sent: list = []

        async def receive():
            return {"type": "http.request", "body": b""}

        async def send(message):
            sent.append(message)

        await app(scope, receive, send)
        responses[path] = sent[0]["headers"]

    async def both() -> None:
        app = spread_connections(downstream)
        await asyncio.gather(request(app, "/first"), request(app, "/second"))
        await request(app, "/alone")

    asyncio.run(both())
    assert responses["/first"] == [(b"content-type", b"text/plain"), (b"connection", b"close")]
    assert responses["/second"] == [(b"content-type", b"text/plain")]
    assert responses["/alone"] == [(b"content-type", b"text/plain")]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime + stime, in clock ticks


def test_two_workers_share_eight_keep_alive_clients(fresh_db_path):
    """8 clients that open their connections at once and keep them (as the benchmark's and a
    proxy's do): both workers do a real share of the work. Without the reconnect, one worker
    often accepted the whole burst and served it alone."""
    served = gputalks_serve(fresh_db_path, workers=2)
    server, port = served.process, served.port
    try:
        workers = [int(line.split(":")[0]) for line in children(server.pid) if "spawn_main" in line]
        assert len(workers) == 2, children(server.pid)
        before = {pid: cpu_seconds(pid) for pid in workers}
        statuses: list[int] = []

        def client(_: int) -> None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for _ in range(40):
                connection.request("GET", "/talks/talks?_search=cuda")
                response = connection.getresponse()
                response.read()
                statuses.append(response.status)
            connection.close()

        in_threads(client)
        used = {pid: cpu_seconds(pid) - before[pid] for pid in workers}
    finally:
        served.stop()
    assert statuses == [200] * 320
    assert min(used.values()) >= 0.25 * sum(used.values()), used


def test_a_missing_page_is_a_404_and_one_log_line(fresh_db_path, tmp_path):
    """Datasette 0.65 printed each error page's exception as a rich traceback with every frame's
    locals (170 lines, ~100 ms of a worker per 404): a crawler's misses would flood the log."""
    with gputalks_serve(fresh_db_path, workers=1) as served:
        missing = [httpx.get(f"{served.base}{path}")
                   for path in ("/nope", "/nope.json", "/talks/no_such_table", "/talks/talks/no-such-talk.json")]
    assert [r.status_code for r in missing] == [404] * 4
    assert "<h1>Error 404</h1>" in missing[0].text
    assert missing[1].json() == {"ok": False, "error": "Database not found", "status": 404, "title": None}
    text = served.text
    assert "Traceback" not in text and "locals" not in text, text[:2000]
    assert sum(" 404 Not Found" in line for line in text.splitlines()) == 4, text


def test_serving_a_missing_index_is_one_line(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "gputalks", "serve", "--db", str(tmp_path / "missing.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr == f"gputalks: {tmp_path / 'missing.db'}: no index here; run `gputalks refresh` first\n"
