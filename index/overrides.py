"""Manual link decisions (a project's overrides.toml): they win over the matcher."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Overrides:
    """Manual decisions: `same` pairs are linked, `never` pairs are kept apart.

    Items are written `source:key` (`youtube:BgGe_erJB1A`), talks by talk id.
    """

    same: dict[str, str] = field(default_factory=dict)  # item -> talk id
    never: set[tuple[str, str]] = field(default_factory=set)  # (talk id, item)

    @classmethod
    def load(cls, path: str | Path | None) -> "Overrides":
        if path is None or not Path(path).exists():
            return cls()
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{path}: not valid TOML ({exc})") from exc
        overrides = cls()
        for kind in ("same", "never"):
            for n, entry in enumerate(data.get(kind, []), 1):
                if not isinstance(entry, dict) or "talk" not in entry or "item" not in entry:
                    raise ValueError(f"{path}: [[{kind}]] entry {n} needs both 'talk' and 'item'")
                if ":" not in entry["item"]:
                    raise ValueError(f"{path}: [[{kind}]] entry {n}: item must be 'source:key', "
                                     f"got {entry['item']!r}")
                if kind == "same":
                    overrides.same[entry["item"]] = entry["talk"]
                else:
                    overrides.never.add((entry["talk"], entry["item"]))
        return overrides
