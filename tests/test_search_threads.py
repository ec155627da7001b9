"""The search's words from many threads at once, as Datasette's query threads call them: each
worker prepares its connections and runs `gputalks_search` on a pool of threads. Snowball's
stemmers keep their state in the object, so one shared stemmer broke under a burst of requests
on a busy machine ("string index out of range", a 500 on the first search of a worker)."""

from __future__ import annotations

import threading

from gputalks.search import vocabulary
from gputalks.search.words import tokens
from tests.conftest import SHARED, in_threads


def test_stemming_from_many_threads_gives_the_words_one_thread_gives():
    # real French and English words: the docs page, beyond what any cache has seen
    words = sorted(set(tokens((SHARED / "docs" / "videos.fr.md").read_text(encoding="utf-8"))))
    assert len(words) > 300
    stems = [vocabulary.french_stem, vocabulary.indexed_form]
    expected = {stem.__name__: [stem.__wrapped__(word) for word in words] for stem in stems}
    failures: list[BaseException] = []
    results: dict[tuple[int, str], list[str]] = {}
    start = threading.Barrier(8)

    def work(number: int) -> None:
        start.wait()
        try:
            for stem in stems:  # each thread its own order, so they stem different words at once
                mine = words[number::2] + words[:number:2]
                results[number, stem.__name__] = [stem.__wrapped__(word) for word in mine]
        except BaseException as exc:  # noqa: BLE001 (reported below, as the test's failure)
            failures.append(exc)

    in_threads(work)
    assert failures == []
    for (number, name), found in results.items():
        mine = words[number::2] + words[:number:2]
        assert found == [expected[name][words.index(w)] for w in mine], name


def test_a_files_vocabulary_is_read_once_by_threads_preparing_connections_at_once(snapshot_db_path):
    """A worker's first requests come together, each on a thread preparing its own connection:
    one of them reads the file's vocabulary and the others get that one, instead of each reading
    it (0.55 s at 100,000 talks, all of them at once on a busy worker)."""
    import sqlite3

    from gputalks.search.functions import vocabulary_for

    key = ("a file read by 8 threads at once", str(snapshot_db_path))
    start = threading.Barrier(8)
    found: list[object] = []

    def prepare(_: int) -> None:
        conn = sqlite3.connect(f"file:{snapshot_db_path}?mode=ro", uri=True, check_same_thread=False)
        try:
            start.wait()
            found.append(vocabulary_for(conn, key))
        finally:
            conn.close()

    in_threads(prepare)
    assert len(found) == 8 and all(vocabulary is found[0] for vocabulary in found)
    assert found[0].words and found[0].terms


def test_a_worker_reads_its_files_vocabulary_when_it_starts(tmp_path, snapshot_db_path):
    """Datasette's startup hook reads each served file's vocabulary, before the worker serves: a
    reader's first search no longer waits for it (0.55 s at 100,000 talks)."""
    import asyncio
    import os
    import shutil

    from gputalks.search.functions import _VOCABULARIES
    from gputalks.site.serve import served_datasette

    served = tmp_path / "talks.db"  # a file of its own: no other test has read its vocabulary
    shutil.copy(snapshot_db_path, served)
    stat = os.stat(served)
    key = (str(served), stat.st_size, stat.st_mtime_ns)
    ds = served_datasette(served)
    assert key not in _VOCABULARIES
    asyncio.run(ds.invoke_startup())
    assert key in _VOCABULARIES and _VOCABULARIES[key].words
