"""The gpu-mode/lectures repository: its README (one section per lecture) and its tree.

The README's format drifts between versions: headings at `#` or `##`, "Speaker" /
"Speakers" / "Speaker 1", bullet or bare lines, empty titles, numbering gaps, folder links
that point at another lecture's folder. It is parsed with markdown-it-py into
`LectureEntry`s (its grammar is one parser here); the tree tells which `lecture_NNN/`
folders exist and what they hold.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from gputalks.scraper.http import Fetcher
from gputalks.scraper.records import (FetchResult, LinkKind, LinkRef, ParseError, ParseResult, Problem, RawDocument, SpeakerRef,
                      TalkItem)
from gputalks.scraper.titles import LectureTitle, parse_lecture_title, slugify, split_series_tag

NAME = "github"
SERIES = "GPU MODE"
API = "https://api.github.com"
DEFAULT_REPO = "gpu-mode/lectures"

SPEAKER_RE = re.compile(r"\bspeakers?(?:\s*\d+)?\s*:\s*(?P<names>.+)$", re.I)
TITLE_LINE_RE = re.compile(r"^\s*title\s*:\s*(?P<title>.+?)\s*$", re.I)
# "Date: ...", "Slides: ...", "Speaker 1: ...": a labelled line, never a bare title.
LABEL_RE = re.compile(r"^\s*[A-Za-z][\w ]{0,24}?\s*:(?!//)")
# Where the next labelled part of a line starts: "Speaker: X, Book: [...]".
NEXT_LABEL_RE = re.compile(r",\s*(?=[A-Z][A-Za-z]+(?:\s+\d+)?\s*:)")
# Targets that stand for a link someone meant to add.
PLACEHOLDER_RE = re.compile(r"^(?:todo|tbd|tba|test|xxx|link|url|#)?$", re.I)
DATE_RE = re.compile(r"\bdate\s*:\s*(?P<date>\d{4}-\d{2}-\d{2})", re.I)
NAME_SPLIT_RE = re.compile(r"\s*(?:&|,|\band\b)\s*", re.I)
FOLDER_RE = re.compile(r"^(?:\./)?(?P<folder>lecture_?\d+)(?:/(?P<rest>.*))?$", re.I)


@dataclass
class LectureEntry:
    """One lecture section of the README."""

    number: int | None  # None for a "Bonus Lecture"
    title: str  # may be empty ("Lecture 43:")
    heading: str
    line: int  # 1-based line of the heading in the README
    series_tag: str | None = None  # "[ScaleML Series]"
    speakers: list[SpeakerRef] = field(default_factory=list)
    links: list[LinkRef] = field(default_factory=list)
    date: str | None = None
    folders: list[str] = field(default_factory=list)  # repo folders the section links or names
    lines_read: int = 0  # lines of the section so far (the first may be the title)

    @property
    def key(self) -> str:
        if self.number is not None:
            return f"lecture-{self.number:03d}"
        return "bonus-" + slugify(self.title or f"line-{self.line}")


def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"linkify": True}).enable("linkify")


def _inline_lines(token: Token) -> list[tuple[str, list[tuple[str, str]]]]:
    """Split an inline token into lines: (plain text, [(link text, href)])."""
    lines: list[tuple[str, list[tuple[str, str]]]] = []
    text, links = "", []
    href, label = None, ""
    for child in token.children or []:
        if child.type in ("softbreak", "hardbreak"):
            lines.append((text, links))
            text, links = "", []
        elif child.type == "link_open":
            href, label = child.attrs.get("href", ""), ""
        elif child.type == "link_close":
            links.append((label, str(href or "")))
            href = None
        elif child.type in ("text", "code_inline"):
            text += child.content
            if href is not None:
                label += child.content
    lines.append((text, links))
    return lines


def split_names(names: str) -> list[str]:
    return [n.strip(" .*_") for n in NAME_SPLIT_RE.split(names) if n.strip(" .*_")]


def classify_link(label: str, href: str, context: str = "") -> LinkKind:
    """What a README link is: slides, code, notebook, colab, paper, book, folder,
    video, other. `context` is the label of the line's part it sits in ("Book")."""
    low_label, low_href = label.lower(), href.lower()
    if context.lower() == "book":
        return "book"
    if "youtu" in low_href:
        return "video"
    if "colab.research.google.com" in low_href:
        return "colab"
    if "arxiv.org" in low_href or "paper" in low_label:
        return "paper"
    if low_href.endswith(".ipynb") or "notebook" in low_label:
        return "notebook"
    if ("slide" in low_label or "presentation" in low_href or low_href.endswith((".pptx", ".pdf", ".key"))
            or "drive.google.com" in low_href or "dropbox.com" in low_href):
        return "slides"
    if "code" in low_label or "github.com" in low_href:
        return "code"
    if FOLDER_RE.match(href):
        return "folder"
    return "other"


