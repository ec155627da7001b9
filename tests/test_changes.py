"""`gputalks changes`: what a night brought, as a reviewer and a terminal read it."""

from __future__ import annotations

import json

import sqlite_utils
from click.testing import CliRunner

from gputalks.cli import cli
from gputalks.index.history import apply_talks
from gputalks.index.link import TalkCluster
from gputalks.index.merge import merge_talk
from gputalks.index.runs import start_run
from gputalks.scraper.records import SpeakerRef, TalkItem


def test_changes_as_a_reviewer_reads_them(fresh_db_path, tmp_path):
    """A night with a new talk and a changed one: `changes --format markdown` lists each talk
    once with its title (linked), event or series, length and speakers; json gives the same."""
    db = sqlite_utils.Database(fresh_db_path)
    run = start_run(db, "refresh")
    talk = merge_talk(TalkCluster("gtc-gtc26-s99999", [TalkItem(
        source="gtc", key="gtc26-s99999", title="Writing <b>Fast</b> CUDA Kernels", event="GTC 2026", year=2026,
        url="https://www.nvidia.com/en-us/on-demand/session/gtc26-s99999/", duration_s=2400,
        speakers=[SpeakerRef("Ada Example")])], {}))
    apply_talks(db, run, "2030-01-02T06:00:00Z", [talk])
    db.execute("update talks set title = 'Flash Attention (2024)' where id = 'gpumode-lecture-012'")
    db.execute("insert into talk_changes (run_id, changed_at, talk_id, field, old_value, new_value) values "
               "(?, '2030-01-02T06:00:00Z', 'gpumode-lecture-012', 'title', 'Flash Attention', 'Flash Attention (2024)')",
               [run])
    db.conn.commit()
    result = CliRunner().invoke(cli, ["changes", "--db", str(fresh_db_path), "--since", "2030-01-02",
                                      "--format", "markdown"])
    assert result.exit_code == 0, result.output
    assert "### New talks (1)" in result.output and "### Changed (1)" in result.output
    assert ("- [Writing &lt;b&gt;Fast&lt;/b&gt; CUDA Kernels](https://www.nvidia.com/en-us/on-demand/session/gtc26-s99999/)"
            " (GTC 2026 · 40 min · Ada Example) `gtc-gtc26-s99999`") in result.output
    assert "  - title: Flash Attention → Flash Attention (2024)" in result.output
    data = json.loads(CliRunner().invoke(cli, ["changes", "--db", str(fresh_db_path), "--since", "2030-01-02",
                                                      "--format", "json"]).output)
    assert [t["id"] for t in data["new"]] == ["gtc-gtc26-s99999"] and data["changed"][0]["fields"][0][0] == "title"
    # the plain lines say what arrived too: title, event, length, speakers
    text = CliRunner().invoke(cli, ["changes", "--db", str(fresh_db_path), "--since", "2030-01-02"]).output
    assert ("2030-01-02  gtc-gtc26-s99999  new talk  Writing <b>Fast</b> CUDA Kernels (GTC 2026 · 40 min · Ada Example)"
            in text.splitlines())
    assert "gpumode-lecture-012  title: Flash Attention -> Flash Attention (2024)  Flash Attention (2024) (GPU MODE" in text
