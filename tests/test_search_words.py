"""The search's vocabulary (`search_words`, what search/query.py corrects a query against):
a build gathers it from the talks as it writes them; it must equal the words read back from
the index's live talks, also when the writing kept older values the sources left empty."""

from __future__ import annotations

import json
import re
from pathlib import Path

import sqlite_utils

from gputalks.index.enrich import Vocabulary, write_search_vocabulary
from gputalks.project.resources import DEFAULT_TOPICS

from tests.conftest import SNAPSHOT, copy_index
from tests.faults import faulty_snapshot, gputalks, sources_config


def vocabulary(db_path: Path) -> set[str]:
    return {word for (word,) in sqlite_utils.Database(db_path).execute("select word from search_words")}


def read_back(db_path: Path, tmp_path: Path) -> set[str]:
    """The vocabulary as the index's live talks give it, on a copy."""
    (tmp_path / "read-back").mkdir()
    copy = copy_index(db_path, tmp_path / "read-back" / "talks.db")
    db = sqlite_utils.Database(copy)
    with db.atomic():
        write_search_vocabulary(db, Vocabulary.load(DEFAULT_TOPICS))
    db.close()
    return vocabulary(copy)


def test_a_rebuilds_gathered_words_are_its_live_talks_words(fresh_db_path, tmp_path):
    done = gputalks("rebuild", "--db", str(fresh_db_path))
    assert done.returncode == 0, done.stderr
    gathered = vocabulary(fresh_db_path)
    assert gathered == read_back(fresh_db_path, tmp_path)
    # Real words of real titles, speakers and topics; no short words or numbers.
    assert {"flashattention", "cutlass", "triton", "quantization"} <= gathered
    assert not [word for word in gathered if len(word) < 3 or word.isdigit()]


def private_titles(body: bytes) -> bytes:
    listing = json.loads(body)
    for entry in listing["entries"][:20]:
        entry.update(title="", duration=None, description=None)
    return json.dumps(listing).encode()


def test_words_of_titles_the_writing_kept_are_in_the_vocabulary(fresh_db_path, tmp_path):
    """20 videos come back without titles: their talks keep their titles, and so does the vocabulary."""
    recorded = json.loads((SNAPSHOT / "youtube" / "gpumode-videos.json").read_text())["entries"][:20]
    asked = f"select id, title from talks where youtube_id in ({', '.join('?' * len(recorded))})"
    ids = [entry["id"] for entry in recorded]
    before = dict(sqlite_utils.Database(fresh_db_path).execute(asked, ids).fetchall())
    snapshot = faulty_snapshot(tmp_path, lambda folder, _: (folder / "youtube" / "gpumode-videos.json").write_bytes(
        private_titles((folder / "youtube" / "gpumode-videos.json").read_bytes())))
    done = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(snapshot),
                    "--config", str(sources_config(tmp_path)))
    assert "known values kept" in done.stdout + done.stderr, done.stdout + done.stderr
    talks = f"select id, title from talks where id in ({', '.join('?' * len(before))})"
    assert dict(sqlite_utils.Database(fresh_db_path).execute(talks, list(before)).fetchall()) == before
    gathered = vocabulary(fresh_db_path)
    assert gathered == read_back(fresh_db_path, tmp_path)
    kept = {word for title in before.values() for word in re.findall(r"[a-z0-9]+", title.lower())
            if len(word) > 2 and not word.isdigit()}
    assert len(kept) > 20 and kept <= gathered
