"""Folders a command writes (`publish pages --out`, `publish --generate-dir`): made new beside
their place and swapped in whole, and only over a folder gputalks made itself. A user's
project, docs or git work tree is never the thing replaced: such an `--out` is refused before
any work is done.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The file that says "gputalks wrote this folder and may replace it whole".
MARKER = ".gputalks-output"


class OutputRefused(ValueError):
    """An output folder gputalks will not replace; the message is one line and says what to do."""


def check_output_dir(out: Path, project_root: Path | None = None) -> Path:
    """`out` as an absolute path, when replacing it whole destroys nothing but an earlier output."""
    target = Path(os.path.abspath(out))
    guarded = [("the current folder", Path.cwd())]
    if project_root is not None:
        guarded.append(("the project's folder", Path(os.path.abspath(project_root))))
    for what, path in guarded:
        if target == path or target in path.parents:
            raise OutputRefused(f"{out}: is {what} or holds it; name a new folder for the output "
                                f"(e.g. {Path(out) / 'site'})")
    if not target.exists():
        return target
    if not target.is_dir():
        raise OutputRefused(f"{out}: is a file, not a folder; name a new folder for the output")
    if (target / ".git").exists():
        raise OutputRefused(f"{out}: is the root of a git work tree; name a new folder for the output")
    if any(target.iterdir()) and not (target / MARKER).is_file():
        raise OutputRefused(f"{out}: is not empty and was not written by gputalks; name a new or empty folder "
                            "(gputalks replaces only folders it wrote itself)")
    return target


@contextmanager
def replacing_dir(out: Path, project_root: Path | None = None) -> Iterator[Path]:
    """A new folder beside `out` to write into; on success it becomes `out` (an earlier output
    there is moved aside, then removed), on failure it is removed and `out` is untouched."""
    target = check_output_dir(out, project_root)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    try:
        yield work
        (work / MARKER).write_text("Written by gputalks: its next run replaces this folder whole.\n",
                                   encoding="utf-8")
        check_output_dir(out, project_root)  # still ours: nothing was put there meanwhile
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            target.replace(old / target.name)
            work.replace(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            work.replace(target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
