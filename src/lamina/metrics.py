"""Prometheus metrics, one registry per runtime (several runtimes never collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class MemoryMetrics:
    """memory_operations_total{operation}, memory_operations_latency_seconds{operation},
    memory_search_results{layer}, memory_storage_size{layer},
    memory_operations_errors_total{code}."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
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
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
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
        self.errors = Counter(
            "memory_operations_errors",
            "Failed memory operations, by error code.",
            ["code"],
            registry=registry,
        )

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format."""
        return generate_latest(self.registry)
