"""What a maintainer decides by hand (a project's overrides.toml): link decisions, which win over
the matcher, and facts of talks (`[[facts]]`: speakers, date, description, event, series, topics,
length), which win over every source and say so ("set by hand")."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from gputalks.project.validation import ConfigError, OverridesFile, validated


@dataclass
class Overrides:
    """Manual decisions: `same` pairs are linked, `never` pairs are kept apart.

    Items are written `source:key` (`youtube:BgGe_erJB1A`), talks by talk id.
    """

    same: dict[str, str] = field(default_factory=dict)  # item -> talk id
    never: set[tuple[str, str]] = field(default_factory=set)  # (talk id, item)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # talk id -> field -> value (and "source")
    path: Path | None = None

    @classmethod
    def load(cls, path: str | Path | None) -> "Overrides":
        if path is None or not Path(path).exists():
            return cls()
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"{Path(path).name}: not valid TOML ({exc})"]) from exc
        checked = validated(OverridesFile, data, path)
        same = {d["item"]: d["talk"] for d in checked.get("same", [])}
        never = {(d["talk"], d["item"]) for d in checked.get("never", [])}
        both = sorted((talk, item) for item, talk in same.items() if (talk, item) in never)
        if both:
            raise ConfigError([f"{Path(path).name}: talk {talk!r} and item {item!r} are both [[same]] and [[never]]; "
                               "keep the one you mean" for talk, item in both])
        facts = {f["talk"]: {k: v for k, v in f.items() if k != "talk"} for f in checked.get("facts", [])}
        return cls(same=same, never=never, facts=facts, path=Path(path))

    def unknown_ids(self, db: sqlite_utils.Database) -> tuple[list[str], list[str]]:
        """Decisions naming a talk the index never held (a typo: talks are never deleted, only
        marked gone), and decisions naming an item no source lists now (a typo, or a video made
        private, a session withdrawn: any night may bring that, so it never stops a run)."""
        if not db.table("talk_sources").exists() or not db.table("talk_sources").count:
            return [], []  # a first run: nothing to check against yet
        talks = {row[0] for row in db.execute("select id from talks")}
        items = {f"{s}:{k}" for s, k in db.execute("select source, item_key from talk_sources")}
        where = self.path.name if self.path else "overrides"
        typos = [f"{where}: [[facts]] talk {talk!r}: no such talk in the index" for talk in self.facts if talk not in talks]
        gone = {row[0] for row in db.execute("select id from talks where gone_since is not null")}
        vanished = [f"{where}: [[facts]] talk {talk!r}: no source lists it any more; the entry can go"
                    for talk in self.facts if talk in gone]
        for kind, pairs in (("same", [(t, i) for i, t in self.same.items()]), ("never", sorted(self.never))):
            for talk, item in pairs:
                if talk not in talks:
                    typos.append(f"{where}: [[{kind}]] talk {talk!r}: no such talk in the index")
                if item not in items:
                    vanished.append(f"{where}: [[{kind}]] item {item!r}: no source lists such an item now "
                                    "(gone from its source, or a typo); the decision waits for it")
        return typos, vanished
