"""The unattended nightly refresh, with real processes: SIGKILL, concurrent
readers, faults from a local HTTP server, two refreshes at once."""

import html
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
import time

import pytest
import sqlite_utils
from werkzeug import Request, Response

from gputalks.project.settings import load_config
from gputalks.index.pipeline import RefreshOptions, refresh
from gputalks.scraper.http import FetchPolicy
from gputalks.project.resources import DEFAULT_SOURCES
from gputalks.index.store import IndexFiles

from tests.conftest import REPO, SNAPSHOT, copy_index, gputalks_serve, holds_the_lock, wait_for, with_sources

NEW_TITLE = "Flash Attention, revisited"


def changed_snapshot(tmp_path):
    """A copy of the recorded snapshot in which lecture 12 was renamed."""
    target = tmp_path / "snapshot-changed"
    shutil.copytree(SNAPSHOT, target)
    readme = target / "github" / "readme.md"
    readme.write_text(readme.read_text().replace("## Lecture 12: Flash Attention", f"## Lecture 12: {NEW_TITLE}"))
    manifest = json.loads((target / "manifest.json").read_text())
    for entry in manifest["responses"]:
        entry.get("headers", {}).pop("etag", None)  # a changed document has a new ETag
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def start_refresh(db_path, *args):
    return subprocess.Popen([sys.executable, "-m", "gputalks", "refresh", "--db", str(db_path), *args],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def state(db_path):
    """(integrity, talks, lecture 12's title, finished runs), each read on a fresh connection."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        integrity = conn.execute("pragma integrity_check").fetchone()[0]
        talks = conn.execute("select count(*) from talks").fetchone()[0]
        title = conn.execute("select title from talks where id = 'gpumode-lecture-012'").fetchone()[0]
        last_title_change = conn.execute(
            "select new_value from talk_changes where talk_id = 'gpumode-lecture-012' and field = 'title' "
            "order by id desc limit 1").fetchone()
        fts = conn.execute("select count(*) from talks_fts").fetchone()[0]
        runs = conn.execute("select count(*) from refresh_runs where finished_at is not null").fetchone()[0]
    finally:
        conn.close()
    consistent = (fts == talks) and (last_title_change is None and title == "Flash Attention"
                                     or last_title_change is not None and last_title_change[0] == title)
    return integrity, talks, title, runs, consistent


def test_sigkill_at_any_point_leaves_the_last_good_index(fresh_db_path, tmp_path):
    """Killed anywhere from its start to past its end (points spread over how long an
    uninterrupted refresh takes on this machine, however busy), a refresh leaves the last good
    index or its own finished one, never a mix."""
    changed = changed_snapshot(tmp_path)
    readme = changed / "github" / "readme.md"
    # How long a refresh takes here: the faster of two, so that one slow start on a busy machine
    # does not put every kill point past the end.
    timings = []
    for n in range(2):
        probe = copy_index(fresh_db_path, tmp_path / f"probe-{n}.db")
        started = time.monotonic()
        assert start_refresh(probe, "--snapshot", str(changed)).wait() == 0
        timings.append(time.monotonic() - started)
    whole = min(timings)
    killed_mid_run, wanted = 0, NEW_TITLE
    for share in (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.5):
        before = state(fresh_db_path)
        process = start_refresh(fresh_db_path, "--snapshot", str(changed))
        try:
            process.wait(timeout=share * whole)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        process.wait()
        integrity, talks, title, runs, consistent = state(fresh_db_path)
        assert integrity == "ok" and talks == 150 and consistent, share
        # all of the last good refresh and nothing of this one, or (killed after
        # the swap) all of this one
        assert (title, runs) in (before[2:4], (wanted, before[3] + 1)), share
        if process.returncode != -signal.SIGKILL:
            assert process.returncode == 0, (share, process.stderr.read()[-2000:])
        if title == wanted:  # flip the title so the next round has something to change again
            old, wanted = wanted, ("Flash Attention" if wanted == NEW_TITLE else NEW_TITLE)
            readme.write_text(readme.read_text().replace(f"## Lecture 12: {old}\n", f"## Lecture 12: {wanted}\n"))
    assert killed_mid_run >= 4
    # and the next refresh after all that works
    final = start_refresh(fresh_db_path, "--snapshot", str(changed))
    assert final.wait() == 0, final.stderr.read()


def test_readers_never_see_a_partial_index(fresh_db_path, tmp_path):
    """A reader opening the file again and again (an export), and a running Datasette
    serving it immutable, while refreshes change the index."""
    changed = changed_snapshot(tmp_path)
    served = gputalks_serve(fresh_db_path)
    port = served.port
    import httpx

    errors, seen_titles, datasette_counts = [], set(), []
    stop = threading.Event()

    def read_file():
        while not stop.is_set():
            try:
                integrity, talks, title, _, consistent = state(fresh_db_path)
                seen_titles.add(title)
                if talks != 150 or not consistent:
                    errors.append(("partial", talks, title))
            except sqlite3.Error as exc:
                errors.append(("error", str(exc)))

    def read_datasette():
        while not stop.is_set():
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/talks/talks.json?_size=0", timeout=5)
            except httpx.ConnectError:
                time.sleep(0.05)
                continue
            if response.status_code != 200:
                errors.append(("datasette", response.status_code))
            else:
                datasette_counts.append(response.json()["filtered_table_rows_count"])

    readers = [threading.Thread(target=read_file), threading.Thread(target=read_datasette)]
    for reader in readers:
        reader.start()
    try:
        for source in (changed, SNAPSHOT, changed):
            process = start_refresh(fresh_db_path, "--snapshot", str(source))
            assert process.wait() == 0, process.stderr.read()
    finally:
        stop.set()
        for reader in readers:
            reader.join()
        served.stop()
    assert errors == []
    assert seen_titles == {"Flash Attention", NEW_TITLE}  # the reader saw both indexes, never a mix
    assert datasette_counts and set(datasette_counts) == {150}


def session_id(slug: str) -> str:
    return json.loads((SNAPSHOT / f"gtc/session-{slug}.json").read_text())["sessionData"]["sessionID"]


class Sources:
    """A local GitHub + GTC serving the recorded documents, with faults to switch on."""

    def __init__(self, httpserver):
        self.faults: dict[str, str] = {}
        self.renamed: dict[str, str] = {}  # slug -> the title it answers by its session id alone
        self.held = threading.Event()  # cleared: every answer waits until it is set again
        self.held.set()
        self.readme = (SNAPSHOT / "github/readme.md").read_bytes()
        httpserver.expect_request("/repos/gpu-mode/lectures/readme").respond_with_handler(self.github_readme)
        httpserver.expect_request("/repos/gpu-mode/lectures/git/trees/HEAD").respond_with_handler(self.tree)
        httpserver.expect_request("/api/session").respond_with_handler(self.session)
        httpserver.expect_request(re.compile(r"^/page/[\w-]+/$")).respond_with_handler(self.page)
        self.config = load_config()
        base = httpserver.url_for("").rstrip("/")
        self.config["github"]["api"] = base
        self.config["gtc"] = {**self.config["gtc"], "api": f"{base}/api/session", "catalogs": [],
                              "page": f"{base}/page/{{slug}}/", "recheck_days": 1}

    def fault(self, name):
        fault = self.faults.get(name)
        self.held.wait(timeout=60)
        if fault == "timeout":
            time.sleep(1.0)
        if fault == "500":
            return Response("down", status=500)
        if fault == "429":
            return Response("slow down", status=429, headers={"Retry-After": "0"})
        return None

    def github_readme(self, request: Request):
        bad = self.fault("readme")
        if bad:
            return bad
        body = self.readme
        if self.faults.get("readme") == "headings":
            body = body.replace(b"Lecture", b"Talk")
        if self.faults.get("readme") == "old":
            body = (SNAPSHOT.parent / "gpu-mode-lectures" / "README@0d26337.md").read_bytes()
        return Response(body, content_type="text/markdown", headers={"ETag": f'"{hash(body)}"'})

    def tree(self, request: Request):
        body = (SNAPSHOT / "github/tree.json").read_bytes()
        if self.faults.get("tree") == "truncated":
            body = body[: len(body) // 2]
        return self.fault("tree") or Response(body, content_type="application/json")

    def session(self, request: Request):
        slug = request.args["id"]
        renamed = next((old for old, new in self.renamed.items() if slug == session_id(old)), None)
        if renamed:  # On-Demand knows the renamed session by its id alone, with its new title
            data = json.loads((SNAPSHOT / f"gtc/session-{renamed}.json").read_text())
            data["sessionData"]["sTitle"] = self.renamed[renamed]
            return Response(json.dumps(data), content_type="application/json")
        if slug in self.renamed:
            return Response("not found", status=404)
        bad = self.fault(slug)
        if bad:
            return bad
        body = (SNAPSHOT / f"gtc/session-{slug}.json").read_bytes()
        if self.faults.get(slug) == "truncated":
            body = body[:40]
        return Response(body, content_type="application/json")

    def page(self, request: Request):
        """The recorded page where there is one, else a page in the same format from the API answer."""
        slug = request.path.strip("/").split("/")[-1]
        recorded = SNAPSHOT / f"gtc/page-{slug}.html"
        if recorded.exists():
            return Response(recorded.read_bytes(), content_type="text/html")
        data = json.loads((SNAPSHOT / f"gtc/session-{slug}.json").read_text())["sessionData"]
        event = data["attributes"][0]["value"]
        title = html.escape(f"{data['sTitle'].strip()} | {event} | NVIDIA On-Demand")
        return Response(f'<html><head><title>{title}</title><meta property="og:title" content="{title}">'
                        f'<meta property="event_sessionId" content="{data["sessionID"]}"></head></html>',
                        content_type="text/html")

    def run(self, db_path):
        return refresh(db_path, with_sources(self.config), RefreshOptions(sources=["github", "gtc"],
                       policy=FetchPolicy(sleep=lambda s: None, timeout=0.3)))


@pytest.fixture
def sources(httpserver, fresh_db_path):
    served = Sources(httpserver)
    first = served.run(fresh_db_path)  # the last good refresh, from the local server
    assert first.exit_code == 0, first.problems
    return served


def talk_counts(db_path):
    db = sqlite_utils.Database(db_path)
    return {prefix: db.execute(f"select count(*) from talks where id like '{prefix}%' and gone_since is null"
                               ).fetchone()[0] for prefix in ("gpumode-", "gtc-gtc")}


@pytest.mark.parametrize("fault, where, reason", [
    ("timeout", "readme", "timed out"),
    ("500", "readme", "HTTP 500"),
    ("429", "readme", "HTTP 429"),
    ("truncated", "tree", "not valid JSON"),
    ("headings", "readme", "no 'Lecture N' headings"),
    ("old", "readme", "yielded 10 items where the last good run had 58"),
])
def test_source_faults_keep_the_last_good_rows(sources, fresh_db_path, fault, where, reason):
    before = talk_counts(fresh_db_path)
    sources.faults[where] = fault
    report = sources.run(fresh_db_path)
    assert report.exit_code == 1 and report.status == "partial"
    outcome = {o.name: o for o in report.outcomes}
    assert outcome["github"].status == "failed" and reason in outcome["github"].error
    assert outcome["gtc"].status in ("ok", "unchanged"), [p for p in report.problems if p.source == "gtc"]  # the other source still refreshed
    assert talk_counts(fresh_db_path) == before == {"gpumode-": 58, "gtc-gtc": 23}
    db = sqlite_utils.Database(fresh_db_path)
    assert any(reason in row["reason"] for row in db.query(
        "select reason from problems where run_id = ? and source = 'github'", [report.run_id]))


def test_item_faults_keep_those_items(sources, fresh_db_path):
    sources.faults.update({"gtcspring21-s31151": "500", "gtc24-s62400": "truncated", "gtc25-s72897": "429"})
    report = sources.run(fresh_db_path)
    # Three sessions failed and kept their last version: the source is partial, the run says so.
    assert {o.name: o.status for o in report.outcomes}["gtc"] == "partial" and report.exit_code == 1
    item_problems = {p.item: p.reason for p in report.problems if p.source == "gtc" and p.severity == "error"}
    assert set(item_problems) == {"gtcspring21-s31151", "gtc24-s62400", "gtc25-s72897"}
    assert all("kept the last archived version" in r for r in item_problems.values())
    assert talk_counts(fresh_db_path)["gtc-gtc"] == 23
    title = sqlite_utils.Database(fresh_db_path).table("talks").get("gtc-gtcspring21-s31151")["title"]
    assert title == "How GPU Computing Works"


def test_nothing_changed_writes_nothing_but_the_run(sources, fresh_db_path):
    db = sqlite_utils.Database(fresh_db_path)
    changes = db.table("talk_changes").count
    report = sources.run(fresh_db_path)
    assert report.exit_code == 0 and report.stats.talks_written == 0
    assert {o.status for o in report.outcomes} <= {"unchanged", "kept"}
    db = sqlite_utils.Database(fresh_db_path)
    assert db.table("talk_changes").count == changes
    assert db.execute("select count(*) from refresh_runs where id = ?", [report.run_id]).fetchone()[0] == 0
    ledger = sqlite_utils.Database(IndexFiles.of(fresh_db_path).archive)
    run = ledger.table("refresh_runs").get(report.run_id)
    assert run["talks_written"] == 0 and run["inputs"] is None  # no build happened: the index was not touched


def test_two_refreshes_at_once(sources, fresh_db_path, tmp_path):
    config = tmp_path / "sources.toml"
    api = sources.config["github"]["api"]
    config.write_text(DEFAULT_SOURCES.read_text().replace(
        'repo = "gpu-mode/lectures"', f'repo = "gpu-mode/lectures"\napi = "{api}"'))
    sources.held.clear()  # hold the first refresh in its fetch
    first = start_refresh(fresh_db_path, "--config", str(config), "--source", "github")
    wait_for(lambda: holds_the_lock(fresh_db_path, first), "the first refresh holds the lock", first)
    second = start_refresh(fresh_db_path, "--config", str(config), "--source", "github")
    assert second.wait(timeout=60) == 4
    assert "another refresh" in second.stderr.read()
    sources.held.set()
    assert first.wait(timeout=60) == 0
    waiting = [start_refresh(fresh_db_path, "--config", str(config), "--source", "github", "--wait")
               for _ in range(2)]
    assert [p.wait(timeout=120) for p in waiting] == [0, 0]


def test_a_killed_builds_leftovers_go_at_the_next_start(fresh_db_path, tmp_path):
    """SIGKILL leaves the working copy (`talks.db.building`) and its journal: nothing can remove
    them then. The next run that takes the lock removes them before it starts its own."""
    building = Path(f"{fresh_db_path}.building")
    process = start_refresh(fresh_db_path, "--snapshot", str(changed_snapshot(tmp_path)))
    wait_for(building.exists, "the refresh's working copy", process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    if not building.exists():  # it finished its swap just before the kill: make the leftovers a kill leaves
        building.write_bytes(fresh_db_path.read_bytes())
    Path(f"{building}-journal").write_bytes(b"\0" * 512)
    assert state(fresh_db_path)[0] == "ok"
    rebuilt = subprocess.run([sys.executable, "-m", "gputalks", "rebuild", "--db", str(fresh_db_path)], cwd=REPO,
                             capture_output=True, text=True, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert sorted(p.name for p in fresh_db_path.parent.iterdir() if ".building" in p.name) == []


def test_a_session_on_demand_renamed_is_asked_by_its_id_every_night(sources, fresh_db_path):
    """A slug that answered once, then 404s: its page's event_sessionId form answers, the night
    is ok with the new version, and the next nights ask that form first."""
    slug = "gtc24-s62400"
    assert session_id(slug).lower() != slug  # the id form differs from the slug
    sources.renamed[slug] = "A Renamed Session "
    for night in (2, 3):
        report = sources.run(fresh_db_path)
        assert report.exit_code == 0, [p for p in report.problems if p.severity != "note"]
        assert {o.name: o.status for o in report.outcomes}["gtc"] == ("ok" if night == 2 else "unchanged")
        with sqlite3.connect(fresh_db_path) as conn:
            assert conn.execute("select title from talks where id = 'gtc-gtc24-s62400'").fetchone()[0] == \
                "A Renamed Session", night
