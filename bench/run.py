"""gputalks benchmark: the index at N talks beside the bare-SQLite limit.

    .venv/bin/python bench/run.py [--talks 100000] [--out bench/results.json]

Prints a table and writes the numbers as JSON:
1. generate N talks as raw documents in the real formats;
2. `gputalks rebuild` from them, against one sqlite-utils insert_all + enable_fts
   of the same final rows (ratio; peak memory of the rebuild process);
3. search and faceted pages through Datasette's JSON API (p50/p95);
4. a live refresh against a local HTTP server adding 100 ms per request,
   first and with nothing changed (requests, bytes, wall time);
5. rebuild time at 1k, 10k and N talks (slope, linearity).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import sqlite_utils

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.generate import WORDS, generate, generate_transcripts  # noqa: E402
from gputalks.index.config import Settings, load_config  # noqa: E402
from gputalks.index.pipeline import RefreshOptions, refresh  # noqa: E402
from gputalks.scraper.http import FetchPolicy  # noqa: E402
from gputalks.index.serve import PLUGINS, TEMPLATES, metadata_for  # noqa: E402
from gputalks.index.store import IndexFiles  # noqa: E402

DERIVED = ["talk_changes", "talk_sources", "links", "talk_speakers", "speakers", "curated_rows",
           "curated_tables", "talks", "problems"]


def run_cli(*args: str) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one gputalks command in its own process."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "gputalks.index.cli", *args], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"gputalks {' '.join(args)} failed ({code}): {process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, code


def build_index(n: int, work: Path) -> dict:
    """Generate N talks, archive them (refresh --snapshot), then time a rebuild of
    the derived tables from the archive alone."""
    snapshot = work / f"snapshot-{n}"
    started = time.perf_counter()
    config, plan = generate(n, snapshot)
    generated = time.perf_counter() - started
    db_path = work / f"talks-{n}.db"
    db_path.unlink(missing_ok=True)
    first, first_rss, _ = run_cli("refresh", "--db", str(db_path), "--snapshot", str(snapshot),
                                  "--config", str(config))
    db = sqlite_utils.Database(db_path)
    talks = db.table("talks").count
    with db.atomic():
        for table in DERIVED:
            db.execute(f"delete from [{table}]")
    db.conn.execute("vacuum")
    db.close()
    rebuild, rss, _ = run_cli("rebuild", "--db", str(db_path), "--config", str(config))
    rebuilt = sqlite_utils.Database(db_path).table("talks").count
    documents = sqlite_utils.Database(IndexFiles.of(db_path).archive).table("raw_documents").count
    return {"talks": n, "expected_talks": plan.talks, "talks_after_refresh": talks, "talks_after_rebuild": rebuilt,
            "raw_documents": documents, "generate_s": round(generated, 2), "first_refresh_s": round(first, 2),
            "first_refresh_peak_mib": round(first_rss), "rebuild_s": round(rebuild, 2),
            "rebuild_peak_mib": round(rss), "db_path": str(db_path), "config": str(config)}


def baseline(db_path: Path, work: Path, tables: tuple[str, ...] = ("talks",)) -> float:
    """The same final rows with one insert_all per table in one transaction, plus
    enable_fts on talks: the bare-SQLite limit for writing what rebuild writes."""
    source = sqlite_utils.Database(db_path)
    rows = {name: [dict(r) for r in source.query(f"select * from [{name}]")] for name in tables}
    target = work / "baseline.db"
    target.unlink(missing_ok=True)
    started = time.perf_counter()
    db = sqlite_utils.Database(target)
    with db.atomic():
        for name in tables:
            db.table(name).insert_all(rows[name], batch_size=1000)
    db.table("talks").enable_fts(["title", "description", "speaker_names"], tokenize="porter")
    return time.perf_counter() - started


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def datasette_latency(db_path: Path) -> dict:
    from datasette.app import Datasette

    ds = Datasette([], immutables=[str(db_path)], metadata=metadata_for(db_path),
                   template_dir=str(TEMPLATES), plugins_dir=str(PLUGINS),
                   settings={"facet_time_limit_ms": 5000, "sql_time_limit_ms": 10000,
                             "suggest_facets": False})  # as `gputalks serve` runs it
    rng = random.Random(11)
    name = Path(db_path).stem
    queries = [" ".join(rng.sample(WORDS, rng.choice((1, 1, 2, 2, 3)))) for _ in range(200)]

    async def timed(path: str) -> float:
        started = time.perf_counter()
        response = await ds.client.get(path)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{path}: HTTP {response.status_code} {response.text[:300]}")
        return elapsed

    async def main() -> dict:
        await timed(f"/{name}/talks.json?_size=1")  # warm the connection and caches
        ranked = [await timed(f"/{name}/search_talks.json?q={q.replace(' ', '+')}&_shape=objects")
                  for q in queries]
        table_search = [await timed(f"/{name}/talks.json?_search={q.replace(' ', '+')}&_size=50&_nocount=1")
                        for q in queries]
        faceted = [await timed(f"/{name}/talks.json?_size=50") for _ in range(20)]
        return {"ranked_search": ranked, "table_search": table_search, "faceted_page": faceted}

    results = asyncio.run(main())
    return {key: {"p50_ms": round(statistics.median(v), 1), "p95_ms": round(percentile(v, 0.95), 1),
                  "n": len(v)} for key, v in results.items()}


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


def transcripts(work: Path, talks: int, minutes: int) -> dict:
    """Build an index of `talks` × `minutes` of captions; time segment search through Datasette."""
    from datasette.app import Datasette

    snapshot = work / "snapshot-transcripts"
    config, words = generate_transcripts(snapshot, talks, minutes)
    db_path = work / "inside.db"
    db_path.unlink(missing_ok=True)
    started = time.perf_counter()
    report = refresh(db_path, Settings(config), RefreshOptions(snapshot=snapshot, sources=["youtube"]))
    build = time.perf_counter() - started
    segments = sqlite_utils.Database(db_path).table("segments").count
    ds = Datasette([], immutables=[str(db_path)], metadata=metadata_for(db_path),
                   template_dir=str(TEMPLATES), plugins_dir=str(PLUGINS), settings={"sql_time_limit_ms": 10000})
    rng = random.Random(13)
    queries = [" ".join(rng.sample(WORDS, rng.choice((1, 1, 2)))) for _ in range(200)]
    name = db_path.stem

    async def run_queries() -> list[float]:
        await ds.client.get(f"/{name}/search_inside_talks.json?q=tma")
        timings = []
        for q in queries:
            began = time.perf_counter()
            response = await ds.client.get(f"/{name}/search_inside_talks.json?q={q.replace(' ', '+')}&_shape=objects")
            timings.append((time.perf_counter() - began) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"search_inside_talks {q!r}: HTTP {response.status_code}")
        return timings

    timings = asyncio.run(run_queries())
    return {"talks": talks, "minutes_each": minutes, "words": words, "segments": segments,
            "exit_code": report.exit_code, "build_s": round(build, 2),
            "db_mib": round(db_path.stat().st_size / 2**20, 1),
            "search_p50_ms": round(statistics.median(timings), 1),
            "search_p95_ms": round(percentile(timings, 0.95), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--talks", type=int, default=100_000)
    parser.add_argument("--scales", default="1000,10000", help="smaller sizes for the scaling line")
    parser.add_argument("--refresh-sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--transcript-talks", type=int, default=120)
    parser.add_argument("--transcript-minutes", type=int, default=75)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results.json")
    parser.add_argument("--keep", type=Path, help="keep the generated data in this directory")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="gputalks-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    out: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                             "platform": platform.platform(), "sqlite": sqlite_utils.Database(memory=True)
                             .execute("select sqlite_version()").fetchone()[0]}}
    try:
        scales = sorted({int(s) for s in args.scales.split(",") if s} | {args.talks})
        builds = {}
        for n in scales:
            print(f"building {n:,} talks ...", flush=True)
            builds[n] = build_index(n, work)
        big = builds[args.talks]
        print("baseline ...", flush=True)
        base = baseline(Path(big["db_path"]), work)
        every_table = baseline(Path(big["db_path"]), work, ("talks", "speakers", "talk_speakers", "links",
                                                            "talk_sources", "talk_changes"))
        out["rebuild"] = {**{k: v for k, v in big.items() if k not in ("db_path", "config")},
                          "baseline_s": round(base, 2), "ratio": round(big["rebuild_s"] / base, 2),
                          "baseline_all_tables_s": round(every_table, 2),
                          "ratio_all_tables": round(big["rebuild_s"] / every_table, 2)}
        print("datasette ...", flush=True)
        out["datasette"] = datasette_latency(Path(big["db_path"]))
        print("refresh cost ...", flush=True)
        out["refresh"] = refresh_cost(work / f"snapshot-{args.talks}", work, args.refresh_sessions,
                                      args.concurrency)
        print("transcripts ...", flush=True)
        out["transcripts"] = transcripts(work, args.transcript_talks, args.transcript_minutes)
        points = [(n, builds[n]["rebuild_s"]) for n in scales]
        slope = (points[-1][1] - points[0][1]) / ((points[-1][0] - points[0][0]) / 1000)
        per_talk = {n: t / n * 1000 for n, t in points}
        out["scaling"] = {"rebuild_s": {str(n): t for n, t in points},
                          "slope_s_per_1k_talks": round(slope, 3),
                          "ms_per_talk": {str(n): round(v, 3) for n, v in per_talk.items()}}
        out["total_s"] = round(time.perf_counter() - started, 1)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print_table(out)


def print_table(out: dict) -> None:
    r, d, f, s, t = out["rebuild"], out["datasette"], out["refresh"], out["scaling"], out["transcripts"]
    rows = [
        ("talks (expected / after rebuild)", f"{r['expected_talks']:,} / {r['talks_after_rebuild']:,}", ""),
        ("raw documents", f"{r['raw_documents']:,}", ""),
        ("rebuild", f"{r['rebuild_s']} s", "target <= 1.5x baseline"),
        ("baseline insert_all + enable_fts", f"{r['baseline_s']} s", ""),
        ("ratio", f"{r['ratio']}x", "PASS" if r["ratio"] <= 1.5 else "MISS"),
        ("baseline writing every table rebuild writes", f"{r['baseline_all_tables_s']} s",
         f"ratio {r['ratio_all_tables']}x"),
        ("rebuild peak memory", f"{r['rebuild_peak_mib']} MiB", "PASS" if r["rebuild_peak_mib"] <= 1024 else "MISS"),
        ("search_talks (ranked) p50 / p95", f"{d['ranked_search']['p50_ms']} / {d['ranked_search']['p95_ms']} ms",
         "PASS" if d["ranked_search"]["p95_ms"] <= 50 else "MISS"),
        ("table _search p50 / p95", f"{d['table_search']['p50_ms']} / {d['table_search']['p95_ms']} ms",
         "information: search + every facet"),
        ("faceted talks page p50 / p95", f"{d['faceted_page']['p50_ms']} / {d['faceted_page']['p95_ms']} ms",
         "PASS" if d["faceted_page"]["p95_ms"] <= 300 else "MISS"),
        ("refresh (a) first: requests / bytes / wall",
         f"{f['first']['requests']} / {f['first']['bytes']:,} / {f['first']['wall_s']} s",
         f"bound {f['first_wall_bound_s']} s: " + ("PASS" if f["first"]["wall_s"] <= f["first_wall_bound_s"] else "MISS")),
        ("refresh (b) unchanged: requests / bytes / wall",
         f"{f['nothing_changed']['requests']} / {f['nothing_changed']['bytes']:,} / {f['nothing_changed']['wall_s']} s",
         f"{f['nothing_changed_share']:.0%} of (a), {f['nothing_changed']['talk_rows_written']} rows: "
         + ("PASS" if f["nothing_changed_share"] <= 0.10 and f["nothing_changed"]["talk_rows_written"] == 0 else "MISS")),
        ("rebuild at " + ", ".join(f"{int(k):,}" for k in s["rebuild_s"]),
         ", ".join(f"{v} s" for v in s["rebuild_s"].values()), f"slope {s['slope_s_per_1k_talks']} s / 1k talks"),
        ("ms per talk", ", ".join(f"{v}" for v in s["ms_per_talk"].values()), "linear if flat"),
        (f"transcripts: {t['talks']} talks x {t['minutes_each']} min",
         f"{t['words']:,} words, {t['segments']:,} segments", f"build {t['build_s']} s, DB {t['db_mib']} MiB"),
        ("segment search p50 / p95", f"{t['search_p50_ms']} / {t['search_p95_ms']} ms",
         "PASS" if t["search_p95_ms"] <= 100 else "MISS"),
        ("benchmark wall time", f"{out['total_s']} s", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\nmachine: {out['machine']['cpus']} cores, Python {out['machine']['python']}, "
          f"SQLite {out['machine']['sqlite']}, {out['machine']['platform']}")
    for name, value, verdict in rows:
        print(f"{name:<{width}}  {value:<32} {verdict}")


if __name__ == "__main__":
    main()
