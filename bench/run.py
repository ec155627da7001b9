"""gputalks benchmark: what users wait for, beside bare baselines, in one run.

    .venv/bin/python bench/run.py [--talks 100000] [--large 300000] [--out bench/results.json]
    .venv/bin/python bench/run.py --table     # the table of the last results, into docs/benchmark.md again

Prints a table and writes the numbers as JSON:
1. generate N talks as raw documents in the real formats;
2. first refresh and `gputalks rebuild` from them (time; peak memory, the command's own
   plus its worker's: `bench/peak.py`), against a
   baseline that writes the same rows into the same schema (every table the
   rebuild writes, with its indexes, foreign keys on, and FTS), in alternating
   pairs (--rounds) whose median ratio is the verdict;
3. the real `gputalks serve` against a bare `datasette -i` of the same file,
   every HTML page type and JSON, 1 and 8 concurrent clients (bench/load.py);
4. a live refresh against a local HTTP server adding 100 ms per request,
   first and with nothing changed (requests, bytes, wall time);
5. `search_inside_talks` through `gputalks serve` at 10x transcripts, 8 clients;
6. rebuild time and peak memory at 1k, 10k, N and the large size (shape).
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import json
import os
import platform
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from urllib.parse import quote_plus
from pathlib import Path

import sqlite_utils

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.generate import WORDS, generate, generate_transcripts  # noqa: E402
from gputalks.project.settings import Settings  # noqa: E402
from gputalks.index.pipeline import RefreshOptions, refresh  # noqa: E402
from gputalks.index.schema import bulk_load  # noqa: E402
from gputalks.index.runs import last_good_run  # noqa: E402
from gputalks.index.raw_documents import load_documents  # noqa: E402
from gputalks.index.store import IndexFiles, open_working_copy  # noqa: E402
from gputalks.scraper.sources import SOURCES  # noqa: E402
from bench.load import compare, served_load  # noqa: E402
from bench.peak import PEAK_FILE  # noqa: E402
from bench.refresh_cost import refresh_cost  # noqa: E402
from bench.report import missed, publish  # noqa: E402

DERIVED = ["talk_changes", "talk_sources", "links", "talk_speakers", "speakers", "curated_rows",
           "curated_tables", "talks", "problems", "talk_related"]


def write_project(work: Path, db_path: Path, config: Path) -> Path:
    """The generated index's own project (gputalks.toml, empty overrides and curation), so a plain
    `gputalks rebuild` in `work` rebuilds it: the checkout's overrides name talks it lacks."""
    (work / "curation").mkdir(exist_ok=True)
    (work / "overrides.toml").write_text("# the benchmark's data needs no overrides\n", encoding="utf-8")
    (work / "gputalks.toml").write_text(
        f'[gputalks]\ndb = "{db_path.name}"\nsources = "{config.relative_to(work)}"\n'
        'overrides = "overrides.toml"\ncuration = "curation"\n', encoding="utf-8")
    return work


def run_cli(*args: str, project: Path) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one gputalks command of `project` in its own
    process (its own peak plus its worker's, as they saw them: `bench/peak.py`)."""
    with tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        started = time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "bench.peak", "--project", str(project), *args], cwd=REPO,
                                   env={**os.environ, PEAK_FILE: str(peak_file)},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, errors = process.communicate()
        wall = time.perf_counter() - started
        code = process.returncode
        if code not in (0, 1) or not peak_file.exists():
            raise SystemExit(f"gputalks {' '.join(args)} failed ({code}): {errors.decode()[-2000:]}")
        return wall, int(peak_file.read_text()) / 1024, code


def empty_derived(db_path: Path) -> None:
    """Delete every derived row (the archive stays) and vacuum, as a rebuild from scratch starts."""
    db = sqlite_utils.Database(db_path)
    with db.atomic():
        for table in DERIVED:
            db.execute(f"delete from [{table}]")
    db.conn.execute("vacuum")
    db.close()


