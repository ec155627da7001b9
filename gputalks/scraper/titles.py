"""Talk titles and keys: the one home of the "Lecture N" grammar, text folding,
slugs and YouTube URLs, used by every source, the linker and the merge.

The grammar covers what the README headings and the video titles write:
"Lecture 12: Flash Attention", "Lecture 1 How to profile CUDA kernels",
"CUDA MODE Lecture 5 - ...", "Bonus Lecture: CUDA C++ llm.cpp", "lecture 43:"
(no title), "Lecture 3" with the title elsewhere.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qs, urlparse

LECTURE_RE = re.compile(
    r"^\W*(?:(?:cuda|gpu)\s+mode\s*[:\-]?\s*)?(?P<bonus>bonus\s+)?lecture(?:\s*(?P<number>\d+)\b|\b)"
    r"\s*[:.\-–—]?\s*(?P<title>.*?)\s*$", re.I | re.S)
SERIES_TAG_RE = re.compile(r"^\[(?P<tag>[^\]]+)\]\s*(?P<rest>.*)$", re.S)


@dataclass(frozen=True)
class LectureTitle:
    """A title read as a lecture: its number (None for a bonus lecture), the rest."""

    number: int | None
    bonus: bool
    title: str


def parse_lecture_title(text: str | None) -> LectureTitle | None:
    """The lecture a title names, or None when it names none ("Lecture" with
    neither a number nor "Bonus" is not a lecture: "Lectures on X")."""
    match = LECTURE_RE.match(text or "")
    if not match or not (match["number"] or match["bonus"]):
        return None
    return LectureTitle(int(match["number"]) if match["number"] else None, bool(match["bonus"]),
                        match["title"])


def lecture_number(title: str | None) -> int | None:
    """The number a lecture title starts with: "Lecture 12: ..." -> 12."""
    lecture = parse_lecture_title(title)
    return lecture.number if lecture else None


def lecture_label(number: int) -> str:
    """How a reader names a numbered lecture: 12 -> "Lecture 12" (what LECTURE_RE reads back)."""
    return f"Lecture {number}"


def without_lecture_prefix(title: str) -> str:
    """"Lecture 12: Flash Attention" -> "Flash Attention"; other titles unchanged."""
    lecture = parse_lecture_title(title)
    return lecture.title if lecture else title


def split_series_tag(title: str) -> tuple[str | None, str]:
    """"[ScaleML Series] Quantization" -> ("ScaleML Series", "Quantization")."""
    tag = SERIES_TAG_RE.match(title)
    return (tag["tag"].strip(), tag["rest"].strip()) if tag else (None, title)


def fold(text: str) -> str:
    """Lower-case ASCII: accents dropped (NFKD), so "Ténsor" and "Tensor" compare equal. Not
    cached: its callers cache their own results (a cache here held a second copy of every title)."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()


@lru_cache(maxsize=65536)
def slugify(text: str) -> str:
    """"Lecture 12: Flash Attention" -> "lecture-12-flash-attention"; also speaker ids."""
    return re.sub(r"[^a-z0-9]+", "-", fold(text)).strip("-")


def watch_url(video_id: str) -> str:
    return f"https://www.youtube.com/watch?v={video_id}"


def deep_link(video_id: str, start_s: float) -> str:
    """The video at that second."""
    return f"{watch_url(video_id)}&t={int(start_s)}s"


YOUTUBE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{11}$")


def youtube_id_from_url(url: str) -> str | None:
    """The video id a YouTube link names: youtu.be/ID, watch?v=ID, /embed/ID, /live/ID, /shorts/ID."""
    parsed = urlparse(url.strip())
    host = (parsed.hostname or "").removeprefix("www.").removeprefix("m.")
    if host == "youtu.be":
        candidate = parsed.path.strip("/").split("/")[0]
    elif host.endswith("youtube.com") or host == "youtube-nocookie.com":
        parts = [p for p in parsed.path.split("/") if p]
        if parts[:1] == ["watch"]:
            candidate = (parse_qs(parsed.query).get("v") or [""])[0]
        elif len(parts) >= 2 and parts[0] in ("embed", "live", "shorts", "v"):
            candidate = parts[1]
        else:
            return None
    else:
        return None
    return candidate if YOUTUBE_ID_RE.match(candidate) else None


# A speaker's name as a catalog writes it: a parenthesis at the END is the catalog's own note
# ("Stephen Jones (SW)", "Ray Wang (HW-Comp DevTech-CN05)"); one inside the name is a nickname
# ("Ray (Yi-Ting) Wang", "Juan Pablo (JP) Guerra") and stays.
INTERNAL_SUFFIX_RE = re.compile(r"\s*\([^()]*\)\s*$")


def speaker_name(name: str) -> str:
    """One spelling per person: the name without a trailing internal suffix, spaces folded."""
    cleaned = INTERNAL_SUFFIX_RE.sub("", " ".join(name.split()))
    return cleaned or " ".join(name.split())
