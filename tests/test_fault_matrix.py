"""The fault matrix: each fault a nightly meets, injected into a replay of the
recorded snapshot (or a local server), run as the real `gputalks` process.
Every case asserts the exit code, the one-line message, and that no talk was
marked gone, no link or talk_sources row deleted, and both files pass
`PRAGMA integrity_check`."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from werkzeug import Response

from gputalks.project.resources import DEFAULT_SOURCES
from gputalks.index.store import IndexFiles

from tests.conftest import REPO, SNAPSHOT, copy_index, holds_the_lock, wait_for

FAST = "\n[refresh]\nretries = 0\nbackoff = 0\n"  # no retry sleeps in a replay


def gputalks(*args: str, timeout: float = 120, **popen) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputalks", *args], cwd=popen.pop("cwd", REPO),
                          capture_output=True, text=True, timeout=timeout, **popen)


@dataclass(frozen=True)
class Inventory:
    live_talks: int
    links: int
    talk_sources: int
    integrity: tuple[str, str]


def inventory(db_path: Path) -> Inventory:
    files = IndexFiles.of(db_path)
    with sqlite3.connect(files.index.as_uri() + "?mode=ro", uri=True) as conn:
        counts = [conn.execute(sql).fetchone()[0] for sql in (
            "select count(*) from talks where gone_since is null", "select count(*) from links",
            "select count(*) from talk_sources")]
        index_ok = conn.execute("pragma integrity_check").fetchone()[0]
    with sqlite3.connect(files.archive.as_uri() + "?mode=ro", uri=True) as conn:
        archive_ok = conn.execute("pragma integrity_check").fetchone()[0]
    return Inventory(*counts, (index_ok, archive_ok))


def known_values(db_path: Path) -> dict[str, int]:
    """How many talks know each value a fresher answer must not erase (history.KEEP_KNOWN)."""
    from gputalks.index.history import KEEP_KNOWN

    with sqlite3.connect(IndexFiles.of(db_path).index.as_uri() + "?mode=ro", uri=True) as conn:
        return {name: conn.execute(f"select count(*) from talks where {name} is not null and {name} not in ('', '[]')")
                .fetchone()[0] for name in KEEP_KNOWN}


def stray_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".building" in p.name or p.name.endswith("-journal"))


def sources_config(tmp_path: Path, edit: Callable[[str], str] = lambda text: text) -> Path:
    path = tmp_path / "sources.toml"
    path.write_text(edit(DEFAULT_SOURCES.read_text()) + FAST)
    return path


def faulty_snapshot(tmp_path: Path, fault: Callable[[Path, list[dict]], None]) -> Path:
    """A copy of the recorded snapshot with `fault` applied to its files and manifest."""
    target = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, target)
    manifest = json.loads((target / "manifest.json").read_text())
    fault(target, manifest["responses"])
    for entry in manifest["responses"]:
        entry.get("headers", {}).pop("etag", None)  # changed documents: no 304s
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def answer(status: int, message: str, source: str, url_part: str = "") -> Callable[[Path, list[dict]], None]:
    """Every `source` response (whose URL contains `url_part`) answers `status`; for yt-dlp the file holds its message."""
    def fault(snapshot: Path, responses: list[dict]) -> None:
        for entry in responses:
            if entry["source"] == source and url_part in entry["url"]:
                entry["status"] = status
                (snapshot / entry["file"]).write_text(message)
    return fault


def rewrite(name: str, change: Callable[[bytes], bytes]) -> Callable[[Path, list[dict]], None]:
    def fault(snapshot: Path, responses: list[dict]) -> None:
        for path in snapshot.glob(name):
            path.write_bytes(change(path.read_bytes()))
    return fault


def private_videos(body: bytes) -> bytes:
    listing = json.loads(body)
    for entry in listing["entries"][:20]:
        entry.update(title="[Private video]", duration=None, description=None)
    return json.dumps(listing).encode()


def both(*faults: Callable[[Path, list[dict]], None]) -> Callable[[Path, list[dict]], None]:
    def fault(snapshot: Path, responses: list[dict]) -> None:
        for one in faults:
            one(snapshot, responses)
    return fault


def without_lengths(body: bytes) -> bytes:
    listing = json.loads(body)
    for entry in listing["entries"]:
        entry.update(duration=None, description=None)
    return json.dumps(listing).encode()


def only_ids(body: bytes) -> bytes:
    return json.dumps({"id": json.loads(body)["id"]}).encode()


def empty_shells(snapshot: Path, responses: list[dict]) -> None:
    for entry in responses:
        if entry["source"] == "gtc":
            (snapshot / entry["file"]).write_text("<html><body></body></html>" if entry["file"].endswith(".html")
                                                  else "{}")


def readme_cut(share: float) -> Callable[[bytes], bytes]:
    return lambda body: body[: int(len(body) * share)]


SNAPSHOT_FAULTS = {
    # name: (fault, exit code, message in the output)
    # The catalog's first page is the source's listing: when it fails, the source fails.
    "gtc answers 500": (answer(500, "down", "gtc"), 1,
                        "gtc: catalog GTC 2024 from=0: https://events.rainfocus.com/api/search: HTTP 500"),
    # How many sessions are asked depends on the day (recheck_days spreads them over the month).
    "gtc sessions are empty shells": (empty_shells, 1, re.compile(
        r"gtc: https://events.rainfocus.com/api/search: catalog search: no sectionList or items \(did the response shape change\?\)")),
    "truncated youtube listing": (rewrite("youtube/gpumode-videos.json", lambda b: b[: len(b) // 2]), 1,
                                  "gpumode-videos.json is not valid JSON"),
    "youtube listing answers 429": (answer(429, "ERROR: [youtube:tab] @GPUMODE: HTTP Error 429: Too Many Requests",
                                           "youtube", "@GPUMODE"), 1, "set [youtube.ytdlp] sleep_interval_requests"),
    "channel answers 404 once": (answer(404, "ERROR: [youtube:tab] @GPUMODE: HTTP Error 404: Not Found",
                                        "youtube", "@GPUMODE"), 1, "HTTP Error 404"),
    "readme cut to 75 %": (rewrite("github/readme.md", readme_cut(0.75)), 0, "no longer listed are kept"),
    "readme cut to 40 %": (rewrite("github/readme.md", readme_cut(0.40)), 1, "not as mass removal"),
    "entries turn [Private video]": (rewrite("youtube/gpumode-videos.json", private_videos), 0,
                                     "no longer listed are kept"),
    "flat listing without lengths, info dicts 429": (
        both(rewrite("youtube/gpumode-videos.json", without_lengths),
             answer(429, "ERROR: [youtube] x: HTTP Error 429: Too Many Requests", "youtube", "watch?v=")),
        1, "known values kept"),
    "info dicts null but for the id": (rewrite("youtube/video-*.json", only_ids), 1,
                                       "gputalks: partial: youtube: 6 of 7 requests failed"),
}


@pytest.mark.parametrize("name", SNAPSHOT_FAULTS)
def test_a_fault_in_the_replay_keeps_every_talk(name, fresh_db_path, tmp_path):
    fault, code, message = SNAPSHOT_FAULTS[name]
    before, known = inventory(fresh_db_path), known_values(fresh_db_path)
    snapshot = faulty_snapshot(tmp_path, fault)
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot),
                    "--config", str(sources_config(tmp_path)))
    output = done.stdout + done.stderr
    assert done.returncode == code, output
    assert message.search(output) if isinstance(message, re.Pattern) else message in output, output
    assert "Traceback" not in output
    assert inventory(fresh_db_path) == before
    after = known_values(fresh_db_path)
    assert all(after[name] >= known[name] for name in known), (known, after)  # no known value erased
    assert stray_files(fresh_db_path.parent) == []


CONFIG_FAULTS = {
    # name: (edit of the shipped sources config, the one line expected)
    "empty sources file": (lambda text: "", "sources.toml: file: configures no source"),
    "repo = 42": (lambda t: t.replace('repo = "gpu-mode/lectures"', "repo = 42"),
                  "sources.toml: [github] repo: Input should be a valid string, got 42"),
    "follow without url": (lambda t: t.replace('url = "https://www.youtube.com/watch?v=3l10o0DYJXg"\n', ""),
                           "sources.toml: [[youtube.follow]] #4 url: Field required"),
    "follow = 5": (lambda t: (t.split("\n[[youtube.follow]]")[0] + "\n" + t[t.index("[gtc]"):]).replace(
                       "[youtube]\n", "[youtube]\nfollow = 5\n"),
                   "sources.toml: [youtube] follow: Input should be a valid list, got 5"),
    "full_info sometimes": (lambda t: t.replace('full_info = "new"', 'full_info = "sometimes"'),
                            "sources.toml: [youtube] full_info: Input should be 'new', 'always' or 'never'"),
    "recheck_days weekly": (lambda t: t.replace("recheck_days = 30", 'recheck_days = "weekly"'),
                            "sources.toml: [gtc] recheck_days: Input should be a valid integer, got 'weekly'"),
    "sessions as one string": (lambda t: t.split("sessions = [")[0] + 'sessions = "gtc24-s62400"\n'
                               + t[t.index("# The API expects"):],
                               "sources.toml: [gtc] sessions: Input should be a valid list, got 'gtc24-s62400'"),
    "unknown key": (lambda t: t.replace("[youtube]\n", "[youtube]\nful_info = 'new'\n"),
                    "sources.toml: [youtube] ful_info: unknown key (a typo?)"),
}


@pytest.mark.parametrize("name", CONFIG_FAULTS)
def test_a_config_mistake_is_one_line_and_changes_nothing(name, fresh_db_path, tmp_path):
    edit, line = CONFIG_FAULTS[name]
    before = inventory(fresh_db_path)
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT),
                    "--config", str(sources_config(tmp_path, edit)))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[0].startswith(f"gputalks: {line}"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert inventory(fresh_db_path) == before


def test_the_repo_name_in_another_case_is_the_same_repo(fresh_db_path, tmp_path):
    before = inventory(fresh_db_path)
    config = sources_config(tmp_path, lambda t: t.replace('repo = "gpu-mode/lectures"', 'repo = "GPU-Mode/Lectures"'))
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT), "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert inventory(fresh_db_path) == before


CURATION = '''lang = "en"
[[tables]]
id = "t"
columns = COLUMNS
rows = ROWS
'''


@pytest.mark.parametrize("columns, rows, line", [
    ('"title"', "[]", "[[tables]] #1 columns: Input should be a valid list, got 'title'"),
    ('[{ key = "title" }]', '"x"', "[[tables]] #1 rows: Input should be a valid list, got 'x'"),
    ('[{ key = "title" }, { key = "colour" }]', '[{ talk = "gpumode:12" }]',
     "[[tables]] #1: column colour is neither an index column"),
])
def test_a_curation_mistake_is_one_line_before_anything_runs(columns, rows, line, fresh_db_path, tmp_path):
    project = tmp_path / "project"
    (project / "curation").mkdir(parents=True)
    (project / "gputalks.toml").write_text(DEFAULT_SOURCES.read_text() + FAST)
    (project / "curation" / "docs.toml").write_text(CURATION.replace("COLUMNS", columns).replace("ROWS", rows))
    before = inventory(fresh_db_path)
    done = gputalks("--project", str(project), "refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"gputalks: docs.toml: {line}"), done.stderr
    assert inventory(fresh_db_path) == before


def test_overrides_a_missing_file_and_unknown_ids(fresh_db_path, tmp_path):
    before = inventory(fresh_db_path)
    missing = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT),
                       "--overrides", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and missing.stderr == f"gputalks: {tmp_path / 'nope.toml'}: overrides file " \
                                                        "not found (given with --overrides)\n"
    overrides = tmp_path / "overrides.toml"
    overrides.write_text('[[same]]\ntalk = "gpumode-lecture-999"\nitem = "youtube:BgGe_erJB1A"\n'
                         '[[never]]\ntalk = "gpumode-lecture-012"\nitem = "youtube:nosuchvideo"\n')
    unknown = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT),
                       "--overrides", str(overrides))
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == [  # a talk id is never deleted: one the index lacks is a typo
        "gputalks: overrides.toml: [[same]] talk 'gpumode-lecture-999': no such talk in the index",
        "gputalks: (fix or remove these decisions; --lenient makes them warnings)"]
    assert inventory(fresh_db_path) == before
    lenient = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT),
                       "--overrides", str(overrides), "--lenient")
    assert lenient.returncode == 0, lenient.stderr
    status = gputalks("status", "--db", str(fresh_db_path))
    assert "no such talk in the index" in status.stdout


def test_an_override_naming_a_vanished_video_warns_and_never_stops_the_night(fresh_db_path, tmp_path):
    """A video named in overrides.toml goes private: every night still runs (exit 0), and
    `gputalks status` says which decision waits for an item no source lists."""
    overrides = tmp_path / "overrides.toml"
    overrides.write_text('[[never]]\ntalk = "gpumode-lecture-012"\nitem = "youtube:wentprivate"\n')
    for _ in range(4):  # past gone_after_runs = 3
        night = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT),
                         "--overrides", str(overrides))
        assert night.returncode == 0, night.stderr
    status = gputalks("status", "--db", str(fresh_db_path))
    assert "item 'youtube:wentprivate': no source lists such an item now" in status.stdout


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
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
