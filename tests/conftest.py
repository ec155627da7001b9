"""Shared fixtures. Real documents are read from ../shared/data (beside the checkout)."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest
import sqlite_utils

from dataclasses import replace

from gputalks.project.settings import Settings, default_settings, load_config
from gputalks.index.pipeline import RefreshOptions, refresh
from gputalks.site.serve import served_datasette
from gputalks.index.raw_documents import SqliteArchive, archive
from gputalks.index.store import IndexFiles, open_archive
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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, what: str, process=None, timeout: float = 120.0) -> None:
    """Wait for a process's own signal (a line it printed, a file it wrote), however busy the
    machine: fail naming `what` after `timeout`, or at once when `process` ended first."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"{what}: the process ended first (exit {process.returncode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)


def holds_the_lock(db_path: Path, process) -> bool:
    """Whether `process` is a refresh of `db_path` that holds its lock (it writes its pid there
    once it has the lock and its signal handlers)."""
    lock = Path(f"{IndexFiles.of(db_path).index}.lock")
    try:
        return lock.read_text().startswith(f"pid {process.pid} ")
    except FileNotFoundError:
        return False


class Serving:
    """A real `gputalks serve` (or `datasette serve`) on a free port, started and ready: every
    worker has said "Application startup complete". Its output is kept in `lines`."""

    def __init__(self, command: list[str], workers: int = 1, cwd: Path = REPO, env: dict | None = None):
        import subprocess
        import threading

        self.port = free_port()
        self.lines: list[str] = []
        self.process = subprocess.Popen([*command, "--port", str(self.port)], cwd=cwd, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        try:
            wait_for(lambda: self.text.count("Application startup complete") >= workers,
                     f"{command[:4]} ready ({workers} workers)\n{self.text}", self.process)
        except BaseException:
            self.stop()
            raise

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=30)
        self.reader.join(timeout=30)

    def __enter__(self) -> "Serving":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def gputalks_serve(db_path: Path, workers: int = 1, *args: str) -> Serving:
    import sys

    return Serving([sys.executable, "-m", "gputalks", "serve", "--db", str(db_path), "--workers", str(workers),
                    *args], workers)


@pytest.fixture
def started_children():
    """The live child processes this test started: a browser driver or a server a module keeps
    running for its other tests is not this test's own."""
    import os

    before = set(children(os.getpid()))
    return lambda: [c for c in children(os.getpid()) if c not in before]


def in_threads(work, count: int = 8) -> None:
    """`work(n)` on `count` threads at once (n: 0 to count - 1), returning when all have ended."""
    threads = [threading.Thread(target=work, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
