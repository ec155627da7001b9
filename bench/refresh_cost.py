"""The live refresh's cost: GitHub and On-Demand sessions through a local server that adds 100 ms a
request (ETags, 304s), first and with nothing changed (requests, bytes, wall time)."""

from __future__ import annotations

import json
import multiprocessing
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import sqlite_utils

from gputalks.index.pipeline import RefreshOptions, refresh
from gputalks.index.store import IndexFiles
from gputalks.project.settings import Settings, load_config
from gputalks.scraper.http import FetchPolicy


class SlowSource(BaseHTTPRequestHandler):
    """GitHub and the On-Demand API for the refresh benchmark: 100 ms per request, ETags, 304s."""

    documents: dict[str, bytes] = {}
    latency = 0.1
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, the body waits for
    # the client's delayed ACK (+40 ms a request), which real servers avoid.
    disable_nagle_algorithm = True

    def do_GET(self):  # noqa: N802 (http.server's naming)
        time.sleep(self.latency)
        parsed = urlparse(self.path)
        key = parsed.path + ("?id=" + parse_qs(parsed.query)["id"][0] if "id" in parse_qs(parsed.query) else "")
        body = self.documents.get(key)
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        etag = f'"{hash(body) & 0xFFFFFFFF:x}"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if key != "/repos/gpu-mode/lectures/readme"
                         else "text/markdown")
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve_slowly(ports) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowSource)
    ports.put(server.server_address[1])
    server.serve_forever()


def refresh_cost(snapshot: Path, work: Path, sessions: int, concurrency: int) -> dict:
    """A live refresh of GitHub + `sessions` On-Demand sessions through a slow local server."""
    manifest = json.loads((snapshot / "manifest.json").read_text())
    documents, slugs = {}, []
    for entry in manifest["responses"]:
        url = urlparse(entry["url"])
        if entry["source"] == "github":
            documents[url.path] = (snapshot / entry["file"]).read_bytes()
        elif entry["source"] == "gtc" and "id=" in url.query and len(slugs) < sessions:
            slug = parse_qs(url.query)["id"][0]
            slugs.append(slug)
            documents[f"/session?id={slug}"] = (snapshot / entry["file"]).read_bytes()
    # The server runs in its own process, so it does not share the refresh's GIL.
    SlowSource.documents = documents
    ports: multiprocessing.Queue = multiprocessing.get_context("fork").Queue()
    server = multiprocessing.get_context("fork").Process(target=serve_slowly, args=(ports,), daemon=True)
    server.start()
    base = f"http://127.0.0.1:{ports.get(timeout=30)}"
    config = {"github": {"repo": "gpu-mode/lectures", "api": base},
              "gtc": {"api": f"{base}/session", "page": f"{base}/page/{{slug}}/", "sessions": slugs,
                      "recheck_days": load_config()["gtc"].get("recheck_days", 1)}}
    db_path = work / "refresh.db"
    db_path.unlink(missing_ok=True)
    results = {}
    try:
        for label in ("first", "nothing_changed"):
            started = time.perf_counter()
            report = refresh(db_path, Settings(config), RefreshOptions(sources=["github", "gtc"],
                             policy=FetchPolicy(concurrency=concurrency, per_host=concurrency)))
            wall = time.perf_counter() - started
            run = sqlite_utils.Database(IndexFiles.of(db_path).archive).table("refresh_runs").get(report.run_id)
            results[label] = {"requests": report.requests, "bytes": run["bytes"], "wall_s": round(wall, 2),
                              "talk_rows_written": report.stats.talks_written, "exit_code": report.exit_code}
    finally:
        server.terminate()
        server.join()
    first, second = results["first"], results["nothing_changed"]
    bound = 1.5 * first["requests"] * SlowSource.latency / concurrency
    return {**results, "sessions": len(slugs), "latency_ms": SlowSource.latency * 1000,
            "concurrency": concurrency, "first_wall_bound_s": round(bound, 2),
            "nothing_changed_share": round(second["wall_s"] / first["wall_s"], 3)}