def parse_readme(text: str) -> list[LectureEntry]:
    """Every lecture section of the README, in order of appearance."""
    tokens = _markdown().parse(text)
    entries: list[LectureEntry] = []
    current: LectureEntry | None = None
    in_heading = False
    for token in tokens:
        if token.type == "heading_open":
            in_heading = True
            continue
        if token.type == "heading_close":
            in_heading = False
            continue
        if token.type != "inline":
            continue
        if in_heading:
            lecture = parse_lecture_title(token.content)
            if lecture is not None:
                current = _start_entry(lecture, token)
                entries.append(current)
            else:
                current = None  # a heading that is not a lecture ends the section
            continue
        if current is not None:
            for line_text, links in _inline_lines(token):
                _read_line(current, line_text, links)
    return entries


def _start_entry(lecture: LectureTitle, token: Token) -> LectureEntry:
    series_tag, title = split_series_tag(lecture.title)
    return LectureEntry(
        number=lecture.number,
        title=title, heading=token.content.strip(),
        line=(token.map[0] + 1) if token.map else 0, series_tag=series_tag)


def _read_line(entry: LectureEntry, text: str, links: list[tuple[str, str]]) -> None:
    first = entry.lines_read == 0
    entry.lines_read += 1
    if not entry.title:
        _read_title(entry, text, links, first)
    date = DATE_RE.search(text)
    if date and not entry.date:
        entry.date = date["date"]
    speaker = SPEAKER_RE.search(text)
    profiles: set[str] = set()
    if speaker:
        profiles = _read_speakers(entry, NEXT_LABEL_RE.split(speaker["names"])[0], links)
    for label, href in links:
        if label.strip() in profiles:
            continue  # a speaker's profile, kept on the speaker
        folder = FOLDER_RE.match(href)
        if folder:
            entry.folders.append(folder["folder"])
        entry.links.append(LinkRef(kind=classify_link(label, href, _part_label(text, label)), url=href,
                                   label=label.strip() or None))
    # Older READMEs name the folder in code spans: "Notebook and slides in `lecture1` folder".
    for name in re.findall(r"\blecture_?\d+\b", text):
        if name not in entry.folders and not any(name in href for _, href in links):
            entry.folders.append(name)


def _read_title(entry: LectureEntry, text: str, links: list[tuple[str, str]], first: bool) -> None:
    """Early READMEs put the title under a bare `## Lecture 3`: a `Title:` line,
    or the section's first line when it is plain text (not a labelled line,
    not only links)."""
    labelled = TITLE_LINE_RE.match(text)
    if labelled:
        title = labelled["title"]
    elif first and text.strip() and not LABEL_RE.match(text) and text.strip() != "".join(l for l, _ in links).strip():
        title = text.strip()
    else:
        return
    entry.series_tag, entry.title = split_series_tag(title.strip(" -*"))


def _part_label(text: str, label: str) -> str:
    """The label of the part of a line a link sits in: "Book" in "Speaker: X, Book: [PMPP](...)"."""
    before = text[: max(0, text.find(label))]
    parts = re.findall(r"([A-Za-z]+)(?:\s+\d+)?\s*:", before)
    return parts[-1] if parts else ""


