"""A GTC session that fails is asked again every night until it answers, whatever
`recheck_days` says: as real `gputalks` processes on a replay, a vanished session is reported
(partial, exit 1) each night, never "unchanged"."""

from __future__ import annotations

from gputalks.scraper.ondemand import due_today

from tests.faults import answer, faulty_snapshot, gputalks, inventory, sources_config


def test_a_failing_session_is_asked_every_night_until_it_answers(fresh_db_path, tmp_path):
    slug = next(s for s in ("gtc24-s62400", "gtc24-s62401", "gtc25-s72897", "gtcspring22-s41487")
                if not due_today(s, 30))  # not due today: only its failure makes it asked
    gone = faulty_snapshot(tmp_path / "gone", answer(404, "not found", "gtc", f"id={slug}"))
    for folder in ("every", "shipped"):
        (tmp_path / folder).mkdir()
    every_night = sources_config(tmp_path / "every", lambda t: t.replace("recheck_days = 30", "recheck_days = 1"))
    shipped = sources_config(tmp_path / "shipped")
    before = inventory(fresh_db_path)
    first = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(gone), "--config", str(every_night))
    assert first.returncode == 1 and f"{slug}" in first.stderr, first.stdout + first.stderr
    for _ in range(2):  # recheck_days = 30: the session is not due, but it failed last time
        night = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(gone), "--config", str(shipped))
        assert night.returncode == 1, night.stdout + night.stderr
        assert "gtc      partial" in night.stdout and "HTTP 404" in night.stderr
    assert inventory(fresh_db_path) == before  # its talk kept its last version
    back = gputalks("refresh", "--db", str(fresh_db_path), "--snapshot", str(faulty_snapshot(
        tmp_path / "back", lambda snapshot, responses: None)), "--config", str(shipped))
    assert back.returncode == 0 and "gtc      unchanged" in back.stdout, back.stdout + back.stderr
