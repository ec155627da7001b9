"""`gputalks refresh / rebuild / status / changes` run for real (CliRunner) on real documents."""

import json
import re
import zlib

import pytest
import sqlite_utils
from click.testing import CliRunner

from gputalks.cli import cli
from gputalks.project.settings import load_config
from gputalks.index.pipeline import RefreshOptions, refresh
from gputalks.scraper.http import FetchPolicy
from gputalks.project.resources import DEFAULT_SOURCES

from gputalks.index.store import IndexFiles

from tests.conftest import SNAPSHOT, with_sources

TABLES = {"talks", "speakers", "talk_speakers", "links", "refresh_runs", "problems", "talk_sources",
          "talk_changes", "talks_fts"}
ARCHIVE_TABLES = {"raw_documents", "refresh_runs", "source_runs", "problems"}


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_refresh_from_snapshot_builds_the_index(tmp_path):
    db_path = tmp_path / "talks.db"
    result = run("refresh", "--db", str(db_path), "--snapshot", str(SNAPSHOT))
    assert result.exit_code == 0, result.output
    assert "github   ok         58 items" in result.output
    db = sqlite_utils.Database(db_path)
    assert TABLES <= set(db.table_names()) and "raw_documents" not in db.table_names()
    archive = sqlite_utils.Database(IndexFiles.of(db_path).archive)
    assert ARCHIVE_TABLES <= set(archive.table_names())
    lectures = db.execute("select count(*) from talks where id like 'gpumode-lecture-%' "
                          "or id like 'gpumode-bonus-%'").fetchone()[0]
    assert lectures == 58
    # every raw document is archived with its hash, and parsing read only those
    docs = list(archive.query("select source, url, sha256, size, length(body) as n, encoding from raw_documents"))
    assert {d["source"] for d in docs} == {"github", "youtube", "gtc"}
    assert all(len(d["sha256"]) == 64 and 0 < d["n"] and d["encoding"] == "zlib" for d in docs)
    assert sum(d["n"] for d in docs) < sum(d["size"] for d in docs) / 3  # compressed
    assert db.execute("select count(*) from talks_fts where talks_fts match 'kernel'").fetchone()[0] > 5

    # A second refresh from the same input changes nothing, and GitHub answers 304.
    again = run("refresh", "--db", str(db_path), "--snapshot", str(SNAPSHOT))
    assert "0 talk rows written, 0 changes" in again.output
    assert archive.table("raw_documents").count == len(docs)
    assert db.table("talk_changes").count == db.table("talks").count  # only the first run's "new"

    rebuilt = run("rebuild", "--db", str(db_path))
    assert rebuilt.exit_code == 0 and "0 talk rows written" in rebuilt.output

    status = run("status", "--db", str(db_path))
    assert "github   kept    58 items" in status.output  # rebuild reuses the archive
    assert "linked / unlinked per source" in status.output
    changes = run("changes", "--db", str(db_path))
    assert "gpumode-lecture-012  new talk" in changes.output


def test_a_failing_source_keeps_its_rows_and_the_others_refresh(fresh_db_path, httpserver):
    db = sqlite_utils.Database(fresh_db_path)
    before = db.execute("select count(*) from talks where id like 'gpumode-%'").fetchone()[0]
    httpserver.expect_request("/repos/gpu-mode/lectures/readme").respond_with_data("boom", status=500)
    config = load_config()
    for slug in config["gtc"]["sessions"]:
        slug = slug.lower()
        httpserver.expect_request("/session", query_string=f"id={slug}").respond_with_data(
            (SNAPSHOT / f"gtc/session-{slug}.json").read_bytes(), content_type="application/json")
    config["github"]["api"] = httpserver.url_for("/").rstrip("/")
    config["gtc"] = {**config["gtc"], "api": httpserver.url_for("/session"), "catalogs": [],
                     "page": httpserver.url_for("/page/{slug}/")}
    httpserver.expect_request("/page/gtc25-s72571/").respond_with_data("<html></html>", status=404)
    report = refresh(fresh_db_path, with_sources(config), RefreshOptions(sources=["github", "gtc"],
                     policy=FetchPolicy(sleep=lambda s: None)))
    assert report.exit_code == 1 and report.status == "partial"
    outcome = {o.name: o for o in report.outcomes}
    assert outcome["github"].status == "failed" and "HTTP 500" in outcome["github"].error
    # One session page answers 404: that item failed, the source is partial and keeps all 23 sessions.
    assert outcome["gtc"].status == "partial" and outcome["gtc"].items == 23
    assert outcome["youtube"].status == "kept"  # not selected: its last good data stays
    db = sqlite_utils.Database(fresh_db_path)  # the refresh swapped in a new file
    assert db.execute("select count(*) from talks where id like 'gpumode-%' and gone_since is null"
                      ).fetchone()[0] == before
    run_row = db.table("refresh_runs").get(report.run_id)  # the run rebuilt the index
    assert json.loads(run_row["sources"])["github"]["status"] == "failed"


