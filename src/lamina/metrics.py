"""Prometheus metrics: every metric family of lamina, in one registry per runtime.

Several runtimes in one process never collide: each owns a ``Metrics`` with its own
``CollectorRegistry``. The memory families exist from the start; the server families
(``a2a_*``) are added to the same registry the first time a server asks for them, so
``/metrics`` shows both and a runtime without a server shows only the memory families.
"""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

#: Latency histogram buckets, in seconds (memory operations and skill requests alike).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: What one thread cleanup run removes, as the label values of ``a2a_thread_cleanup_total``.
CLEANUP_KINDS = ("threads_expired", "states_removed", "threads_purged", "tasks_purged")


class CleanupTally(Protocol):
    """What one thread cleanup run removed (the threads port returns such a record)."""

    @property
    def threads_expired(self) -> int: ...
    @property
    def states_removed(self) -> int: ...
    @property
    def threads_purged(self) -> int: ...
    @property
    def tasks_purged(self) -> int: ...


class MemoryMetrics:
    """memory_operations_total{operation}, memory_operations_latency_seconds{operation},
    memory_search_results{layer}, memory_storage_size{layer},
    memory_operations_errors_total{code}, memory_expired_total."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.operations = Counter(
            "memory_operations",
            "Memory operations performed, by operation.",
            ["operation"],
            registry=registry,
        )
        self.latency = Histogram(
            "memory_operations_latency_seconds",
            "Latency of memory operations, by operation.",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.search_results = Histogram(
            "memory_search_results",
            "Results returned by one layer for one search, by layer.",
            ["layer"],
            buckets=(0, 1, 2, 5, 10, 20, 50, 100),
            registry=registry,
        )
        self.storage_size = Gauge(
            "memory_storage_size",
            "Memories stored, by layer (refreshed by searches, at most every 10 s).",
            ["layer"],
            registry=registry,
        )
        self.expired = Counter(
            "memory_expired",
            "Memories whose time to live ended, removed by the expiry job.",
            registry=registry,
        )
        self.errors = Counter(
            "memory_operations_errors",
            "Failed memory operations, by error code.",
            ["code"],
            registry=registry,
        )


class ServerMetrics:
    """a2a_requests_total{skill,tool,outcome}, a2a_request_latency_seconds{skill},
    a2a_errors_total{skill,code}, a2a_rate_limit_hits_total{tenant_id,skill_name},
    a2a_thread_cleanup_total{kind}, a2a_threads_active, a2a_http_requests_total{route,status}."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "a2a_requests",
            "Skill requests handled, by skill, tool and outcome (task state).",
            ["skill", "tool", "outcome"],
            registry=registry,
        )
        self.latency = Histogram(
            "a2a_request_latency_seconds",
            "Time to handle one skill request, by skill.",
            ["skill"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.errors = Counter(
            "a2a_errors",
            "Skill requests that ended in an error, by skill and error code.",
            ["skill", "code"],
            registry=registry,
        )
        self.rate_limited = Counter(
            "a2a_rate_limit_hits",
            "Requests refused with 429, by tenant and skill.",
            ["tenant_id", "skill_name"],
            registry=registry,
        )
        self.cleanup = Counter(
            "a2a_thread_cleanup",
            "What the thread cleanup job removed: threads_expired, states_removed, "
            "threads_purged, tasks_purged.",
            ["kind"],
            registry=registry,
        )
        self.threads_active = Gauge(
            "a2a_threads_active",
            "Threads not expired (refreshed on start and by every cleanup run).",
            registry=registry,
        )
        self.http = Counter(
            "a2a_http_requests",
            "HTTP requests, by route group and status code.",
            ["route", "status"],
            registry=registry,
        )
        for kind in CLEANUP_KINDS:
            self.cleanup.labels(kind)

    def record_cleanup(self, counts: CleanupTally) -> None:
        for kind in CLEANUP_KINDS:
            self.cleanup.labels(kind).inc(getattr(counts, kind))


class Metrics:
    """The registry of one runtime and the metric families in it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.memory = MemoryMetrics(self.registry)
        self._server: ServerMetrics | None = None

    def server(self) -> ServerMetrics:
        """The server families, added to the registry on first use (then the same object)."""
        if self._server is None:
            self._server = ServerMetrics(self.registry)
        return self._server

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)