def rebuild_from_archive(db_path: Path) -> tuple[float, float]:
    """Empty the derived tables (vacuumed) and time `gputalks rebuild` refilling them
    from the archive alone: (wall seconds, peak MiB)."""
    empty_derived(db_path)
    wall, rss, _ = run_cli("rebuild", "--db", str(db_path), project=db_path.parent)
    return wall, rss


def rebuild_against_baseline(build: dict, work: Path, rounds: int) -> dict:
    """Rebuild and baseline in alternating pairs, so both see the machine in the same
    state; the ratio is the median of the pairs' ratios (one run's pairs here: 1.02x to 1.64x)."""
    db_path = Path(build["db_path"])
    pairs = [(build["rebuild_s"], build["rebuild_peak_mib"], baseline(db_path, work))]
    for _ in range(rounds - 1):
        wall, rss = rebuild_from_archive(db_path)
        pairs.append((wall, rss, baseline(db_path, work)))
    return {"rebuild_s": round(statistics.median(w for w, _, _ in pairs), 2),
            "rebuild_peak_mib": round(max(m for _, m, _ in pairs)),
            "baseline_same_schema_s": round(statistics.median(b for _, _, b in pairs), 2),
            "ratio": round(statistics.median(w / b for w, _, b in pairs), 2),
            "pairs": [{"rebuild_s": round(w, 2), "baseline_s": round(b, 2), "ratio": round(w / b, 2)}
                      for w, _, b in pairs]}


def rebuild_every_talk_changed(db_path: Path, baseline_s: float) -> dict:
    """A rebuild of a full index whose every talk differs from what the archive gives (each title
    and length changed in place): every talk rewritten, one change logged per field, the FTS and
    facet keys updated row by row. Against the same-schema baseline's median."""
    db = sqlite_utils.Database(db_path)
    with db.atomic():
        db.execute("update talks set title = title || ' (draft)', duration_s = coalesce(duration_s, 0) + 1")
    db.close()
    wall, rss, _ = run_cli("rebuild", "--db", str(db_path), project=db_path.parent)
    changes = sqlite_utils.Database(db_path).execute(
        "select count(distinct talk_id) from talk_changes where run_id = (select max(id) from refresh_runs)").fetchone()[0]
    return {"rebuild_s": round(wall, 2), "peak_mib": round(rss), "talks_changed": changes,
            "ratio": round(wall / baseline_s, 2)}


def build_index(n: int, work: Path) -> dict:
    """Generate N talks, archive them (refresh --snapshot), then time a rebuild of
    the derived tables from the archive alone."""
    snapshot = work / f"snapshot-{n}"
    started = time.perf_counter()
    config, plan = generate(n, snapshot)
    generated = time.perf_counter() - started
    db_path = work / f"talks-{n}.db"
    db_path.unlink(missing_ok=True)
    project = write_project(work, db_path, config)
    first, first_rss, _ = run_cli("refresh", "--db", str(db_path), "--snapshot", str(snapshot), project=project)
    talks = sqlite_utils.Database(db_path).table("talks").count
    rebuild, rss = rebuild_from_archive(db_path)
    rebuilt = sqlite_utils.Database(db_path).table("talks").count
    if talks != plan.talks or rebuilt != plan.talks:  # numbers on a partial index would mislead
        raise SystemExit(f"{n:,} talks generated, {talks:,} after the refresh, {rebuilt:,} after the rebuild")
    documents = sqlite_utils.Database(IndexFiles.of(db_path).archive).table("raw_documents").count
    return {"talks": n, "expected_talks": plan.talks, "talks_after_refresh": talks, "talks_after_rebuild": rebuilt,
            "raw_documents": documents, "generate_s": round(generated, 2), "first_refresh_s": round(first, 2),
            "first_refresh_peak_mib": round(first_rss), "rebuild_s": round(rebuild, 2),
            "rebuild_peak_mib": round(rss), "db_path": str(db_path), "config": str(config)}


# Every table a rebuild writes, parents first (foreign keys are on, as in the index).
WRITTEN = ["refresh_runs", "talks", "speakers", "talk_speakers", "links", "talk_sources", "talk_changes",
           "chapters", "segments", "curated_tables", "curated_rows", "problems", "talk_related"]


