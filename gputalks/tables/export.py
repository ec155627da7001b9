"""Rendering the docs' tables from the index: Markdown, CSV or JSON.

Titles, links and durations come from the index, the curator's cells from the
curation (`curation.py`). Output is deterministic: the same index and curation
give byte-identical tables, so a nightly job's diff is empty when nothing
changed. `update_markdown` rewrites only the regions between
`<!-- gputalks:table ID -->` and `<!-- /gputalks -->` (the cog pattern).
"""

from __future__ import annotations

import csv
import io
import json
import re

import sqlite_utils

from gputalks.tables.curation import Column, CuratedTable, CurationError, ResolvedRow, cell_text, resolve
from gputalks.durations import UNKNOWN_DURATION, human_duration, parse_length
from gputalks.project.validation import INDEX_COLUMNS

MISSING = {"fr": "(introuvable)", "en": "(missing)"}
OPEN_RE = re.compile(r"<!--\s*gputalks:table\s+(?P<id>[\w.-]+)(?:\s+lang=(?P<lang>\w+))?\s*-->")
CLOSE_RE = re.compile(r"<!--\s*/gputalks\s*-->")
ANY_MARKER_RE = re.compile(r"<!--\s*/?gputalks\b[^>]*-->")


class ExportError(CurationError):
    """A marker or rendering problem; the message names the line or the table, row and key."""


def _cell(column: Column, item: ResolvedRow, lang: str, markdown: bool) -> str:
    row, talk = item.row, item.talk
    if column.key in row.cells:  # the curator's cell wins (and is the only source for own lines)
        return cell_text(row.cells[column.key], lang)
    if column.key not in INDEX_COLUMNS:
        return ""
    if talk is None:
        return MISSING.get(lang, MISSING["en"]) if item.problem else ""
    if column.key == "duration":
        return human_duration(talk["duration_s"], lang)
    if column.key == "speakers":  # scraped names: escaped like every other scraped cell
        names = ", ".join(str(name) for name in json.loads(talk["speakers"] or "[]"))
        return escape_markdown(names) if markdown else names
    if column.key == "title" and markdown and talk.get("url") and SAFE_URL_RE.match(talk["url"]):
        return markdown_link(talk["title"], talk["url"])
    value = talk.get(column.key)
    text = "" if value is None else str(value)
    return escape_markdown(text) if markdown and column.key in INDEX_COLUMNS else text


SAFE_URL_RE = re.compile(r"^https?://[^\s<>]+$")


