"""The orders readers sort the talks by, each one never-null, never-tied key sorted ascending.

Datasette pages a sorted table by the sort column's value and the id of a page's last row, and
orders every next page by both; the first page it orders by the column alone. Under a column with
ties (an event, a series, a duration, the 148 missing dates of 150 talks) SQLite gives the first
page's ties in whatever order its plan reads them, so "Next" and CSV streams (which page the same
way) skipped and repeated talks: sorted by event descending, a walk of 150 talks met 50 of them.
A key that is never tied pages right whatever the plan; so the talks sort by these keys alone
(`SORT_KEYS`: the column each orders, which the table's header sorts by its key).

Each key sorts ascending with its missing values last, as the next page of a descending sort also
asks for nulls (`< :p or x is null`), which SQLite cannot seek: each page read the index from
its start (6 ms a page 80,000 talks in: a full CSV stream took 1.24x bare Datasette's time).
"""

from __future__ import annotations

from typing import Any

# A talk's column -> the key the talks sort by for it (the key's ascending order first).
SORT_KEYS = {"date": "newest_first", "duration_s": "longest_first", "title": "alphabetical"}
# A key -> what a reader reads of its order, ascending and descending ("sorted oldest first").
SORT_WORDS = {"newest_first": ("newest first", "oldest first"), "longest_first": ("longest first", "shortest first"),
              "alphabetical": ("by title, A to Z", "by title, Z to A")}
LONGEST = 9_999_999  # seconds (115 days): a duration's digits, inverted, never run out

_INVERTED_DIGITS = str.maketrans("0123456789", "9876543210")
_ID_CHARACTERS = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"  # a talk id's, in order
_INVERTED_ID = str.maketrans(_ID_CHARACTERS, _ID_CHARACTERS[::-1])


def newest_first(date: str | int | None, talk_id: str) -> str:
    """The newest date first (its digits inverted, 2024-03-18: 7975-96-81), a date known to its
    year alone after that year's days ("2024": 7975~ sorts after 7975-...), none last ("~" is after
    them), then the id backwards (so the undated lecture 120 comes before lecture 18). The talks'
    default order."""
    return f"{str(date or '').translate(_INVERTED_DIGITS)}~{talk_id.translate(_INVERTED_ID)}~"


def longest_first(duration_s: int | None, talk_id: str) -> str:
    """The longest talk first (its seconds taken from `LONGEST`, zero-padded), those of unknown
    length last ("~" is after the digits), then the id."""
    if duration_s is None:
        return f"~{talk_id}"
    return f"{LONGEST - min(max(int(duration_s), 0), LONGEST):07d}~{talk_id}"


def alphabetical(title: str | None, talk_id: str) -> str:
    """The title case-folded, its spaces single, then a tab (before any character a title keeps,
    so "Scan" comes before "Scan Algorithm"), then the id."""
    return f"{' '.join((title or '').casefold().split())}\t{talk_id}"


# A key -> how it is made from its value and the talk's id.
KEY_OF = {"newest_first": newest_first, "longest_first": longest_first, "alphabetical": alphabetical}
# A key -> the columns it orders by, the first known one: a talk known only by its year (most GTC
# sessions) sorts by that year, not with the undated.
ORDERED_BY = {"newest_first": ("date", "year"), "longest_first": ("duration_s",), "alphabetical": ("title",)}


def order_keys(row: dict[str, Any]) -> dict[str, str]:
    """A talks row's keys, from what it holds."""
    return {key: make(next((row[c] for c in ORDERED_BY[key] if row.get(c) is not None), None), row["id"])
            for key, make in KEY_OF.items()}
