"""Nothing goes away on one bad night.

A source's good run records what it read: its documents, the config it read
them with, the keys of the items they gave, and the items it *carries*: items
an earlier run listed that this one did not. A carried item stays in the
index (with its links, its video, its duration) until it has been missing for
`gone_after` consecutive successful runs; only then is it dropped, and its
talk, if no other source lists it, marked gone (never deleted). A truncated
README, a listing entry turned "[Private video]" or a shrunken catalog page
therefore changes nothing on the first night.

A failed source is rebuilt from its last good run with the config of that run,
so a config edit that no longer matches the archive changes nothing either.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

import sqlite_utils

from gputalks.scraper.records import ParseResult
from gputalks.index.raw_documents import load_documents



@dataclass
class Generation:
    """Items carried from one earlier run: its documents, its config, and how
    many consecutive successful runs each item has been missing."""

    document_ids: list[int]
    config: dict[str, Any]
    absent: dict[str, int]


@dataclass
class SourceState:
    """What a good source run read, and what it carries."""

    document_ids: list[int]
    config: dict[str, Any] | None
    item_keys: list[str]
    carried: list[Generation] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "SourceState":
        carried = [Generation(**g) for g in json.loads(row.get("carried") or "[]")]
        config = json.loads(row["config"]) if row.get("config") else None
        return cls(json.loads(row["document_ids"] or "[]"), config, json.loads(row.get("item_keys") or "[]"),
                   carried)

    def columns(self) -> dict[str, str]:
        """The source_runs columns that hold this state."""
        return {"document_ids": json.dumps(self.document_ids), "config": json.dumps(self.config, sort_keys=True),
                "item_keys": json.dumps(self.item_keys),
                "carried": json.dumps([asdict(g) for g in self.carried], sort_keys=True)}


def next_carry(last: SourceState | None, listed: set[str], gone_after: int) -> list[Generation]:
    """The generations to carry after a successful run that listed `listed`."""
    if last is None:
        return []
    carry = []
    missing = {key: 1 for key in last.item_keys if key not in listed}
    if missing:
        carry.append(Generation(last.document_ids, last.config or {}, missing))
    for generation in last.carried:
        absent = {key: runs + 1 for key, runs in generation.absent.items() if key not in listed}
        if absent:
            carry.append(Generation(generation.document_ids, generation.config, absent))
    for generation in carry:
        generation.absent = {key: runs for key, runs in generation.absent.items() if runs < gone_after}
    return [g for g in carry if g.absent]


def carried_items(db: sqlite_utils.Database, module: ModuleType, carry: list[Generation],
                  config: dict[str, Any]) -> ParseResult:
    """The carried items, parsed again from the documents that last listed them;
    only from documents the current `config` still asks for, so removing a
    playlist or a session from the config removes its talks at once."""
    result = ParseResult()
    seen: set[str] = set()
    for generation in carry:
        documents = module.configured_documents(load_documents(db, generation.document_ids), config)
        parsed = module.parse(documents, generation.config)
        for item in parsed.items:
            if item.key in generation.absent and item.key not in seen:
                seen.add(item.key)
                result.items.append(item)
    return result


def restrict(carry: list[Generation], found: set[str]) -> list[Generation]:
    """The generations with only the keys still found (the config may have dropped the rest)."""
    kept = [Generation(g.document_ids, g.config, {k: n for k, n in g.absent.items() if k in found})
            for g in carry]
    return [g for g in kept if g.absent]


def parse_state(db: sqlite_utils.Database, module: ModuleType, state: SourceState,
                config: dict[str, Any]) -> ParseResult:
    """A good run's items again: its documents with its own config, plus what it carried."""
    parsed = module.parse(load_documents(db, state.document_ids), state.config or config)
    parsed.items.extend(carried_items(db, module, state.carried, config).items)
    return parsed
