"""An index and its archive belong together: a missing archive is a loud state in which nothing
is marked gone, a foreign archive or a foreign SQLite `--db` is refused. Real processes on
copies of the snapshot index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gputalks.index.store import IndexFiles

from tests.conftest import SNAPSHOT
from tests.faults import gputalks, known_values, stray_files


def counts(db_path: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        return {name: conn.execute(sql).fetchone()[0] for name, sql in {
            "live talks": "select count(*) from talks where gone_since is null",
            "links": "select count(*) from links",
            "talk_sources": "select count(*) from talk_sources",
            "related talks": "select count(*) from talk_related"}.items()}


def test_rebuild_without_its_archive_refuses_and_changes_nothing(fresh_db_path):
    archive = IndexFiles.of(fresh_db_path).archive
    archive.unlink()
    before = fresh_db_path.read_bytes()
    done = gputalks("rebuild", "--db", str(fresh_db_path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"gputalks: {archive}: missing; rebuild re-reads the archived documents")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert fresh_db_path.read_bytes() == before and not archive.exists()
    assert stray_files(fresh_db_path.parent) == []


def test_a_refresh_without_its_archive_marks_nothing_gone_and_drops_no_link(fresh_db_path):
    """Only talks.db was copied to a server: a refresh of one source knows only what it fetches,
    says so, and keeps every talk, link and value it did not see."""
    IndexFiles.of(fresh_db_path).archive.unlink()
    before, known = counts(fresh_db_path), known_values(fresh_db_path)
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT), "--source", "github")
    assert done.returncode == 0, done.stderr
    assert "starting a new one from what this run fetches; no talk is marked gone" in " ".join(done.stderr.split())
    after = counts(fresh_db_path)
    assert after["live talks"] == before["live talks"] == 150
    assert after["links"] >= before["links"] and after["talk_sources"] >= before["talk_sources"]
    assert after["related talks"] == before["related talks"] == 150  # those of the talks it did not make too
    assert all(known_values(fresh_db_path)[name] >= count for name, count in known.items())
    again = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(SNAPSHOT))  # the archive is back
    assert again.returncode == 0, again.stderr
    assert counts(fresh_db_path)["live talks"] == 150


def test_an_archive_of_another_index_is_refused(fresh_db_path):
    archive = IndexFiles.of(fresh_db_path).archive
    with sqlite3.connect(archive) as conn:  # another project's ledger: its first run is not ours
        conn.execute("update refresh_runs set started_at = '2020-01-01T00:00:00Z'")
    before = fresh_db_path.read_bytes()
    for command in (["refresh", "--snapshot", str(SNAPSHOT)], ["rebuild"]):
        done = gputalks(*command, "--db", str(fresh_db_path))
        assert done.returncode == 2, done.stderr
        assert done.stderr == (f"gputalks: {archive}: the archive of another index (no record of talks.db's first "
                               f"run, {done.stderr.split('first run, ')[1].split(')')[0]}); move it away and "
                               "restore this index's own archive\n")
        assert fresh_db_path.read_bytes() == before


def test_a_db_of_another_application_is_refused(tmp_path):
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("create table users (id integer primary key, name text)")
    before = other.read_bytes()
    done = gputalks("refresh", "--db", str(other), "--snapshot", str(SNAPSHOT))
    assert done.returncode == 2
    assert done.stderr == (f"gputalks: {other}: an SQLite database of another application (no talks or "
                           "refresh_runs table); give --db a gputalks index or a new file name\n")
    assert other.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.parametrize("command", [["status"], ["changes"], ["search", "TMA"],
                                     ["export", "gpu-mode-core", "--curation", "CURATION"]])
@pytest.mark.parametrize("kind", ["empty file", "another application's database"])
def test_a_db_that_is_not_an_index_is_one_line_for_the_reading_commands(tmp_path, command, kind):
    from gputalks.project.resources import DEFAULT_CURATION

    db = tmp_path / "other.db"
    db.touch()
    if kind != "empty file":
        with sqlite3.connect(db) as conn:
            conn.execute("create table users (id integer primary key)")
    command = [str(next(DEFAULT_CURATION.glob("*.toml"))) if part == "CURATION" else part for part in command]
    done = gputalks(*command, "--db", str(db), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"gputalks: {db}: not a gputalks index (an empty file, or another application's SQLite "
                           "database); give --db a gputalks index, or run `gputalks refresh` to make one\n")


def test_a_damaged_archived_document_stops_the_build_in_one_line(fresh_db_path):
    """A page of the archive damaged on disk (a document that no longer decompresses): the rebuild
    names the document and what to do, exits 3, and the served index stays as it was."""
    archive = IndexFiles.of(fresh_db_path).archive
    with sqlite3.connect(archive) as conn:
        conn.execute("update raw_documents set body = x'0001020304' where id = "
                     "(select min(id) from raw_documents where encoding = 'zlib')")
    before = fresh_db_path.read_bytes()
    done = gputalks("rebuild", "--db", str(fresh_db_path))
    assert done.returncode == 3, done.stderr
    assert "is damaged (Error -3 while decompressing data" in done.stderr and "restore the archive" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert fresh_db_path.read_bytes() == before


def test_a_refused_swap_leaves_the_index_and_no_building_file(fresh_db_path, tmp_path):
    """The swap's rename refused (the index's name taken by a directory): the error goes on up and
    the working copy and its journal go with it."""
    import shutil

    from tests.faults import stray_files

    served = tmp_path / "served"
    served.mkdir()
    for name in ("talks.db", "talks.archive.db"):
        shutil.copy(fresh_db_path.parent / name, served / name)
    from gputalks.index.store import building_copy

    blocked = served / "talks.db"
    with pytest.raises(OSError):
        with building_copy(blocked) as work:
            blocked.unlink()
            blocked.mkdir()  # os.replace(file, non-empty directory) fails
            (blocked / "x").write_text("")
            assert work.exists()
    assert stray_files(served) == []


def test_a_damaged_archive_is_named_with_what_to_do(fresh_db_path):
    """A truncated archive (a full disk while it was copied, a bad backup): every command that
    reads it names the archive, not "the index", says what to do, and keeps the index."""
    archive = IndexFiles.of(fresh_db_path).archive
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    before = fresh_db_path.read_bytes()
    for command, code in ((["refresh", "--snapshot", str(SNAPSHOT)], 3), (["rebuild"], 3), (["status"], 1)):
        done = gputalks(*command, "--db", str(fresh_db_path))
        assert done.returncode == code, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert done.stderr.startswith(f"gputalks: {archive}: the archive of raw documents is damaged"), done.stderr
        assert "move it aside: the next refresh starts a new archive" in done.stderr
    assert fresh_db_path.read_bytes() == before
