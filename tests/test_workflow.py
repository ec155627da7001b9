"""The nightly workflow keeps its state where GitHub does not evict it, and a
missing state is a loud failure, not a silent fresh start. Its shell steps run
here with a stand-in `gh` (no network)."""

from __future__ import annotations

import os
import subprocess
import tarfile

import yaml

from gputalks.index.resources import NIGHTLY_WORKFLOW

from .conftest import REPO

STUB_GH = """#!/bin/sh
# A stand-in for the GitHub CLI: a release whose assets are the files in $RELEASE_DIR.
case "$1 $2" in
  "release view")
    [ -d "$RELEASE_DIR" ] || exit 1
    if [ "$4" = "--json" ]; then ls "$RELEASE_DIR" | grep '^state-' | sort | tail -1; fi ;;
  "release download") cp "$RELEASE_DIR/$5" . ;;
  *) echo "unexpected gh $*" >&2; exit 9 ;;
esac
"""


def steps() -> dict[str, dict]:
    workflow = yaml.safe_load(NIGHTLY_WORKFLOW.read_text())
    return {step.get("name", ""): step for step in workflow["jobs"]["refresh"]["steps"]}


def restore(tmp_path, first_run: str = "false", release: bool = False) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(STUB_GH)
    (bin_dir / "gh").chmod(0o755)
    script = steps()["Restore the index and its archive"]["run"].replace("${{ inputs.first_run }}", first_run)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE_TAG": "gputalks-state",
           "RELEASE_DIR": str(tmp_path / ("release" if release else "none"))}
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True)


def test_no_saved_state_fails_loudly_unless_a_first_run_is_asked_for(tmp_path):
    missing = restore(tmp_path)
    assert missing.returncode == 2
    assert "::error::no saved index in release gputalks-state" in missing.stdout
    first = restore(tmp_path, first_run="true")
    assert first.returncode == 0 and "::warning::first run" in first.stdout


def test_the_newest_saved_state_is_restored(tmp_path):
    release = tmp_path / "release"
    release.mkdir()
    for stamp, text in (("20261201T041700Z", "old"), ("20261202T041700Z", "new")):
        (tmp_path / "talks.db").write_text(text)
        (tmp_path / "talks.archive.db").write_text(text)
        with tarfile.open(release / f"state-{stamp}.tar.gz", "w:gz") as archive:
            for name in ("talks.db", "talks.archive.db"):
                archive.add(tmp_path / name, arcname=name)
    done = restore(tmp_path, release=True)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work" / "talks.db").read_text() == "new"
    assert (tmp_path / "work" / "talks.archive.db").read_text() == "new"


def test_the_state_is_saved_to_a_release_and_the_repo_copy_matches_the_starter():
    save = steps()["Save the index and its archive"]["run"]
    assert "gh release upload" in save and "talks.archive.db" in save
    assert "actions/cache" not in NIGHTLY_WORKFLOW.read_text()
    ours = (REPO / ".github" / "workflows" / "nightly.yml").read_text()
    assert ours == NIGHTLY_WORKFLOW.read_text().replace(".venv/bin/pip install gputalks", ".venv/bin/pip install -e .")
