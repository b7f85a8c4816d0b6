"""The query core: permission-trimmed retrieval and grounded answers. Its library API is
:class:`QueryCore` (docs/API.md, "Using the query core from Python")."""

from ancre.query.core import QueryCore, QueryParts, SearchHit, SearchResult

__all__ = ["QueryCore", "QueryParts", "SearchHit", "SearchResult"]
