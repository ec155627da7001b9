"""An unchanged night writes almost nothing, however big the index: measured as
the kernel counts it (`write_bytes` of /proc/self/io) for the real `gputalks
refresh` process, on an index padded to 100 MB."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from gputalks.index.store import IndexFiles

from tests.conftest import REPO, SNAPSHOT
from tests.faults import faulty_snapshot, rewrite

MB = 1024 * 1024
MEASURED = """
import atexit, sys
report = sys.argv.pop(1)
atexit.register(lambda: open(report, "w").write(open("/proc/self/io").read()))
from gputalks.cli import cli
cli()
"""


def refresh_io(db_path: Path, snapshot: Path, tmp_path: Path) -> dict[str, int]:
    """Run `gputalks refresh` and return its /proc/self/io counters."""
    report = tmp_path / "io.txt"
    done = subprocess.run([sys.executable, "-c", MEASURED, str(report), "refresh", "--db", str(db_path),
                           "--snapshot", str(snapshot)], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {key: int(value) for key, value in
            (line.split(": ") for line in report.read_text().splitlines())}


def pad(db_path: Path, megabytes: int) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("create table padding (blob blob)")
        conn.executemany("insert into padding values (randomblob(?))", [(MB,)] * megabytes)


def test_an_unchanged_night_writes_under_2_mb_on_a_100_mb_index(fresh_db_path, tmp_path):
    pad(fresh_db_path, 100)
    files = IndexFiles.of(fresh_db_path)
    assert fresh_db_path.stat().st_size > 100 * MB
    index_before, archive_before = fresh_db_path.read_bytes(), files.archive.stat().st_size
    io = refresh_io(fresh_db_path, SNAPSHOT, tmp_path)
    print(f"\nunchanged night on a {fresh_db_path.stat().st_size / MB:.0f} MB index: "
          f"write_bytes {io['write_bytes'] / 1024:.0f} KiB, wchar {io['wchar'] / 1024:.0f} KiB, "
          f"archive growth {files.archive.stat().st_size - archive_before} bytes")
    assert io["write_bytes"] < 2 * MB
    assert fresh_db_path.read_bytes() == index_before  # the served file was not touched


def test_a_changed_listing_costs_its_compressed_size_in_the_archive(fresh_db_path, tmp_path):
    files = IndexFiles.of(fresh_db_path)
    listing = SNAPSHOT / "youtube" / "gpumode-videos.json"
    before = files.archive.stat().st_size

    def one_more_view(body: bytes) -> bytes:
        data = json.loads(body)
        data["entries"][0]["view_count"] = (data["entries"][0].get("view_count") or 0) + 1
        return json.dumps(data).encode()

    changed = faulty_snapshot(tmp_path, rewrite("youtube/gpumode-videos.json", one_more_view))
    refresh_io(fresh_db_path, changed, tmp_path)
    growth = files.archive.stat().st_size - before
    print(f"\none listing entry changed: the archive grew {growth / 1024:.0f} KiB "
          f"(the listing is {listing.stat().st_size / 1024:.0f} KiB uncompressed)")
    assert growth < listing.stat().st_size / 3
