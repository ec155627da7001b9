"""Faults of the machine and the process, run as the real `gputalks`: a file that is not SQLite,
an unwritable folder, a full disk, hung and trickling hosts, a symlinked index, signals, and
archived documents that no longer parse."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Callable

import pytest
from werkzeug import Response

from gputalks.index.store import IndexFiles

from tests.conftest import REPO, SNAPSHOT, copy_index, holds_the_lock, wait_for
from tests.faults import (answer, faulty_snapshot, gputalks, inventory, readme_cut,
                          rewrite, sources_config, stray_files)

@pytest.mark.parametrize("command", [["refresh", "--snapshot", str(SNAPSHOT)], ["rebuild"], ["status"],
                                     ["changes"], ["search", "TMA"], ["export", "gpu-mode-core"], ["serve"],
                                     ["publish", "fly", "--generate-dir", "fly-app"]])
def test_a_db_that_is_not_sqlite_is_one_line_for_every_command(command, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    done = gputalks(*command, "--db", str(text))
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"gputalks: {text}: not an SQLite database; give --db a gputalks index (or a new file name)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no .building, no .lock, no archive


def test_an_unwritable_directory_is_one_line(fresh_db_path, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    copy_index(fresh_db_path, locked / "talks.db")
    before = inventory(locked / "talks.db")
    if os.geteuid() == 0:  # root writes anywhere but in an immutable directory
        if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode:
            pytest.skip("running as root without chattr: cannot make a directory unwritable")
        unlock = ["chattr", "-i", str(locked)]
    else:
        locked.chmod(0o555)
        unlock = ["chmod", "755", str(locked)]
    try:
        done = gputalks("refresh", "--db", str(locked / "talks.db"), "--snapshot", str(SNAPSHOT))
    finally:
        subprocess.run(unlock, check=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"gputalks: {locked}: cannot write here (permission denied); the index needs its " \
                          "directory writable for the lock and the working copy\n"
    assert inventory(locked / "talks.db") == before


def limit_file_size(size: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return apply


def test_a_full_disk_keeps_the_last_good_index_and_leaves_no_file(fresh_db_path, tmp_path):
    before = inventory(fresh_db_path)
    original = fresh_db_path.read_bytes()
    snapshot = faulty_snapshot(tmp_path, rewrite("github/readme.md", lambda b: b.replace(
        b"## Lecture 12: Flash Attention", b"## Lecture 12: Flash Attention, revisited")))
    size = fresh_db_path.stat().st_size
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot),
                    preexec_fn=limit_file_size(size // 2))
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("gputalks: cannot write the index (") and \
        done.stderr.endswith("; the last good index is unchanged\n") and done.stderr.count("\n") == 1
    assert fresh_db_path.read_bytes() == original
    assert inventory(fresh_db_path) == before
    assert stray_files(fresh_db_path.parent) == []


def refresh_against_a_slow_readme(fresh_db_path, tmp_path, httpserver, answer_slowly) -> tuple:
    """A github-only refresh whose README host answers through `answer_slowly(released)`, with a
    2 s source deadline and a 30 s request timeout: (the process, seconds it took)."""
    released: list[bool] = []
    httpserver.expect_request("/repos/gpu-mode/lectures/readme").respond_with_handler(
        lambda request: answer_slowly(released))
    api = httpserver.url_for("/").rstrip("/")
    config = sources_config(tmp_path, lambda t: t.replace('repo = "gpu-mode/lectures"',
                                                          f'repo = "gpu-mode/lectures"\napi = "{api}"'))
    config.write_text(config.read_text() + "source_deadline = 2\nrequest_timeout = 30\n")
    started = time.monotonic()
    try:
        done = gputalks("refresh", "--db", str(fresh_db_path), "--config", str(config), "--source", "github")
    finally:
        released.append(True)
    return done, time.monotonic() - started


def test_a_hung_host_fails_its_source_at_the_deadline(fresh_db_path, tmp_path, httpserver):
    def hang(released: list) -> Response:
        for _ in range(100):  # hold the connection without answering (released at teardown)
            if released:
                break
            time.sleep(0.1)
        return Response("late", status=200)

    before = inventory(fresh_db_path)
    done, took = refresh_against_a_slow_readme(fresh_db_path, tmp_path, httpserver, hang)
    assert done.returncode == 3, done.stderr  # the only source selected failed
    assert "deadline passed" in done.stderr
    assert took < 10, took
    assert inventory(fresh_db_path) == before


def test_a_host_that_trickles_its_answer_fails_its_source_at_the_deadline(fresh_db_path, tmp_path, httpserver):
    """Headers at once, then a byte every 0.2 s: no read ever times out, but the source's
    deadline (2 s) still ends it, and the run ends within its deadline + 10 s."""
    def trickle(released: list) -> Response:
        def body():
            yield b'{"content": "'
            for _ in range(600):
                if released:
                    return
                time.sleep(0.2)
                yield b"A"
        return Response(body(), status=200, content_type="application/json", direct_passthrough=True)

    before = inventory(fresh_db_path)
    done, took = refresh_against_a_slow_readme(fresh_db_path, tmp_path, httpserver, trickle)
    assert done.returncode == 3, done.stderr
    assert "deadline passed while the answer trickled in" in done.stderr
    assert took < 12, took
    assert inventory(fresh_db_path) == before


def test_the_lock_follows_a_symlink_and_the_swap_keeps_it(fresh_db_path, tmp_path):
    link = tmp_path / "served.db"
    link.symlink_to(fresh_db_path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from gputalks.index.runs import refresh_lock\n"
        f"with refresh_lock({str(fresh_db_path)!r}):\n    print('held', flush=True); time.sleep(30)")],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        refused = gputalks("refresh", "--db", str(link), "--snapshot", str(SNAPSHOT))
        assert refused.returncode == 4 and "another refresh" in refused.stderr
    finally:
        holder.kill()
        holder.wait()
    changed = faulty_snapshot(tmp_path, rewrite("github/readme.md", lambda b: b.replace(
        b"## Lecture 12: Flash Attention", b"## Lecture 12: Flash Attention, revisited")))
    done = gputalks("refresh", "--db", str(link), "--snapshot", str(changed))
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == fresh_db_path.resolve()
    with sqlite3.connect(fresh_db_path) as conn:
        assert conn.execute("select title from talks where id = 'gpumode-lecture-012'").fetchone()[0] == \
            "Flash Attention, revisited"


def as_at_a_terminal() -> None:
    """In the child before it runs: Ctrl-C as a terminal delivers it. A suite started in the
    background of a script (`pytest &`) passes SIGINT on ignored, and Python keeps it so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop, code, said", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "stopped by SIGTERM"),
                                              (signal.SIGHUP, 129, "stopped by SIGHUP")])
