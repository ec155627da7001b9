"""The search judged as a search team would: the reader queries of bench/judged_queries.toml on the
shipped snapshot's index, through /search.json as readers' programs call it, scored per category
(P@5, R@10, MRR; "nothing here": the share with at most 2 confident results), for all the
queries, the tuned two thirds (the tests hold them) and the held-out third (scored only here).

    .venv/bin/python -m bench.search_quality
"""

from __future__ import annotations

import asyncio
import statistics
import tomllib
from dataclasses import dataclass
from pathlib import Path

JUDGED = Path(__file__).with_name("judged_queries.toml")
CONFIDENT_TIERS = (0, 1, 2, 3)  # all the words, all but one, or a topic or concept they name
NOTHING_HERE = "nothing here"


@dataclass(frozen=True)
class Judged:
    q: str
    category: str
    relevant: frozenset[str]
    held_out: bool


def judged(held_out: bool | None = None) -> list[Judged]:
    """The judged queries (`held_out`: only those, or only the others; None: all)."""
    found = [Judged(entry["q"], entry["category"], frozenset(entry["relevant"]), entry.get("held_out", False))
             for entry in tomllib.loads(JUDGED.read_text(encoding="utf-8"))["queries"]]
    return [j for j in found if held_out is None or j.held_out == held_out]


def query_scores(query: Judged, results: list[tuple[str, int]]) -> dict[str, float]:
    """P@5, R@10 and the reciprocal rank of one query's ranked (talk id, tier) results; for a
    topic nobody covers, 1 when at most 2 results are confident (and 0 else) in all three."""
    if not query.relevant:
        ok = float(sum(tier in CONFIDENT_TIERS for _, tier in results) <= 2)
        return {"p5": ok, "r10": ok, "mrr": ok}
    ids = [talk for talk, _ in results]
    rank = next((n for n, talk in enumerate(ids, 1) if talk in query.relevant), None)
    return {"p5": len(set(ids[:5]) & query.relevant) / min(5, len(query.relevant)),
            "r10": len(set(ids[:10]) & query.relevant) / min(10, len(query.relevant)),
            "mrr": 1 / rank if rank else 0.0}


def by_category(scores: list[tuple[Judged, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Mean P@5, R@10, MRR per category, and over every query ("all")."""
    groups: dict[str, list[dict[str, float]]] = {}
    for query, score in scores:
        groups.setdefault(query.category, []).append(score)
        groups.setdefault("all", []).append(score)
    return {name: {"queries": len(found), **{k: round(statistics.mean(s[k] for s in found), 3)
                                              for k in ("p5", "r10", "mrr")}}
            for name, found in groups.items()}


def served_results(ds, queries: list[Judged]) -> dict[str, list[tuple[str, int]]]:
    async def ranked(query: str) -> list[tuple[str, int]]:
        response = await ds.client.get("/search.json", params={"q": query})
        return [(result["id"], result["tier"]) for result in response.json()["results"]]

    return {query.q: asyncio.run(ranked(query.q)) for query in queries}


def quality(ds, held_out: bool | None = None) -> dict[str, dict[str, float]]:
    queries = judged(held_out)
    results = served_results(ds, queries)
    return by_category([(query, query_scores(query, results[query.q])) for query in queries])


def main() -> None:
    import tempfile

    from gputalks.index.pipeline import RefreshOptions, refresh
    from gputalks.project.settings import default_settings
    from gputalks.site.serve import served_datasette

    with tempfile.TemporaryDirectory() as work:
        db_path = Path(work) / "talks.db"
        refresh(db_path, default_settings(), RefreshOptions(snapshot=Path(__file__).parents[2] / "shared" / "data" / "snapshot"))
        ds = served_datasette(db_path)
        for name, held_out in (("all", None), ("tuned (in the tests)", False), ("held out", True)):
            print(f"\n{name}:\n{'category':<16} {'queries':>7} {'P@5':>6} {'R@10':>6} {'MRR':>6}")
            for category, score in sorted(quality(ds, held_out).items()):
                print(f"{category:<16} {score['queries']:>7} {score['p5']:>6} {score['r10']:>6} {score['mrr']:>6}")


if __name__ == "__main__":
    main()