def baseline(db_path: Path, work: Path) -> float:
    """What any pipeline must spend to make this index: parsing the archived documents of the
    sources' last good runs (each source's own `parse`), then the same final rows written into
    the same schema (gputalks' own `ensure_schema`: indexes, foreign keys, FTS) through the same
    connection settings as a build's working copy, each table with one `executemany` in one
    transaction. The rebuild's ratio to it is the pipeline's own overhead: linking, merging,
    diffing, history."""
    archive = sqlite_utils.Database(IndexFiles.of(db_path).archive)
    started = time.perf_counter()
    for name, source in SOURCES.items():
        last = last_good_run(archive, name)
        if last is not None:
            source.load().parse(load_documents(archive, last.document_ids), last.config)
    parsed = time.perf_counter() - started
    archive.close()
    source = sqlite_utils.Database(db_path)
    rows = {name: source.execute(f"select * from [{name}]").fetchall() for name in WRITTEN}
    columns = {name: [c.name for c in source.table(name).columns] for name in WRITTEN}
    target = work / "baseline.db"
    target.unlink(missing_ok=True)
    started = time.perf_counter()
    db = open_working_copy(target)
    with db.atomic():
        for name in WRITTEN:
            with bulk_load(db, name):
                listed = ", ".join(f"[{c}]" for c in columns[name])
                db.conn.executemany(f"insert into [{name}] ({listed}) values ({', '.join('?' * len(columns[name]))})",
                                    rows[name])
    db.close()
    return parsed + time.perf_counter() - started


def long_searches(db_path: Path, count: int) -> dict:
    """Pasted pages as searches: `count` different queries of 2,500 words through `gputalks serve`,
    8 clients, each to be refused at once (400, with the limit)."""
    rng, words = random.Random(5), list(WORDS)
    return served_load(db_path, [f"/search?q={quote_plus(' '.join(rng.choices(words, k=2500)))}" for _ in range(count)],
                       clients=8, expected=400)


def transcripts(work: Path, talks: int, minutes: int) -> dict:
    """Build an index of `talks` × `minutes` of captions; search inside it through `gputalks serve`."""
    snapshot = work / "snapshot-transcripts"
    config, words = generate_transcripts(snapshot, talks, minutes)
    db_path = work / "inside.db"
    db_path.unlink(missing_ok=True)
    started = time.perf_counter()
    report = refresh(db_path, Settings(config), RefreshOptions(snapshot=snapshot, sources=["youtube"]))
    build = time.perf_counter() - started
    segments = sqlite_utils.Database(db_path).table("segments").count
    # The most common words (the vocabulary's Zipf head), alone and in pairs, each query asked once.
    rng = random.Random(13)
    common = list(WORDS[:30])
    queries = common + [f"{a} {b}" for a, b in itertools.combinations(common, 2)]
    rng.shuffle(queries)
    served = served_load(db_path, [f"/{db_path.stem}/search_inside_talks.json?q={quote_plus(q)}&talk=&_shape=objects"
                                   for q in queries], clients=8)
    return {"talks": talks, "minutes_each": minutes, "words": words, "segments": segments,
            "exit_code": report.exit_code, "build_s": round(build, 2),
            "db_mib": round(db_path.stat().st_size / 2**20, 1), "search_8_clients": served}