def _read_speakers(entry: LectureEntry, names_text: str, links: list[tuple[str, str]]) -> set[str]:
    """Speakers of a "Speaker(s): ..." part; returns the link labels that were profiles.

    The line's text keeps link labels, so names come from the text and profile
    URLs from the links whose label is that name (or holds several names:
    "[Jake Hemstad & Georgii Evtushenko]()"). "Speaker: NVIDIA: A, B" gives
    A and B with the affiliation NVIDIA.
    """
    affiliation = None
    if ":" in names_text:
        affiliation, names_text = (part.strip() for part in names_text.split(":", 1))
    profile: dict[str, str | None] = {}
    labels: set[str] = set()
    for label, href in links:
        for name in split_names(label):
            if name and name in names_text:
                profile[name] = href or None
                labels.add(label.strip())
    for name in split_names(names_text):
        # URLs and whole sentences are never names.
        if "://" in name or len(name) > 60 or any(s.name == name for s in entry.speakers):
            continue
        entry.speakers.append(SpeakerRef(name=name, profile_url=profile.get(name), affiliation=affiliation))
    return labels


@dataclass
class RepoTree:
    """The repo's top folders, each with the files below it, and every path."""

    folders: dict[str, list[str]]
    truncated: bool = False
    paths: frozenset[str] = frozenset()
    trees: frozenset[str] = frozenset()


def parse_tree(data: Any) -> RepoTree:
    if not isinstance(data, dict) or not isinstance(data.get("tree"), list):
        raise ParseError("git tree: expected an object with a 'tree' list")
    folders: dict[str, list[str]] = {}
    paths, trees = set(), set()
    for node in data["tree"]:
        path = node.get("path", "")
        paths.add(path)
        if node.get("type") == "tree":
            trees.add(path)
        top, _, rest = path.partition("/")
        if node.get("type") == "tree" and not rest:
            folders.setdefault(top, [])
        elif rest and node.get("type") == "blob":
            folders.setdefault(top, []).append(rest)
    return RepoTree(folders=folders, truncated=bool(data.get("truncated")), paths=frozenset(paths),
                    trees=frozenset(trees))


def expected_folder(number: int) -> str:
    return f"lecture_{number:03d}"


def lecture_items(entries: list[LectureEntry], tree: RepoTree | None, repo: str = DEFAULT_REPO) -> ParseResult:
    """Turn README entries (checked against the tree) into talk items."""
    result = ParseResult()
    seen: dict[str, LectureEntry] = {}
    for entry in entries:
        key = entry.key
        if key in seen:
            result.problems.append(Problem(NAME, key, f"README line {entry.line}: lecture heading "
                                           f"repeated (first at line {seen[key].line}); kept the first"))
            continue
        seen[key] = entry
        item = TalkItem(
            source=NAME, key=key, title=entry.title, number=entry.number,
            url=f"https://github.com/{repo}#" + slugify(entry.heading), url_kind="readme",
            series=SERIES, date=entry.date, year=int(entry.date[:4]) if entry.date else None,
            speakers=entry.speakers, tags=[entry.series_tag] if entry.series_tag else [])
        links = list(entry.links)
        folder = _folder_for(entry, tree, item, result)
        if folder:
            links = [l for l in links if l.kind != "folder"]
            links.append(LinkRef("folder", f"https://github.com/{repo}/tree/main/{folder}", folder))
        links = [resolved for link in links
                 if (resolved := _resolve(link, repo, tree, entry, result)) is not None]
        if not entry.title:
            result.problems.append(Problem(NAME, key, f"README line {entry.line}: heading "
                                           f"'{entry.heading}' has no title", severity="warning"))
        item.links = links
        result.items.append(item)
    return result


def _folder_for(entry: LectureEntry, tree: RepoTree | None, item: TalkItem,
                result: ParseResult) -> str | None:
    """The lecture's folder in the tree; a mismatch is recorded, never hidden."""
    named = [f for f in dict.fromkeys(entry.folders)]
    if entry.number is None:
        folder = named[0] if named else None
    else:
        expected = expected_folder(entry.number)
        folder = expected if (tree and expected in tree.folders) or expected in named else None
        others = [f for f in named if f != expected and not _same_folder(f, entry.number)]
        if others:
            item.folder_mismatch = others
            result.problems.append(Problem(
                NAME, entry.key, f"README line {entry.line}: lecture {entry.number} links folder "
                                 f"{', '.join(others)}, not {expected}", severity="warning"))
    if folder is None:
        return None
    if tree is not None:
        if folder not in tree.folders:
            return None
        item.folder_files = sorted(tree.folders[folder])
    item.folder = folder
    return folder


