"""What a build wrote, counted: the run's report and `gputalks status` read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class WriteStats:
    talks_written: int = 0
    changes: int = 0
    new: int = 0
    gone: int = 0
    transcripts_changed: bool = False  # segments written or deleted: the talk-level index is stale
    kept_values: int = 0  # known values a fresher answer left empty, kept (never know less)
