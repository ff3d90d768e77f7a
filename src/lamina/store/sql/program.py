"""SQL programs: the logic of a transaction, written once, run by either backend.

A program is a generator. It yields one ``Step`` per statement and receives its result —
``rows`` all rows, ``row`` the first or None, ``count`` the rows changed, ``many`` nothing —
and returns the transaction's value. It does no I/O itself, so the same program runs inside
SQLite's worker thread (``drive``) and on an awaited PostgreSQL connection
(``drive_async``). Statements are written with ``%s`` placeholders; the SQLite driver
rewrites them to ``?``.

``Lock`` asks for a lock on a key for the rest of the transaction: PostgreSQL takes an
advisory lock; SQLite needs none (its write transactions already run one at a time).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

T = TypeVar("T")
Fetch = Literal["rows", "row", "count", "many"]


@dataclass(frozen=True)
class Step:
    sql: str
    params: Sequence[Any]
    fetch: Fetch
    #: Results in the driver's binary format where it has one (PostgreSQL: vectors as
    #: float32, not text to parse; the same Python values). SQLite has only one.
    binary: bool = False


@dataclass(frozen=True)
class Lock:
    """A transaction-scoped lock on ``key`` within lock space ``space``; ``shared`` locks
    wait only for an exclusive one."""

    key: str
    space: int
    shared: bool = False


#: A transaction: yields steps, receives their results, returns its value.
Program = Generator[Step | Lock, Any, T]


def rows(sql: str, *params: Any, binary: bool = False) -> Step:
    return Step(sql, params, "rows", binary)


def row(sql: str, *params: Any) -> Step:
    return Step(sql, params, "row")


def count(sql: str, *params: Any) -> Step:
    return Step(sql, params, "count")


def many(sql: str, params: Sequence[Sequence[Any]]) -> Step:
    """One statement executed once per parameter tuple."""
    return Step(sql, params, "many")


def first(into: Callable[[Sequence[Any]], T], sql: str, *params: Any) -> Program[T | None]:
    """A program reading the first row of ``sql``, made a value by ``into`` (None: no row)."""
    found = yield row(sql, *params)
    return None if found is None else into(found)


def every(into: Callable[[Sequence[Any]], T], sql: str, *params: Any) -> Program[list[T]]:
    """A program reading every row of ``sql``, each made a value by ``into``."""
    found = yield rows(sql, *params)
    return [into(r) for r in found]


def drive(program: Program[T], execute: Callable[[Step | Lock], Any]) -> T:
    """Run ``program``, executing each step with ``execute`` (blocking)."""
    try:
        step = next(program)
        while True:
            step = program.send(execute(step))
    except StopIteration as done:
        result: T = done.value
        return result


async def drive_async(
    program: Program[T],
    execute: Callable[[Step | Lock], Awaitable[Any]],
    first: Step | Lock | None = None,
) -> T:
    """Run ``program``, awaiting ``execute`` for each step (``first``: the step the caller
    already advanced it to, with ``next``)."""
    try:
        step = next(program) if first is None else first
        while True:
            step = program.send(await execute(step))
    except StopIteration as done:
        result: T = done.value
        return result


class Executor(Protocol):
    """Where a backend runs programs: one transaction each, scoped to a tenant (PostgreSQL
    sets it for row-level security; ``None``: across tenants)."""

    async def read(
        self, tenant_id: str | None, operation: str, program: Program[T], *, snapshot: bool = False
    ) -> T:
        """Run a program that only reads; ``snapshot``: its statements must see one state
        (PostgreSQL always does; SQLite then opens a read transaction)."""
        ...

    async def write(self, tenant_id: str | None, operation: str, program: Program[T]) -> T:
        """Run a program in a write transaction."""
        ...
