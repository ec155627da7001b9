"""NVIDIA GTC, one source made of two: On-Demand sessions (`ondemand.py`)
and the RainFocus conference catalogs (`catalog.py`), configured under [gtc]."""

from __future__ import annotations

from typing import Any

from gputalks.scraper import catalog, ondemand
from gputalks.scraper.catalog import CATALOG_FORM
from gputalks.scraper.http import Fetcher
from gputalks.scraper.ondemand import NAME, due_today, normalise_event, normalise_slug, parse_page
from gputalks.scraper.records import FetchResult, ParseResult, RawDocument

__all__ = ["NAME", "CATALOG_FORM", "due_today", "normalise_event", "normalise_slug", "parse_page", "fetch",
           "parse"]


def fetch(fetcher: Fetcher, config: dict[str, Any]) -> FetchResult:
    """The catalogs first (their recorded sessions may name On-Demand sessions to fetch), then the sessions."""
    result = FetchResult()
    headers = ondemand.request_headers(config)
    catalog_documents = []
    for spec in config.get("catalogs", []):
        catalog_documents.extend(catalog.fetch_catalog(fetcher, spec, headers, result,
                                                       config.get("catalog_api", catalog.CATALOG)))
    discovered = catalog.recorded_slugs(catalog_documents, config)
    result.documents.extend(ondemand.fetch_sessions(fetcher, config, result, discovered))
    result.documents.extend(catalog_documents)
    return result


def configured_documents(documents: list[RawDocument], config: dict[str, Any]) -> list[RawDocument]:
    """The documents the config still asks for: configured sessions and those its catalogs'
    recordings name, and the catalog pages while any catalog is configured."""
    slugs = set(catalog.recorded_slugs(documents, config))
    for raw in config.get("sessions", []):
        try:
            slugs.add(normalise_slug(raw))
        except ValueError:
            continue
    kept = []
    for doc in documents:
        kind, slug = ondemand.document_kind(doc)
        if (kind == "catalog" and config.get("catalogs")) or (slug is not None and slug in slugs):
            kept.append(doc)
    return kept


def parse(documents: list[RawDocument], config: dict[str, Any]) -> ParseResult:
    result = ParseResult()
    result.items.extend(ondemand.parse_sessions(documents, result.problems))
    result.items.extend(catalog.parse_catalogs(documents, config, result.problems))
    return result