def test_cli_failure_prints_one_line_reason_and_exits_non_zero(fresh_db_path, httpserver, tmp_path):
    httpserver.expect_request("/repos/gpu-mode/lectures/readme").respond_with_data("{}", status=404)
    config = tmp_path / "sources.toml"
    api = httpserver.url_for("/").rstrip("/")
    config.write_text(DEFAULT_SOURCES.read_text().replace(
        'repo = "gpu-mode/lectures"', f'repo = "gpu-mode/lectures"\napi = "{api}"'))
    result = CliRunner().invoke(cli, ["refresh", "--db", str(fresh_db_path), "--config", str(config),
                                      "--source", "github"])
    assert result.exit_code == 3  # the only selected source failed
    assert "HTTP 404" in result.output
    db = sqlite_utils.Database(fresh_db_path)
    assert db.execute("select count(*) from talks where gone_since is null").fetchone()[0] == 150


def test_unknown_snapshot_directory_is_a_clear_error(tmp_path):
    result = run("refresh", "--db", str(tmp_path / "x.db"), "--snapshot", str(tmp_path))
    assert result.exit_code != 0
    assert "manifest.json" in result.output


def test_every_command_has_help():
    for command in ("refresh", "rebuild", "status", "changes"):
        result = run(command, "--help")
        assert result.exit_code == 0 and "Usage:" in result.output


def test_a_snapshot_file_that_is_missing_is_a_per_source_failure(tmp_path):
    import shutil

    target = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, target)
    (target / "github" / "tree.json").unlink()
    result = run("refresh", "--db", str(tmp_path / "t.db"), "--snapshot", str(target))
    assert result.exit_code == 1  # github failed, youtube and gtc refreshed
    assert "tree.json named by the manifest is missing" in result.output


def test_a_rebuild_from_scratch_gives_the_rows_the_refresh_built(fresh_db_path, started_children):
    """A refresh makes its talks in-process (it holds fresh parses); a rebuild reads the
    archive and makes them in a worker process (index/worker.py). Same rows, no process left."""
    derived = ["talk_changes", "talk_sources", "links", "talk_speakers", "speakers", "talks"]

    def rows(table):
        db = sqlite_utils.Database(fresh_db_path)  # the rebuild swaps in a new file
        skip = {"first_seen", "changed_at", "run_id"}
        columns = [c for c in db.table(table).columns_dict
                   if c not in skip and not (table == "talk_changes" and c == "id")]
        return sorted(map(repr, db.execute(f"select {', '.join(columns)} from [{table}]").fetchall()))

    refreshed = {table: rows(table) for table in derived}
    db = sqlite_utils.Database(fresh_db_path)
    with db.atomic():
        for table in derived:
            db.execute(f"delete from [{table}]")
    rebuilt = run("rebuild", "--db", str(fresh_db_path))
    assert rebuilt.exit_code == 0, rebuilt.output
    assert len(refreshed["talks"]) > 100 and any("Flash Attention" in row for row in refreshed["talks"])
    for table in derived:
        assert rows(table) == refreshed[table], table
    assert started_children() == []


GITHUB_TREE = "https://api.github.com/repos/gpu-mode/lectures/git/trees/HEAD?recursive=1"
YOUTUBE_VIDEOS = "https://www.youtube.com/@GPUMODE/videos"
GTC_CATALOG = "https://events.rainfocus.com/api/search"


@pytest.mark.parametrize("source, url, why", [
    ("github", GITHUB_TREE, f"archived documents no longer parse: {re.escape(GITHUB_TREE)}: not valid JSON "),
    ("youtube", YOUTUBE_VIDEOS, f"archived documents no longer parse: {re.escape(YOUTUBE_VIDEOS)}: not valid JSON "),
    ("gtc", GTC_CATALOG, r"archived documents no longer give 6 of the 29 items they gave "
                         rf"\(catalog: {re.escape(GTC_CATALOG)}: not valid JSON "),
], ids=["parsed-beside-the-worker", "parsed-in-the-worker", "one-document-of-many"])
def test_archived_documents_that_no_longer_parse_stop_the_build_and_keep_the_index(fresh_db_path, source, url, why,
                                                                                  started_children):
    """A document damaged in the archive: without it every talk it lists would be marked
    gone. The build stops instead, the served file stays byte for byte, the run says why.
    GitHub (fewest documents) is parsed by the build's process, YouTube by the worker; one
    GTC catalog page of 24 documents is only an item error to the parser, and stops it too."""
    archive = sqlite_utils.Database(IndexFiles.of(fresh_db_path).archive)
    with archive.atomic():
        archive.execute("update raw_documents set body = ?, encoding = 'zlib' where url = ?",
                        [zlib.compress(b"{not json"), url])
    served = fresh_db_path.read_bytes()
    result = run("rebuild", "--db", str(fresh_db_path))
    assert result.exit_code == 3, result.output
    assert re.search(rf"{source} +failed .* {why}.*; the index is unchanged", result.output), result.output
    assert fresh_db_path.read_bytes() == served
    assert started_children() == []
    status = run("status", "--db", str(fresh_db_path))
    talks = sqlite_utils.Database(fresh_db_path).table("talks").count
    assert re.search(rf"{source} +failed", status.output) and f"talks: {talks} (0 no longer seen)" in status.output
