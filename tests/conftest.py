"""Shared fixtures. Real documents are read from ../shared/data (beside the checkout)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import sqlite_utils

from dataclasses import replace

from gputalks.project.settings import Settings, default_settings, load_config
from gputalks.index.pipeline import RefreshOptions, refresh
from gputalks.site.serve import served_datasette
from gputalks.index.store import IndexFiles, SqliteArchive, archive, open_archive
from gputalks.scraper.records import RawDocument

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
SNAPSHOT = SHARED / "snapshot"
LECTURES = SHARED / "gpu-mode-lectures"


def pytest_collection_modifyitems(config, items):
    if not SNAPSHOT.exists():
        raise pytest.UsageError(f"{SHARED} is missing: the tests read the real documents from there")


def with_sources(config: dict) -> Settings:
    """The shipped overrides and curation, with these sources."""
    return replace(default_settings(), sources=config)


@pytest.fixture
def archived(tmp_path):
    """Archive documents in a fresh archive and give the fetcher's view of it."""

    def archive_documents(*documents: RawDocument) -> SqliteArchive:
        files = IndexFiles.of(tmp_path / "talks.db")
        db, _ = open_archive(files)
        with db.atomic():
            archive(db, list(documents))
        db.close()
        return SqliteArchive(files.archive)

    return archive_documents


def copy_index(source: Path, target: Path) -> Path:
    """Copy an index and its archive (talks.db and talks.archive.db) to `target`."""
    import shutil

    for kind in ("index", "archive"):
        shutil.copy(getattr(IndexFiles.of(source), kind), getattr(IndexFiles.of(target), kind))
    return target


@pytest.fixture(scope="session")
def config() -> dict:
    return load_config()


@pytest.fixture(scope="session")
def snapshot_db_path(tmp_path_factory, config) -> Path:
    """The index built once from ../shared/data/snapshot (read-only for tests)."""
    path = tmp_path_factory.mktemp("snapshot") / "talks.db"
    report = refresh(path, default_settings(), RefreshOptions(snapshot=SNAPSHOT))
    assert report.exit_code == 0, report.problems
    return path


@pytest.fixture(scope="session")
def snapshot_db(snapshot_db_path) -> sqlite_utils.Database:
    return sqlite_utils.Database(snapshot_db_path)


@pytest.fixture(scope="module")
def ds(snapshot_db_path):
    """The snapshot's index as `gputalks serve` serves it, asked through Datasette's in-process client."""
    return served_datasette(snapshot_db_path)


@pytest.fixture
def fresh_db_path(tmp_path, snapshot_db_path) -> Path:
    """A private copy of the snapshot index, for tests that write."""
    return copy_index(snapshot_db_path, tmp_path / "talks.db")


@pytest.fixture(scope="session")
def make_httpserver():
    """pytest-httpserver's server, threaded: a handler that hangs (a fault under
    test) must not hold up the requests of the other sources."""
    from pytest_httpserver import HTTPServer

    server = HTTPServer(host="127.0.0.1", threaded=True)
    server.start()
    yield server
    server.clear()
    if server.is_running():
        server.stop()


def children(pid: int) -> list[str]:
    """Live processes whose parent is `pid`, with their command lines (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(f"{stat.parent.name}: {cmdline}")
    return found


@pytest.fixture(scope="session", autouse=True)
def temp_files_kept_in_the_session(tmp_path_factory):
    """What commands keep in the temp directory (`serve`'s inspect data, one file per served
    file) goes to this session's own, which pytest clears, not to the machine's /tmp."""
    patch = pytest.MonkeyPatch()
    patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmp")))
    patch.setattr(tempfile, "tempdir", None)  # read TMPDIR again, in this process too
    yield
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind():
    """The suite leaves no server or refresh running: every child it started has stopped."""
    yield
    import os

    left = [c for c in children(os.getpid()) if "chromium" not in c and "playwright" not in c]
    assert left == [], f"processes left running by the tests: {left}"