def _same_folder(name: str, number: int) -> bool:
    """`lecture1` (old naming) is lecture 1's folder, like `lecture_001`."""
    digits = re.sub(r"\D", "", name)
    return bool(digits) and int(digits) == number


def _resolve(link: LinkRef, repo: str, tree: RepoTree | None, entry: LectureEntry,
             result: ParseResult) -> LinkRef | None:
    """An absolute URL for a README link; None, and a problem, for a placeholder
    (`[Slides](test)`, `[Slides]()`) or a relative target the tree does not hold."""
    url = link.url.strip()
    if "://" in url or url.startswith(("mailto:", "#")):
        return link
    path = url.removeprefix("./").split("#")[0].split("?")[0].strip("/")
    missing = PLACEHOLDER_RE.match(url) or (tree is not None and not tree.truncated and path not in tree.paths)
    if missing:
        result.problems.append(Problem(NAME, entry.key, f"README line {entry.line}: link "
                                       f"[{link.label or ''}]({url}) points at nothing; not kept", "warning"))
        return None
    kind = "tree" if tree is not None and path in tree.trees else "blob"
    return LinkRef(link.kind, f"https://github.com/{repo}/{kind}/main/{path}", link.label)


# ---- fetch -----------------------------------------------------------------

def readme_url(repo: str, api: str = API) -> str:
    return f"{api.rstrip('/')}/repos/{repo}/readme"


def tree_url(repo: str, api: str = API) -> str:
    return f"{api.rstrip('/')}/repos/{repo}/git/trees/HEAD?recursive=1"


def fetch(fetcher: Fetcher, config: dict[str, Any]) -> FetchResult:
    """The README (raw media type) and the recursive tree; GITHUB_TOKEN if set."""
    repo = config.get("repo", DEFAULT_REPO)
    headers = {"X-GitHub-Api-Version": "2022-11-28"}
    if token := os.environ.get("GITHUB_TOKEN"):
        headers["Authorization"] = f"Bearer {token}"
    api = config.get("api", API)
    readme = fetcher.request(NAME, "GET", readme_url(repo, api),
                             headers={**headers, "Accept": "application/vnd.github.raw"})
    tree = fetcher.request(NAME, "GET", tree_url(repo, api),
                           headers={**headers, "Accept": "application/vnd.github+json"})
    return FetchResult(documents=[readme, tree])


def parse(documents: list[RawDocument], config: dict[str, Any]) -> ParseResult:
    repo = config.get("repo", DEFAULT_REPO)
    # Found by path, not by host: archived documents outlive a changed `api`.
    readme = next((d for d in documents if d.url.endswith(f"/repos/{repo}/readme")), None)
    tree_doc = next((d for d in documents if f"/repos/{repo}/git/trees/" in d.url), None)
    if readme is None:
        raise ParseError(f"no README document for {repo}")
    text = readme.text()
    if readme.content_type.startswith("application/json"):
        # The default media type wraps the README in JSON (base64 content).
        text = _decode_contents(readme)
    entries = parse_readme(text)
    if not entries:
        raise ParseError(f"{readme.url}: no 'Lecture N' headings found (did the README's layout change?)")
    tree = parse_tree(tree_doc.json()) if tree_doc is not None else None
    result = lecture_items(entries, tree, repo)
    if tree is not None and tree.truncated:
        result.problems.append(Problem(NAME, None, "git tree is truncated; folder checks are partial",
                                       severity="warning"))
    return result


def configured_documents(documents: list[RawDocument], config: dict[str, Any]) -> list[RawDocument]:
    """The documents the config still asks for: those of the configured repo."""
    repo = config.get("repo", DEFAULT_REPO)
    return [d for d in documents if f"/repos/{repo}/" in d.url]


def _decode_contents(document: RawDocument) -> str:
    data = document.json()
    try:
        return base64.b64decode(data["content"]).decode("utf-8")
    except (KeyError, TypeError, ValueError) as exc:
        raise ParseError(f"{document.url}: README JSON without base64 content ({exc})") from exc
