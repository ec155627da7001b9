"""Facts set by hand (overrides.toml [[facts]]): any reader fact of any talk, YouTube-only talks
included, shown with "set by hand" and where to check it, never overwritten by a source; an
entry the sources now agree with, or whose talk is gone, is reported."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace

from gputalks.index.pipeline import RefreshOptions, refresh
from gputalks.project.resources import DEFAULT_OVERRIDES
from gputalks.project.settings import default_settings
from gputalks.site.serve import served_datasette

from tests.conftest import SNAPSHOT

TALK = "youtube-86FAWCzIe_4"  # freeCodeCamp's CUDA course: YouTube alone, no speaker, no length known


def test_a_youtube_only_talk_gets_two_speakers_a_date_and_a_length_by_hand(tmp_path):
    overrides = tmp_path / "overrides.toml"
    overrides.write_text(DEFAULT_OVERRIDES.read_text() + f'''
[[facts]]
talk = "{TALK}"
speakers = ["Elliot Arledge", "Ada Example"]
date = "2025-01"
length = "12 h"
source = "the course's own description on YouTube"
''')
    settings = replace(default_settings(), overrides=overrides)
    db_path = tmp_path / "talks.db"
    report = refresh(db_path, settings, RefreshOptions(snapshot=SNAPSHOT))
    assert report.exit_code == 0, report.problems
    with sqlite3.connect(db_path) as conn:
        row = conn.execute("select speaker_names, date, year, duration_s, field_sources from talks where id = ?",
                           [TALK]).fetchone()
        speakers = [r[0] for r in conn.execute("select speaker_id from talk_speakers where talk_id = ? order by position",
                                               [TALK])]
    assert row[:4] == ("Elliot Arledge, Ada Example", "2025-01", 2025, 43200)
    assert '"speakers": "set by hand (the course' in row[4] and speakers == ["elliot-arledge", "ada-example"]
    ds = served_datasette(db_path)
    page = asyncio.run(ds.client.get(f"/talks/talks/{TALK}")).text
    assert "Elliot Arledge" in page and "Ada Example" in page and "set by hand" in page
    found = asyncio.run(ds.client.get("/search.json?q=Ada+Example")).json()["results"]
    assert found[0]["id"] == TALK
    csv = asyncio.run(ds.client.get(f"/talks/talks.csv?id={TALK}&_col=speaker_names")).text
    assert "Elliot Arledge, Ada Example" in csv
    again = refresh(db_path, settings, RefreshOptions(snapshot=SNAPSHOT))  # never overwritten by a source
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("select speaker_names from talks where id = ?", [TALK]).fetchone()[0] == \
            "Elliot Arledge, Ada Example"
    assert again.exit_code == 0


def test_an_entry_the_sources_agree_with_is_reported(tmp_path):
    overrides = tmp_path / "overrides.toml"
    overrides.write_text('''
[[facts]]
talk = "gpumode-lecture-012"
speakers = ["Thomas Viehmann"]
source = "the README"
''')
    report = refresh(tmp_path / "talks.db", replace(default_settings(), overrides=overrides),
                     RefreshOptions(snapshot=SNAPSHOT))
    assert any(p.item == "gpumode-lecture-012" and "the sources now give the same; the entry can go" in p.reason
               for p in report.problems)


def test_the_shipped_overrides_name_the_thunderkittens_lectures_speaker(snapshot_db_path):
    with sqlite3.connect(snapshot_db_path) as conn:
        names, origins = conn.execute("select speaker_names, field_sources from talks where id = 'youtube-xcpEl0cGCC4'").fetchone()
    assert names == "Benjamin Spector" and "set by hand (https://github.com/HazyResearch/ThunderKittens" in origins
