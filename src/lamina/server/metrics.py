"""Prometheus metrics of the server, in the runtime's registry (next to the memory metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lamina.store.thread_base import CleanupCounts


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
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
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
        for kind in ("threads_expired", "states_removed", "threads_purged", "tasks_purged"):
            self.cleanup.labels(kind)

    def record_cleanup(self, counts: CleanupCounts) -> None:
        self.cleanup.labels("threads_expired").inc(counts.threads_expired)
        self.cleanup.labels("states_removed").inc(counts.states_removed)
        self.cleanup.labels("threads_purged").inc(counts.threads_purged)
        self.cleanup.labels("tasks_purged").inc(counts.tasks_purged)
