"""The PostgreSQL backend: pgvector, tsvector, JSONB filters, row-level security per tenant."""

from lamina.store.postgres.bulk import TENANT_TABLES
from lamina.store.postgres.store import PostgresStore

__all__ = ["TENANT_TABLES", "PostgresStore"]
