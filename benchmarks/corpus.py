"""Synthetic but natural-looking memory sentences for the benchmarks (seeded, reproducible)."""

from __future__ import annotations

import random

NAMES = [
    "Alice",
    "Bob",
    "Chen",
    "Dana",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ivan",
    "Jun",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
]
VERBS = [
    "prefers",
    "asked about",
    "dislikes",
    "is migrating",
    "reviewed",
    "deployed",
    "wants to learn",
    "reported a bug in",
    "benchmarked",
    "documented",
    "is blocked on",
    "recommended",
    "rolled back",
    "configured",
    "is evaluating",
    "complained about",
]
OBJECTS = [
    "the PostgreSQL cluster",
    "dark mode in the editor",
    "the billing service",
    "Kubernetes autoscaling",
    "the React dashboard",
    "Python type hints",
    "the nightly CI pipeline",
    "the Redis cache",
    "GraphQL pagination",
    "the mobile login flow",
    "Terraform state locking",
    "the search relevance model",
    "weekly release notes",
    "the on-call rota",
    "TLS certificate renewal",
    "the data retention policy",
    "vector embeddings",
    "the Go gRPC gateway",
    "customer onboarding emails",
    "the invoice PDF generator",
    "feature flags",
    "the Kafka consumer lag",
    "unit test flakiness",
    "the design system colours",
]
CONTEXTS = [
    "before the Friday release",
    "during the incident review",
    "for the Q3 roadmap",
    "after the customer call",
    "in the architecture meeting",
    "on the staging cluster",
    "while pairing with the new hire",
    "for the compliance audit",
    "last sprint",
    "in the team retro",
    "for the Berlin office",
    "ahead of the board demo",
    "because latency doubled",
    "to cut cloud costs",
    "after the security scan",
]


def sentences(count: int, seed: int = 7, *, numbered: bool = False) -> list[str]:
    """``numbered`` appends " #i" so that every sentence is distinct."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"{rng.choice(CONTEXTS)}" + (f" #{i}" if numbered else "")
        for i in range(count)
    ]


def queries(count: int, seed: int = 99) -> list[str]:
    rng = random.Random(seed)
    return [f"what did {rng.choice(NAMES)} say about {rng.choice(OBJECTS)}" for _ in range(count)]
