"""The fault matrix: each fault a source or a config brings to a night, injected into a replay of the
recorded snapshot (or a local server), run as the real `gputalks` process.
Every case asserts the exit code, the one-line message, and that no talk was
marked gone, no link or talk_sources row deleted, and both files pass
`PRAGMA integrity_check`."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gputalks.project.resources import DEFAULT_SOURCES

from tests.conftest import SNAPSHOT
from tests.faults import (FAST, answer, faulty_snapshot, gputalks, inventory, known_values, readme_cut,
                          rewrite, sources_config, stray_files)

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