def test_a_stopped_refresh_exits_at_once_and_the_index_is_unchanged(fresh_db_path, tmp_path, stop, code, said):
    """Ctrl-C, a service manager's SIGTERM or a closed terminal's SIGHUP during retries: the
    refresh ends within 2 s, says so in one line, leaves the index as it was and no .building."""
    before = fresh_db_path.read_bytes()
    slow = faulty_snapshot(tmp_path, answer(500, "down", "gtc"))  # retries keep it busy
    config = sources_config(tmp_path, lambda t: t)
    config.write_text(config.read_text().replace("retries = 0\nbackoff = 0\n", "retries = 3\nbackoff = 2\n"))
    process = subprocess.Popen([sys.executable, "-m", "gputalks", "refresh", "--db", str(fresh_db_path),
                                "--snapshot", str(slow), "--config", str(config)], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_at_a_terminal)
    wait_for(lambda: holds_the_lock(fresh_db_path, process), "the refresh holds its lock", process)
    process.send_signal(stop)
    sent = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == code, stderr
    assert time.monotonic() - sent < 2.0
    assert stderr.strip().endswith(f"gputalks: {said}; the index is unchanged")
    assert fresh_db_path.read_bytes() == before
    assert stray_files(fresh_db_path.parent) == []


def test_carried_items_whose_documents_no_longer_parse_stop_the_build(fresh_db_path, tmp_path):
    """A README cut to 75 % carries the lectures it dropped, re-read each night from the
    documents that last listed them. When one of those (the git tree) is damaged in the
    archive, dropping the carried lectures would hide them: the build stops instead."""
    snapshot = faulty_snapshot(tmp_path, rewrite("github/readme.md", readme_cut(0.75)))
    config = str(sources_config(tmp_path))
    first = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot), "--config", config)
    assert first.returncode == 0 and "no longer listed are kept" in first.stdout + first.stderr
    before = inventory(fresh_db_path)
    served = fresh_db_path.read_bytes()
    tree = "https://api.github.com/repos/gpu-mode/lectures/git/trees/HEAD?recursive=1"
    with sqlite3.connect(IndexFiles.of(fresh_db_path).archive) as archive:
        archive.execute("update raw_documents set body = ?, encoding = 'zlib' where url = ?",
                        [zlib.compress(b"{not json"), tree])
    again = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot), "--config", config)
    output = again.stdout + again.stderr
    assert again.returncode == 3, output
    assert "github   failed" in output and f"no longer parse: {tree}: not valid JSON" in output \
        and "the index is unchanged" in output and "Traceback" not in output, output
    assert fresh_db_path.read_bytes() == served and inventory(fresh_db_path) == before


# A writer of the archive that stops mid-transaction, its changes spilled to the file (a small
# page cache) and its journal written, says so and waits to be killed.
HALF_WRITE = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("pragma cache_size = 5")
conn.execute("begin immediate")
conn.execute("create table half_written (x)")
conn.executemany("insert into half_written values (?)", [("x" * 500,)] * 5000)
print("writing", flush=True)
sys.stdin.read()
"""


def test_an_archive_a_killed_refresh_was_writing_is_rolled_back_by_the_next(fresh_db_path):
    """A refresh killed while it wrote the archive leaves a hot journal beside it, which a
    read-only connection cannot roll back ("attempt to write a readonly database"): the next
    refresh called the archive damaged and stopped (exit 3), and so would every refresh after
    it. It is rolled back first, as SQLite does for its next writer: nothing of the killed
    transaction stays, and the refresh and `status` run."""
    db, archive = fresh_db_path, IndexFiles.of(fresh_db_path).archive
    runs = sqlite3.connect(archive).execute("select count(*) from refresh_runs").fetchone()[0]
    writer = subprocess.Popen([sys.executable, "-c", HALF_WRITE, str(archive)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "writing"
    writer.kill()
    writer.wait()
    assert os.path.getsize(f"{archive}-journal") > 0
    status = gputalks("status", "--db", str(db))
    assert status.returncode == 0 and "last run" in status.stdout, status.stderr
    done = gputalks("refresh", "--snapshot", str(SNAPSHOT), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert not os.path.exists(f"{archive}-journal")
    with sqlite3.connect(archive) as conn:
        assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
        assert conn.execute("select count(*) from sqlite_master where name = 'half_written'").fetchone()[0] == 0
        assert conn.execute("select count(*) from refresh_runs").fetchone()[0] == runs + 1
