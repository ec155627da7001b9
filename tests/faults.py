"""What every fault test needs: the real `gputalks` process, what an index holds (so a case can
say nothing was lost), and a sources config that never waits to retry."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gputalks.index.store import IndexFiles
from gputalks.project.resources import DEFAULT_SOURCES

from tests.conftest import REPO, SNAPSHOT

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


def readme_cut(share: float) -> Callable[[bytes], bytes]:
    return lambda body: body[: int(len(body) * share)]
