"""The sources gputalks follows, one entry each: its name (the config section, the prefix of its
items' keys), the module that fetches and parses it (`fetch`, `parse`, loaded when a build
needs it) and how a reader names it. A new source is its module and a line here; the rules
that link one source's items to another's are in gputalks.index.link."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Source:
    name: str
    module: str
    label: str  # as a talk page says where a fact came from

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


SOURCES = {source.name: source for source in (
    Source("github", "gputalks.scraper.github", "the gpu-mode/lectures README"),
    Source("youtube", "gputalks.scraper.youtube", "YouTube"),
    Source("gtc", "gputalks.scraper.gtc", "NVIDIA GTC"),
)}
