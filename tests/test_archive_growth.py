"""The archive over many nights: a night that changes one title adds what changed, not another
copy of everything. A changed README is stored against its last whole version; a problem the
last build found too keeps its row. Real processes, one refresh a night."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

from gputalks.index.store import IndexFiles

from tests.conftest import REPO, SNAPSHOT

NIGHTS = 8


def test_one_title_nights_grow_the_archive_by_little_and_rebuild_exactly(tmp_path):
    snapshot = tmp_path / "snapshot"
    shutil.copytree(SNAPSHOT, snapshot)
    manifest = json.loads((snapshot / "manifest.json").read_text())
    for entry in manifest["responses"]:
        if entry["file"].endswith("readme.md"):
            entry.get("headers", {}).pop("etag", None)  # a changed README has a new ETag
    (snapshot / "manifest.json").write_text(json.dumps(manifest))
    readme = snapshot / "github" / "readme.md"
    original = readme.read_text()
    db_path = tmp_path / "talks.db"
    archive = IndexFiles.of(db_path).archive

    def gputalks(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "gputalks", *args, "--db", str(db_path)], cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done

    gputalks("refresh", "--snapshot", str(snapshot))
    first = archive.stat().st_size
    for night in range(1, NIGHTS + 1):
        readme.write_text(original.replace("## Lecture 12: Flash Attention", f"## Lecture 12: Flash Attention ({night})"))
        gputalks("refresh", "--snapshot", str(snapshot))
    grown = archive.stat().st_size - first
    assert grown <= NIGHTS * 2048, f"{grown / NIGHTS:.0f} bytes a night"
    with sqlite3.connect(archive) as conn:
        encodings = dict(conn.execute("select encoding, count(*) from raw_documents where url like '%/readme' "
                                      "group by encoding").fetchall())
        standing = conn.execute("select count(*), max(builds) from problems where last_run_id = "
                                "(select max(id) from refresh_runs)").fetchone()
    assert encodings == {"zlib": 1, "zlib-delta": NIGHTS}
    assert standing[0] > 0 and standing[1] == NIGHTS + 1  # found by every build, stored once
    status = gputalks("status", "--all").stdout
    assert "notes: " in status or "warnings: " in status
    with sqlite3.connect(db_path) as conn:
        conn.execute("update talks set title = 'stale' where id = 'gpumode-lecture-012'")
    gputalks("rebuild")  # from the archive alone: the README's last version decompressed against its base
    with sqlite3.connect(db_path) as conn:
        title = conn.execute("select title from talks where id = 'gpumode-lecture-012'").fetchone()[0]
    assert title == f"Flash Attention ({NIGHTS})"
