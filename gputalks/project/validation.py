"""The shape of every file a user edits (the sources config, overrides.toml, the
curation files), declared once as pydantic models and checked before anything
runs. A mistake is one line naming the file, the key and what was expected.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationError,
                      field_validator, model_validator)

from gputalks.scraper.sources import SOURCES


def matching(regex: str, expected: str) -> Any:
    """A string type that must match `regex`; the error says what was `expected`."""
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"expected {expected}")
        return value

    return Annotated[str, AfterValidator(check)]


Url = matching(r"https?://\S+", "an http(s) URL")
Name = Annotated[str, StringConstraints(min_length=1)]
Seconds = Annotated[float, Field(gt=0)]
FullInfo = Literal["new", "always", "never"]
Text = str | dict[str, str]  # one text, or one per language


class ConfigError(ValueError):
    """Configuration mistakes, one line each."""

    def __init__(self, lines: list[str]):
        super().__init__("\n".join(lines))
        self.lines = lines


class Section(BaseModel):
    """Unknown keys are mistakes (a typo would otherwise be silently ignored); no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True)


class GithubConfig(Section):
    repo: matching(r"[\w.-]+/[\w.-]+", "'owner/name', e.g. 'gpu-mode/lectures'") = "gpu-mode/lectures"
    api: Url = "https://api.github.com"

    @field_validator("repo")
    @classmethod
    def _case_free(cls, repo: str) -> str:
        return repo.lower()  # GitHub names ignore case: "GPU-MODE/lectures" is the same repository


class Captions(Section):
    enabled: bool = True
    languages: list[Name] = ["en"]


class Follow(Section):
    url: Url
    kind: Literal["channel", "playlist", "video"] = "playlist"
    series: str | None = None
    full_info: FullInfo | None = None


class YtDlpOptions(Section):
    """What [youtube.ytdlp] may pass on to yt-dlp (its Python API names)."""

    cookiefile: str | None = None
    proxy: str | None = None
    source_address: str | None = None
    sleep_interval_requests: Annotated[float, Field(ge=0)] | None = None
    sleep_interval: Annotated[float, Field(ge=0)] | None = None
    max_sleep_interval: Annotated[float, Field(ge=0)] | None = None
    extractor_args: dict[str, Any] | None = None
    http_headers: dict[str, str] | None = None
    socket_timeout: Seconds | None = None
    retries: Annotated[int, Field(ge=0)] | None = None


class YoutubeConfig(Section):
    full_info: FullInfo = "new"
    captions: Captions = Captions()
    follow: list[Follow] = []
    ytdlp: YtDlpOptions = YtDlpOptions()


class Catalog(Section):
    event: Name
    rfapiprofileid: str
    rfwidgetid: str
    max_pages: Annotated[int, Field(ge=1)] = 50
    delay: Annotated[float, Field(ge=0)] = 1.0
    event_code: matching(r"gtc[a-z]*\d{2,4}", "an event code such as 'gtc25'") | None = None
    topics: list[Name] = []  # parts of the catalog's "Topic" ("Area - Subarea"); any of them
    levels: list[Name] = []  # parts of its "Technical Level"; any of them
    types: list[Name] = []  # its "Session Type" values; any of them
    keywords: list[Name] = []  # terms of the title, or of the abstract `mentions` times; any of them
    mentions: Annotated[int, Field(ge=1)] = 1  # how often the abstract names them when the title does not
    ignore: list[Name] = []  # phrases that only look like a keyword ("Triton Inference Server")
    recordings: bool = False  # also fetch the On-Demand session each recorded session's code names


class GtcConfig(Section):
    sessions: list[matching(r"[A-Za-z0-9]+-[A-Za-z0-9]+", "an On-Demand session slug such as 'gtc24-s62400'")] = []
    recheck_days: Annotated[int, Field(ge=1)] = 1
    headers: dict[str, str] = {}
    catalogs: list[Catalog] = []
    api: Url | None = None
    page: matching(r"https?://\S*\{slug\}\S*", "an http(s) URL template with {slug}") | None = None
    catalog_api: Url | None = None
    catalog_session_url: str | None = None


class RefreshConfig(Section):
    gone_after_runs: Annotated[int, Field(ge=1)] = 3
    request_timeout: Seconds = 20.0  # seconds without an answer before a request is retried
    retries: Annotated[int, Field(ge=0)] = 3
    backoff: Annotated[float, Field(ge=0)] = 1.0  # seconds before the first retry, doubling
    source_deadline: Seconds = 110.0  # seconds one source may take (a hung host fails it, the run goes on)
    run_deadline: Seconds = 600.0  # seconds the whole run may take


class SourcesConfig(Section):
    github: GithubConfig | None = None
    youtube: YoutubeConfig | None = None
    gtc: GtcConfig | None = None
    refresh: RefreshConfig = RefreshConfig()

    @model_validator(mode="after")
    def _some_source(self) -> "SourcesConfig":
        if not (self.github or self.youtube or self.gtc):
            *others, last = [f"[{name}]" for name in SOURCES]
            raise ValueError(f"configures no source: expected {', '.join(others)} or {last}")
        return self


class Decision(Section):
    talk: Name
    item: matching(rf"({'|'.join(SOURCES)}):\S+", "'source:key', e.g. 'youtube:zEuwuCTEf_0'")
    why: str | None = None


