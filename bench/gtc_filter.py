"""The shipped GTC catalog filter judged on real GTC 2026 sessions (bench/gtc_judgments.toml):
precision and recall of "a GPU-programming docs reader wants this", for the judged sessions the
tests see and for the held-out third (scored only here).

    .venv/bin/python -m bench.gtc_filter
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from gputalks.project.settings import load_config
from gputalks.scraper.catalog import CatalogFilter, CatalogSession

JUDGMENTS = Path(__file__).with_name("gtc_judgments.toml")
SESSIONS = Path(__file__).resolve().parents[2] / "shared" / "data" / "real" / "gtc" / "gtc26-catalog-sessions.json"
LABELS = {"Topic": "topic", "Technical Level": "technical_level", "Session Type": "session_type"}


def judged(held_out: bool | None = None) -> dict[str, bool]:
    """Session code -> wanted, for the held-out third, the rest, or all (None)."""
    data = tomllib.loads(JUDGMENTS.read_text(encoding="utf-8"))
    verdicts = {**{code: True for code in data["wanted"]}, **{code: False for code in data["unwanted"]}}
    codes = sorted(verdicts)
    return {code: verdicts[code] for n, code in enumerate(codes) if held_out is None or (n % 3 == 2) == held_out}


def real_sessions() -> dict[str, CatalogSession]:
    """The real 2026 sessions as the catalog reads them (a RainFocus item each)."""
    found = {}
    for number, s in enumerate(json.loads(SESSIONS.read_text(encoding="utf-8"))):
        item = {"sessionID": f"1770000000000{number:05d}", "code": s["session_id"], "title": s["title"],
                "abstract": s["abstract"], "type": s["session_type"],
                "attributevalues": [{"attribute": label, "value": s[key]} for label, key in LABELS.items()]}
        session = CatalogSession.read(item, "gtc26")
        if session is not None:
            found[s["session_id"]] = session
    return found


def shipped_filter() -> CatalogFilter:
    """The filter of the shipped config's catalog of GPU-programming talks (GTC 2025's)."""
    return CatalogFilter.of(next(c for c in load_config()["gtc"]["catalogs"] if c.get("keywords")))


def scores(verdicts: dict[str, bool], sessions: dict[str, CatalogSession], chosen: CatalogFilter) -> dict:
    taken = {code for code in verdicts if chosen.takes(sessions[code])}
    wanted = {code for code, yes in verdicts.items() if yes}
    return {"judged": len(verdicts), "wanted": len(wanted), "taken": len(taken),
            "precision": round(len(taken & wanted) / len(taken), 3) if taken else 0.0,
            "recall": round(len(taken & wanted) / len(wanted), 3) if wanted else 0.0,
            "taken_unwanted": sorted(taken - wanted), "missed": sorted(wanted - taken)}


def main() -> None:
    sessions, chosen = real_sessions(), shipped_filter()
    for name, held_out in (("tuned (in the tests)", False), ("held out", True), ("all", None)):
        found = scores(judged(held_out), sessions, chosen)
        print(f"{name}: {found['judged']} judged, {found['wanted']} wanted, {found['taken']} taken: "
              f"precision {found['precision']}, recall {found['recall']}")
    everything = sum(chosen.takes(s) for s in sessions.values())
    print(f"of all {len(sessions)} real 2026 sessions, the filter takes {everything}")


if __name__ == "__main__":
    main()
