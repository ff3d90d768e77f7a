"""Prometheus metrics: every metric family of lamina, in one registry per runtime.

Several runtimes in one process never collide: each owns a ``Metrics`` with its own
``CollectorRegistry``. The memory families exist from the start; the server families
(``a2a_*``) are added to the same registry the first time a server asks for them, so
``/metrics`` shows both and a runtime without a server shows only the memory families.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from lamina.errors import ErrorCode, LaminaError

#: Latency histogram buckets, in seconds (memory operations and skill requests alike).
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: What one thread cleanup run removes, as the label values of ``a2a_thread_cleanup_total``.
CLEANUP_KINDS = (
    "threads_expired",
    "states_removed",
    "threads_purged",
    "tasks_purged",
    "tasks_trimmed",
    "threads_trimmed",
)


class _Families:
    """Makes the metric families of one registry (latency buckets unless others given)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def counter(self, name: str, documentation: str, *labels: str) -> Counter:
        return Counter(name, documentation, labels, registry=self._registry)

    def gauge(self, name: str, documentation: str, *labels: str) -> Gauge:
        return Gauge(name, documentation, labels, registry=self._registry)

    def histogram(
        self,
        name: str,
        documentation: str,
        *labels: str,
        buckets: tuple[float, ...] = LATENCY_BUCKETS,
    ) -> Histogram:
        return Histogram(name, documentation, labels, buckets=buckets, registry=self._registry)


class Operations:
    """The calls of one service, counted alike (the memory service's, the thread
    service's): ``{prefix}_operations_total{operation}``,
    ``{prefix}_operations_latency_seconds{operation}`` and
    ``{prefix}_operations_errors_total`` by error code (and by operation when
    ``errors_by_operation``); ``noun`` names the calls in the families' help."""

    def __init__(
        self, family: _Families, prefix: str, noun: str, *, errors_by_operation: bool
    ) -> None:
        self._by_operation = errors_by_operation
        self.operations = family.counter(
            f"{prefix}_operations",
            f"{noun[0].upper()}{noun[1:]} performed, by operation.",
            "operation",
        )
        self.latency = family.histogram(
            f"{prefix}_operations_latency_seconds", f"Latency of {noun}, by operation.", "operation"
        )
        by = ("operation", "code") if errors_by_operation else ("code",)
        self.errors = family.counter(
            f"{prefix}_operations_errors",
            f"Failed {noun}, by {'operation and ' if errors_by_operation else ''}error code.",
            *by,
        )

    @contextmanager
    def counted(self, operation: str) -> Iterator[None]:
        """The block run as the call ``operation``: counted, timed, and its error counted by
        code (a LaminaError's, INTERNAL_ERROR for any other exception)."""
        started = time.perf_counter()
        self.operations.labels(operation).inc()
        try:
            yield
        except LaminaError as exc:
            self._failed(operation, exc.code)
            raise
        except Exception:
            self._failed(operation, ErrorCode.INTERNAL_ERROR)
            raise
        finally:
            self.latency.labels(operation).observe(time.perf_counter() - started)

    def _failed(self, operation: str, code: ErrorCode) -> None:
        by = (operation, code.value) if self._by_operation else (code.value,)
        self.errors.labels(*by).inc()


class MemoryMetrics:
    """memory_operations_total{operation}, memory_operations_latency_seconds{operation},
    memory_operations_errors_total{code} (``calls``), memory_search_results{layer},
    memory_storage_size{layer}, memory_expired_total."""

    def __init__(self, registry: CollectorRegistry) -> None:
        family = _Families(registry)
        self.calls = Operations(family, "memory", "memory operations", errors_by_operation=False)
        self.search_results = family.histogram(
            "memory_search_results",
            "Results returned by one layer for one search, by layer.",
            "layer",
            buckets=(0, 1, 2, 5, 10, 20, 50, 100),
        )
        self.storage_size = family.gauge(
            "memory_storage_size",
            "Memories stored, by layer (refreshed by searches, at most every 10 s).",
            "layer",
        )
        self.expired = family.counter(
            "memory_expired", "Memories whose time to live ended, removed by the expiry job."
        )


class ServerMetrics:
    """a2a_requests_total{skill,tool,outcome}, a2a_request_latency_seconds{skill},
    a2a_errors_total{skill,code}, a2a_rate_limit_hits_total{tenant_id,skill_name},
    a2a_thread_cleanup_total{kind}, a2a_threads_active, a2a_http_requests_total{route,status},
    and the thread service's calls (``threads``): a2a_thread_operations_total{operation},
    a2a_thread_operations_latency_seconds{operation},
    a2a_thread_operations_errors_total{operation,code}."""

    def __init__(self, registry: CollectorRegistry) -> None:
        family = _Families(registry)
        self.requests = family.counter(
            "a2a_requests",
            "Skill requests handled, by skill, tool and outcome (task state).",
            "skill",
            "tool",
            "outcome",
        )
        self.latency = family.histogram(
            "a2a_request_latency_seconds", "Time to handle one skill request, by skill.", "skill"
        )
        self.errors = family.counter(
            "a2a_errors",
            "Skill requests that ended in an error, by skill and error code.",
            "skill",
            "code",
        )
        self.rate_limited = family.counter(
            "a2a_rate_limit_hits",
            "Requests refused with 429, by tenant and skill.",
            "tenant_id",
            "skill_name",
        )
        self.cleanup = family.counter(
            "a2a_thread_cleanup",
            "What the thread cleanup job removed: threads_expired, states_removed, "
            "threads_purged, tasks_purged; tasks_trimmed, threads_trimmed past the size caps.",
            "kind",
        )
        self.threads_active = family.gauge(
            "a2a_threads_active",
            "Threads not expired (refreshed on start and by every cleanup run).",
        )
        self.http = family.counter(
            "a2a_http_requests", "HTTP requests, by route group and status code.", "route", "status"
        )
        for kind in CLEANUP_KINDS:
            self.cleanup.labels(kind)
        self.threads = Operations(
            family, "a2a_thread", "thread and task operations", errors_by_operation=True
        )

    def record_cleanup(self, counts: Mapping[str, int]) -> None:
        """Count what one cleanup run removed: ``counts`` by kind (every one of
        ``CLEANUP_KINDS``; the threads port's record, as a mapping)."""
        for kind in CLEANUP_KINDS:
            self.cleanup.labels(kind).inc(counts[kind])


@dataclass(frozen=True)
class Sample:
    """One sample of the registry: its name (``a2a_requests_total``, a histogram's
    ``…_bucket``), its labels and its value."""

    name: str
    labels: dict[str, str]
    value: float


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

    def samples(self, *prefixes: str) -> list[Sample]:
        """Every sample now, of the families whose names start with one of ``prefixes``
        (all when none are given): what the web inspector charts."""
        return [
            Sample(s.name, dict(s.labels), float(s.value))
            for family in self.registry.collect()
            if not prefixes or family.name.startswith(prefixes)
            for s in family.samples
        ]

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)
