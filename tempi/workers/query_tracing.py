"""Temporal's TracingInterceptor without spans for queries, unless asked.

Every query a client sends becomes a root trace of its own (QueryWorkflow on the client, and
HandleQuery on the worker, which traces a query only when the client's span came with it).
A watcher follows a session by querying its events several times a second, so each turn
left dozens of one-span traces that drowned the session's own trace in a backend. Queries
only read, so they go untraced by default."""

from __future__ import annotations

from typing import Any

from temporalio.client import OutboundInterceptor, QueryWorkflowInput
from temporalio.contrib.opentelemetry import TracingInterceptor


class QuietQueriesTracingInterceptor(TracingInterceptor):
    def __init__(self, *, trace_queries: bool = False) -> None:
        super().__init__()
        self._trace_queries = trace_queries

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        traced = super().intercept_client(next)
        return traced if self._trace_queries else _UntracedQueries(traced, next)


class _UntracedQueries(OutboundInterceptor):
    """Every call through the tracing chain but queries, which skip it."""

    def __init__(self, traced: OutboundInterceptor, plain: OutboundInterceptor) -> None:
        super().__init__(traced)
        self._plain = plain

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        return await self._plain.query_workflow(input)