def search_quality(work: Path) -> dict:
    """The judged reader queries (bench/judged_queries.toml) on the snapshot index: per category,
    all of them, the held-out third alone, and the static site's search in Chromium."""
    from bench.search_quality import by_category, judged, quality, query_scores
    from bench.static_search import static_results
    from gputalks.project.settings import default_settings
    from gputalks.site.serve import served_datasette
    from gputalks.site.static import build_site, slug

    db_path = work / "snapshot" / "talks.db"
    db_path.parent.mkdir(parents=True, exist_ok=True)
    refresh(db_path, default_settings(), RefreshOptions(snapshot=REPO.parent / "shared" / "data" / "snapshot"))
    ds = served_datasette(db_path)
    out = {"server": quality(ds), "held_out": quality(ds, held_out=True)}
    build_site(db_path, work / "snapshot" / "site")
    with sqlite3.connect(db_path) as db:
        ids = {slug(talk_id): talk_id for (talk_id,) in db.execute("select id from talks")}
    queries = judged()
    found = static_results(work / "snapshot" / "site", ids, [q.q for q in queries])
    out["static"] = by_category([(q, query_scores(q, found[q.q])) for q in queries])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--talks", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=300_000, help="rebuild time and memory only (0: skip)")
    parser.add_argument("--scales", default="1000,10000", help="smaller sizes for the scaling line")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rebuild/baseline pairs for the rebuild ratio (one pair swings 1.0-1.6x here)")
    parser.add_argument("--requests", type=int, default=160,
                        help="requests per page and client count, each on a URL no request repeats")
    parser.add_argument("--refresh-sessions", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--transcript-talks", type=int, default=1200, help="10x the 120 talks of earlier runs")
    parser.add_argument("--transcript-minutes", type=int, default=75)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results.json")
    parser.add_argument("--keep", type=Path, help="keep the generated data in this directory")
    parser.add_argument("--readme", type=Path, default=REPO / "docs" / "benchmark.md",
                        help="write the table into this page between its bench-table markers")
    parser.add_argument("--table", action="store_true", help="only print the table of --out (and update --readme, README.md)")
    args = parser.parse_args()
    if args.table:
        publish(json.loads(args.out.read_text()), args.readme, REPO / "README.md")
        return
    # bytecode, as an installed package has: with PYTHONDONTWRITEBYTECODE, each command compiled it
    compileall.compile_dir(REPO / "gputalks", quiet=1)
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
            if n == args.talks:  # every kind of page has its URLs, before the long part of the run
                from bench.pages import page_kinds

                page_kinds(Path(builds[n]["db_path"]), args.requests * 2)
        big = builds[args.talks]
        print(f"rebuild against the same-schema baseline, {args.rounds} pairs ...", flush=True)
        out["rebuild"] = {**{k: v for k, v in big.items() if k not in ("db_path", "config")},
                          **rebuild_against_baseline(big, work, args.rounds)}
        print("search quality ...", flush=True)
        out["search_quality"] = search_quality(work)
        print("serving: gputalks serve vs bare Datasette ...", flush=True)
        out["serving"] = compare(Path(big["db_path"]), work, args.requests)
        out["long_searches"] = long_searches(Path(big["db_path"]), args.requests)
        print("rebuild where every talk changed ...", flush=True)  # after serving: it writes 100,000 changes
        out["rebuild"]["every_talk_changed"] = rebuild_every_talk_changed(
            Path(big["db_path"]), out["rebuild"]["baseline_same_schema_s"])
        print("refresh cost ...", flush=True)
        out["refresh"] = refresh_cost(work / f"snapshot-{args.talks}", work, args.refresh_sessions,
                                      args.concurrency)
        print("transcripts ...", flush=True)
        out["transcripts"] = transcripts(work, args.transcript_talks, args.transcript_minutes)
        if args.large:
            for n in [s for s in scales if s != args.talks]:
                shutil.rmtree(work / f"snapshot-{n}", ignore_errors=True)
            print(f"building {args.large:,} talks ...", flush=True)
            large = build_index(args.large, work)
            builds[args.large] = large
            out["large"] = {k: v for k, v in large.items() if k not in ("db_path", "config")}
        points = sorted((n, b["rebuild_s"], b["rebuild_peak_mib"]) for n, b in builds.items())
        out["scaling"] = {"rebuild_s": {str(n): t for n, t, _ in points},
                          "rebuild_peak_mib": {str(n): m for n, _, m in points},
                          "ms_per_talk": {str(n): round(t / n * 1000, 3) for n, t, _ in points},
                          "kib_per_talk": {str(n): round(m * 1024 / n, 2) for n, _, m in points}}
        out["total_s"] = round(time.perf_counter() - started, 1)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    publish(out, args.readme, REPO / "README.md")
    raise SystemExit(1 if missed(out) else 0)  # 0: every kept target met


if __name__ == "__main__":
    main()