def escape_markdown(text: str) -> str:
    """Scraped text as inert Markdown: HTML special characters as entities, link
    and emphasis syntax escaped, one line."""
    text = " ".join(text.split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(r"([\[\]\\`*_])", r"\\\1", text)


def markdown_link(text: str, url: str | None) -> str:
    """Scraped text as a Markdown link to `url` when it is a web address, else as inert text."""
    if not url or not SAFE_URL_RE.match(url):
        return escape_markdown(text)
    return f"[{escape_markdown(text)}]({url.replace('(', '%28').replace(')', '%29')})"


def _cell_md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _cell_csv(text: str) -> str:
    """A CSV cell a spreadsheet will not run as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def check(table: CuratedTable, resolved: list[ResolvedRow], allow_missing: bool) -> list[str]:
    """Missing talks: an ExportError, or warnings when allowed. Unknown
    durations are always warnings (the cell says so too)."""
    problems = [r.problem for r in resolved if r.problem]
    if problems and not allow_missing:
        raise ExportError("; ".join(problems) + " (--allow-missing prints a placeholder instead)")
    if any(c.key == "duration" for c in table.columns):
        problems += [f"table {table.id}, row {r.row.position} ({r.row.key}): talk {r.talk['id']} has no "
                     "duration in the index" for r in resolved if r.talk and r.talk["duration_s"] is None]
    return problems


def render(db: sqlite_utils.Database, table: CuratedTable, fmt: str = "markdown", lang: str | None = None,
           allow_missing: bool = False) -> tuple[str, list[str]]:
    """(the table as text, warnings)."""
    lang = lang or table.lang
    resolved = resolve(db, table)
    warnings = check(table, resolved, allow_missing)
    headers = [cell_text(c.header, lang) for c in table.columns]
    rows = [[_cell(c, r, lang, fmt == "markdown") for c in table.columns] for r in resolved]
    if fmt == "json":
        return json.dumps({"id": table.id, "title": cell_text(table.title, lang), "kind": table.kind,
                           "rows": [{"talk_id": r.talk["id"] if r.talk else None, "key": r.row.key,
                                     **({"group": cell_text(r.row.group, lang)} if r.row.group else {}),
                                     "duration_s": r.talk["duration_s"] if r.talk else None,
                                     "url": r.talk["url"] if r.talk else None,
                                     **dict(zip([c.key for c in table.columns], cells))}
                                    for r, cells in zip(resolved, rows)]},
                          ensure_ascii=False, indent=2) + "\n", warnings
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow((["group"] if table.kind == "path" else []) + headers)
        for r, cells in zip(resolved, rows):
            writer.writerow([_cell_csv(c) for c in ([cell_text(r.row.group, lang)] if table.kind == "path" else [])
                             + cells])
        return out.getvalue(), warnings
    if fmt != "markdown":
        raise ExportError(f"unknown format {fmt!r}: markdown, csv or json")
    if table.kind == "path":
        return _render_path(table, resolved, rows, lang), warnings
    lines = ["| " + " | ".join(_cell_md(h) for h in headers) + " |",
             "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell_md(c) for c in cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n", warnings


def _render_path(table: CuratedTable, resolved: list[ResolvedRow], rows: list[list[str]], lang: str) -> str:
    """Groups (weeks) in order, each with its total, then the path's total."""
    keys = [c.key for c in table.columns]
    groups: dict[str, list[tuple[ResolvedRow, dict[str, str]]]] = {}
    for r, cells in zip(resolved, rows):
        groups.setdefault(cell_text(r.row.group, lang), []).append((r, dict(zip(keys, cells))))
    total_label = {"fr": "Total", "en": "Total"}.get(lang, "Total")
    out, grand, grand_unknown = [], 0, False
    for name, members in groups.items():
        seconds = sum(r.talk["duration_s"] or 0 for r, _ in members if r.talk)
        unknown = any(r.talk and r.talk["duration_s"] is None for r, _ in members)
        grand += seconds
        grand_unknown = grand_unknown or unknown
        total = _total(seconds, unknown, lang)
        out.append(f"**{name}** ({total})\n")
        for r, cells in members:
            who = cells.get("who", "")
            extra = ", ".join(x for x in (cells.get("duration") if r.talk else "", cells.get("note")) if x)
            line = f"- {who}, {cells.get('title', '')}" if who else f"- {cells.get('title', '')}"
            out.append(line + (f" ({extra})" if extra else ""))
        out.append("")
    separator = " : " if lang == "fr" else ": "
    out.append(f"{total_label}{separator}{_total(grand, grand_unknown, lang)}")
    return "\n".join(out) + "\n"


def _total(seconds: int, unknown: bool, lang: str) -> str:
    """A sum of durations; when some are unknown it says so ("47 min + durée inconnue")."""
    known = human_duration(seconds, lang) if seconds or not unknown else ""
    unknown_text = UNKNOWN_DURATION.get(lang, UNKNOWN_DURATION["en"]) if unknown else ""
    return " + ".join(x for x in (known, unknown_text) if x)


LANGS = ("fr", "en")
NO_MARKERS = ("no gputalks table markers in this page: put <!-- gputalks:table ID --> and <!-- /gputalks --> "
              "around each generated table (`gputalks export ID --markers` prints a ready block; "
              "`gputalks export --list` names the tables)")


def marker_block(table_id: str, body: str, lang: str | None = None) -> str:
    """A marked region, ready to paste into a docs page, holding the table as rendered now."""
    return (f"<!-- gputalks:table {table_id}{f' lang={lang}' if lang else ''} -->\n"
            f"{body}<!-- /gputalks -->\n")


LINK_RE = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<url>[^)\s]+)\)")
TRAILING_NOTE_RE = re.compile(r"\((?P<note>[^()]*)\)\s*$")
UNKNOWN_TEXTS = frozenset(UNKNOWN_DURATION.values())
SAME_TALK_SCORE = 90  # rapidfuzz partial ratio of two lines' titles naming the same talk