class Fact(Section):
    """What a maintainer sets by hand on one talk: every field given wins over the sources."""

    talk: Name
    source: Name  # where a reader can check it (a page, a video's description, a programme)
    speakers: list[Name] | None = None
    date: matching(r"\d{4}(-\d{2}(-\d{2})?)?", "a date: 2024, 2024-05 or 2024-05-01") | None = None
    description: Name | None = None
    event: Name | None = None
    series: Name | None = None
    topics: list[Name] | None = None
    length: matching(r"\s*(\d+\s*h(\s*\d+(\s*min)?)?|\d+\s*min)\s*", "a length: '12 h', '1 h 05', '45 min'") | None = None


class OverridesFile(Section):
    same: list[Decision] = []
    never: list[Decision] = []
    facts: list[Fact] = []


class ColumnSpec(Section):
    key: Name
    header: dict[str, str] | None = None


class TableSpec(Section):
    id: Name
    title: Text | None = None
    kind: Literal["table", "path"] = "table"
    columns: Annotated[list[ColumnSpec], Field(min_length=1)]
    rows: list[dict[str, Text | None]] = []

    @model_validator(mode="after")
    def _known_columns(self) -> "TableSpec":
        cells = {key for row in self.rows for key in row}
        unknown = [c.key for c in self.columns if c.key not in INDEX_COLUMNS and c.key not in cells]
        if unknown:
            raise ValueError(f"column {', '.join(unknown)} is neither an index column "
                             f"({', '.join(sorted(INDEX_COLUMNS))}) nor a cell of any row")
        return self


class CurationFile(Section):
    lang: Literal["fr", "en"] = "en"
    tables: list[TableSpec] = []


class TopicSpec(Section):
    name: Name
    aliases: Annotated[list[Name], Field(min_length=1)]


class ConceptSpec(Section):
    """What a reader types for one concept, and the terms the talks use for it."""

    name: Name
    terms: Annotated[list[Name], Field(min_length=1)]
    topics: list[Name] = []  # the topics (topics.toml names) whose talks it also finds
    phrases: list[Name] = []
    phrases_fr: list[Name] = []


class SearchSpec(Section):
    ignore: list[Name] = []
    keep: list[Name] = []  # words of the stop lists that name things here ("course", "ring")
    # Ways of writing one thing ("rl", "reinforcement learning", "apprentissage par renforcement"):
    # a query holding one finds the talks holding any other, as the reader's own words.
    same: list[Annotated[list[Name], Field(min_length=2)]] = []
    # Concepts and topics a sixth of the talks or more are about ("writing a kernel"): named beside
    # a word that tells talks apart ("write kernels for intel gpus"), they narrow nothing.
    broad: list[Name] = []


class TopicsFile(Section):
    transcript_mentions: Annotated[int, Field(ge=1)] = 3
    topics: Annotated[list[TopicSpec], Field(min_length=1)]
    search: SearchSpec = SearchSpec()
    concepts: list[ConceptSpec] = []

    @model_validator(mode="after")
    def _broad_names_something(self) -> "TopicsFile":
        names = {t.name for t in self.topics} | {c.name for c in self.concepts}
        if unknown := [name for name in self.search.broad if name not in names]:
            raise ValueError(f"search.broad: {', '.join(unknown)} is neither a topic nor a concept")
        return self


# What `export` can fill in from the index; any other column is the curator's cells.
INDEX_COLUMNS = frozenset({"number", "title", "speakers", "series", "event", "year", "date", "duration"})


def validated(model: type[Section], data: dict[str, Any], path: str | Path) -> dict[str, Any]:
    """`data` checked against `model`, normalised, with only the keys it set; a
    ConfigError listing every mistake otherwise."""
    try:
        return model.model_validate(data).model_dump(exclude_unset=True, exclude_none=True)
    except ValidationError as exc:
        raise ConfigError([_line(path, error) for error in exc.errors()]) from None


def _where(loc: tuple[str | int, ...]) -> str:
    """A pydantic location as the TOML reads: `[youtube.ytdlp] cookies`,
    `[[youtube.follow]] #2 url`, `[gtc] sessions #1`."""
    entries = [n for n, part in enumerate(loc) if isinstance(part, int)]
    if entries and entries[-1] == len(loc) - 1:
        *table, key = loc[:-1]
        return f"[{'.'.join(map(str, table))}] {key} #{loc[-1] + 1}" if table else f"{key} #{loc[-1] + 1}"
    if entries:
        n = entries[-1]
        rest = " ".join(map(str, loc[n + 1:]))
        return f"[[{'.'.join(map(str, loc[:n]))}]] #{loc[n] + 1}" + (f" {rest}" if rest else "")
    if len(loc) > 1:
        return f"[{'.'.join(map(str, loc[:-1]))}] {loc[-1]}"
    return str(loc[0]) if loc else ""


def _line(path: str | Path, error: Any) -> str:
    loc = tuple(error["loc"])
    if loc and isinstance(loc[-1], int) and isinstance(error.get("input"), dict):
        loc = (*loc, "")  # an entry of an array of tables: [[tables]] #1
    where = _where(loc).rstrip()
    got = error.get("input")
    shown = "" if error["type"] in ("missing", "model_type", "extra_forbidden") or isinstance(got, dict) \
        else f", got {got!r:.60}"
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key (a typo?)"
    return f"{Path(path).name}: {where or 'file'}: {message}{shown}"
