"""NVIDIA GTC, one source made of two: On-Demand sessions (`ondemand.py`)
and the RainFocus conference catalogs (`catalog.py`), configured under [gtc]."""

from __future__ import annotations

from typing import Any

from . import catalog, ondemand
from .catalog import CATALOG_FORM
from .http import Fetcher
from .ondemand import NAME, due_today, normalise_event, normalise_slug, parse_page
from .records import FetchResult, ParseResult, RawDocument

__all__ = ["NAME", "CATALOG_FORM", "due_today", "normalise_event", "normalise_slug", "parse_page", "fetch",
           "parse"]


def fetch(fetcher: Fetcher, config: dict[str, Any]) -> FetchResult:
    result = FetchResult()
    result.documents.extend(ondemand.fetch_sessions(fetcher, config, result.problems))
    headers = ondemand.request_headers(config)
    for spec in config.get("catalogs", []):
        result.documents.extend(catalog.fetch_catalog(fetcher, spec, headers, result.problems,
                                                      config.get("catalog_api", catalog.CATALOG)))
    return result


def parse(documents: list[RawDocument], config: dict[str, Any]) -> ParseResult:
    result = ParseResult()
    result.items.extend(ondemand.parse_sessions(documents, result.problems))
    result.items.extend(catalog.parse_catalogs(documents, config, result.problems))
    return result