def _cells(line: str) -> list[str]:
    """A Markdown table line's cells (escaped pipes stay inside their cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _title(line: str) -> str:
    """What names the talk on a line: its text, links as their text, without the bullet, the
    pipes and the trailing note, lower case."""
    text = TRAILING_NOTE_RE.sub("", LINK_RE.sub(lambda link: link["text"], line.strip()))
    return " ".join(re.sub(r"[|·*\-]+", " ", text).split()).lower()


def _same_talk(old: str, new: str) -> bool:
    from rapidfuzz import fuzz

    old_link, new_link = LINK_RE.search(old), LINK_RE.search(new)
    if old_link and new_link:
        return old_link["url"] == new_link["url"]
    return fuzz.partial_ratio(_title(old), _title(new)) >= SAME_TALK_SCORE


def _kept_line(new: str, old_lines: list[str]) -> tuple[str, str | None]:
    """`new` with what a line of the page held for the same talk where `new` says "unknown" (a
    line naming a talk: it links it; a week's total does not)."""
    if not any(text in new for text in UNKNOWN_TEXTS) or not LINK_RE.search(new):
        return new, None
    for old in old_lines:
        if not _same_talk(old, new) or any(text in old for text in UNKNOWN_TEXTS):
            continue
        if new.lstrip().startswith("|") and old.lstrip().startswith("|"):
            cells, before = _cells(new), _cells(old)
            if len(cells) == len(before):
                merged = [b if c in UNKNOWN_TEXTS and b else c for c, b in zip(cells, before)]
                held = next(b for c, b in zip(cells, merged) if c != b)
                return "| " + " | ".join(merged) + " |" + ("\n" if new.endswith("\n") else ""), held
        elif (note := TRAILING_NOTE_RE.search(new.rstrip("\n"))) and (old_note := TRAILING_NOTE_RE.search(old)):
            unknown = next((text for text in UNKNOWN_TEXTS if text in note["note"]), None)
            held = old_note["note"].split(",")[0].strip()  # "12 h, en plusieurs fois": the length
            if unknown and held:
                ending = "\n" if new.endswith("\n") else ""
                return new.rstrip("\n")[:note.start()] + f"({note['note'].replace(unknown, held)})" + ending, held
    return new, None


GROUP_RE = re.compile(r"^\*\*(?P<name>.+)\*\* \((?P<total>[^()]*)\)$")
TOTAL_RE = re.compile(r"^(?P<label>Total\s*:?\s*)(?P<total>.*)$")


def retotalled(body: str) -> str:
    """A viewing path whose lines kept lengths from the page, its groups' and its total counted
    again with them: "(47 min + durée inconnue)" becomes "(12 h 47)" once the course's "12 h" is
    kept. Each item's length is the first part of its trailing note ("12 h, en plusieurs fois")."""
    lines = body.splitlines(keepends=True)
    lang = "fr" if UNKNOWN_DURATION["fr"] in body or " : " in body else "en"
    groups: list[tuple[int, int, bool]] = []  # (header line, seconds, some unknown)
    for n, line in enumerate(lines):
        if GROUP_RE.match(line.rstrip("\r\n")):
            groups.append((n, 0, False))
        elif groups and line.lstrip().startswith("- "):
            note = TRAILING_NOTE_RE.search(line.rstrip("\r\n"))
            first = note["note"].split(",")[0].strip() if note else ""
            header, seconds, unknown = groups[-1]
            if first in UNKNOWN_TEXTS:
                groups[-1] = (header, seconds, True)
            elif (length := parse_length(first)) is not None:
                groups[-1] = (header, seconds + length, unknown)
    if not groups:
        return body
    for header, seconds, unknown in groups:
        match = GROUP_RE.match(lines[header].rstrip("\r\n"))
        ending = lines[header][len(lines[header].rstrip("\r\n")):]
        lines[header] = f"**{match['name']}** ({_total(seconds, unknown, lang)}){ending}"
    for n, line in enumerate(lines):
        if match := TOTAL_RE.match(line.rstrip("\r\n")):
            ending = line[len(line.rstrip("\r\n")):]
            lines[n] = match["label"] + _total(sum(g[1] for g in groups), any(g[2] for g in groups), lang) + ending
    return "".join(lines)


def keep_known_values(old: str, new: str) -> tuple[str, list[str]]:
    """The freshly rendered region `new`, except that where the index has no value ("durée
    inconnue") a line keeps what the page held for the same talk (the same link, or a title
    close enough): a hand-typed "12 h" is never replaced by "unknown". Returns the body and
    what was kept."""
    old_lines = [line for line in old.splitlines() if line.strip()]
    kept, lines = [], []
    for line in new.splitlines(keepends=True):
        line, held = _kept_line(line, old_lines)
        if held is not None:
            kept.append(f"{_title(line)!r}: kept the page's {held!r}")
        lines.append(line)
    return (retotalled("".join(lines)) if kept else "".join(lines)), kept


def update_markdown(text: str, render_table, kept: list[str] | None = None) -> str:
    """Replace each marked region's body with render_table(id, lang); every
    other byte is kept, line endings included (a CRLF page gets CRLF tables).
    A page without markers, unbalanced, nested or unknown markers and a
    language gputalks does not write fail before anything is replaced
    (render_table raises ExportError for unknown ids)."""
    regions = []
    open_match = None
    quoted = code_lines(text)
    for match in ANY_MARKER_RE.finditer(text):
        if _line(text, match.start()) in quoted:  # a page that shows the marker syntax: text
            continue
        if CLOSE_RE.fullmatch(match.group(0)):
            if open_match is None:
                raise ExportError(f"line {_line(text, match.start())}: closing <!-- /gputalks --> "
                                  "without an opening marker")
            regions.append((open_match, match))
            open_match = None
        elif OPEN_RE.fullmatch(match.group(0)):
            if open_match is not None:
                raise ExportError(f"line {_line(text, match.start())}: marker opened before the one at line "
                                  f"{_line(text, open_match.start())} was closed")
            open_match = OPEN_RE.match(text, match.start())
        else:
            raise ExportError(f"line {_line(text, match.start())}: unknown marker {match.group(0)!r}")
    if open_match is not None:
        raise ExportError(f"line {_line(text, open_match.start())}: marker is never closed")
    if not regions:
        raise ExportError(NO_MARKERS)
    for opening, _ in regions:
        if opening["lang"] and opening["lang"] not in LANGS:
            raise ExportError(f"line {_line(text, opening.start())}: lang={opening['lang']}: gputalks writes "
                              f"{' or '.join(LANGS)}")
    newline = "\r\n" if "\r\n" in text else "\n"
    bodies = []
    for opening, closing in regions:  # all rendered before any change
        body, held = keep_known_values(text[opening.end():closing.start()], render_table(opening["id"], opening["lang"]))
        bodies.append(body.replace("\n", newline))
        if kept is not None:
            kept += [f"table {opening['id']}: {what}" for what in held]
    out, last = [], 0
    for (opening, closing), body in zip(regions, bodies):
        out.append(text[last:opening.end()])
        out.append(newline + body)
        last = closing.start()
    out.append(text[last:])
    return "".join(out)


def code_lines(text: str) -> set[int]:
    """The lines (1-based) of the page's fenced and indented code blocks, as CommonMark reads them."""
    from markdown_it import MarkdownIt

    return {line + 1 for token in MarkdownIt("commonmark").parse(text)
            if token.type in ("fence", "code_block") and token.map
            for line in range(token.map[0], token.map[1])}


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
