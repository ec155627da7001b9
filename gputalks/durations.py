"""How a duration reads, everywhere it is shown: the docs' tables, the site's pages and
cells, the command line. One function, so a talk is never "39 min" on the site and
"40 min" in the docs."""

from __future__ import annotations

import re

UNKNOWN_DURATION = {"fr": "durée inconnue", "en": "unknown length"}


def human_duration(seconds: int | float | None, lang: str = "en") -> str:
    """4334 -> "1 h 12" (fr) / "1 h 12 min" (en); 2700 -> "45 min"; 43200 -> "12 h"; rounded to
    the minute. None -> "durée inconnue" / "unknown length"."""
    if seconds is None:
        return UNKNOWN_DURATION.get(lang, UNKNOWN_DURATION["en"])
    minutes = round(seconds / 60)
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    if not rest:
        return f"{hours} h"
    return f"{hours} h {rest:02d}" + (" min" if lang == "en" else "")


LENGTH_RE = re.compile(r"^\s*(?:(?P<hours>\d+)\s*h)?\s*(?P<minutes>\d+)?\s*(?:min)?\s*$")


def parse_length(text: str) -> int | None:
    """What a curator types for a length the sources never measured ("12 h", "1 h 05", "45 min")
    in seconds; None when it is not one."""
    match = LENGTH_RE.match(text or "")
    if not match or not (match["hours"] or match["minutes"]):
        return None
    return int(match["hours"] or 0) * 3600 + int(match["minutes"] or 0) * 60
