"""Memories in and out in bulk: ``export`` (a stream of records, page by page) and
``import_`` (records back in, with their ids: a re-import adds nothing). The record format
lives in ``records``; forgetting in bulk (``delete_all``, ``count_all``, ``forget``) in
``forgetting``."""

from __future__ import annotations

import asyncio
import gc
import threading
import zlib
from array import array
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from typing import Any, Unpack

from lamina.checks import check_actor, check_flag, check_int, invalid
from lamina.errors import LaminaError
from lamina.memory.base import MemoryPart, MemoryShared
from lamina.memory.forgetting import selection_of
from lamina.memory.formats import FORMATS
from lamina.memory.import_source import ImportSource, reader
from lamina.memory.layers import (
    IdentifierArgs,
    MemoryLayer,
    check_identifier_names,
    identifier_args,
)
from lamina.memory.models import ImportReport
from lamina.memory.ports import ImportWriter, MemoryPorts, StoredMemory
from lamina.memory.records import export_record, parse_record

#: (records done, records in all); the total is None while not known.
OnProgress = Callable[[int, int | None], None]
#: Records per page of an export and per transaction of an import.
BATCH = 1000


class MemoryTransfer(MemoryPart):
    """``export`` / ``export_pages`` and ``import_``. Holds the transfer port and the
    embeddings port (the vectors' model; records without one are embedded)."""

    def __init__(self, shared: MemoryShared, ports: MemoryPorts) -> None:
        super().__init__(shared)
        self._transfer = ports.transfer
        self._embeddings = ports.embeddings

    async def export(self, /, **options: Any) -> AsyncIterator[dict[str, Any]]:
        """The records of ``export_pages`` (the same arguments), one by one."""
        async for page in self.export_pages(**options):
            for record in page:
                yield record

    async def export_pages(
        self,
        *,
        layers: Sequence[str | MemoryLayer] | str | None = None,
        embeddings: bool = False,
        history: bool = False,
        tenant_id: str | None = None,
        batch_size: int = BATCH,
        **scope_ids: Unpack[IdentifierArgs],
    ) -> AsyncGenerator[list[dict[str, Any]], None]:
        """The tenant's memories as export records (docs/export.md), oldest first, a page
        of ``batch_size`` at a time (never all at once; the next page is read while this
        one is handled): every memory, or those whose identifiers include all those given,
        optionally only in ``layers``; with their vectors (``embeddings``) and history
        (``history``) when asked. ``export`` gives them one by one."""
        check_identifier_names("export_pages", scope_ids)
        tenant = self._tenant(tenant_id)
        selection = selection_of(identifier_args(scope_ids), layers)
        vectors = check_flag("embeddings", embeddings)
        events = check_flag("history", history)
        size = check_int("batch_size", batch_size, minimum=1, maximum=10_000)
        Page = tuple[list[StoredMemory], str | None]

        def read(after: str | None) -> asyncio.Task[Page]:
            async def page() -> Page:
                return await self._retry.run(
                    "export",
                    lambda: self._transfer.export_page(
                        tenant, selection, cursor=after, limit=size, vectors=vectors, history=events
                    ),
                )

            return asyncio.create_task(self._observe("export", page))

        # The next page is read while the caller handles this one.
        ahead = read(None)
        try:
            while True:
                found, cursor = await ahead
                if cursor is not None:
                    ahead = read(cursor)
                if found:
                    yield [export_record(item) for item in found]
                if cursor is None:
                    return
        finally:
            if not ahead.done():
                ahead.cancel()

    async def import_(
        self,
        source: ImportSource,
        *,
        format: str = "lamina",
        actor: str | None = None,
        tenant_id: str | None = None,
        batch_size: int = BATCH,
        on_progress: OnProgress | None = None,
    ) -> ImportReport:
        """Import memories from ``source`` (a JSONL file's path, or its lines or records):
        lamina's export records, or mem0's memories (``format="mem0"``: docs/export.md).

        Every record is checked before anything is kept: a bad one is INVALID_ARGUMENT
        naming its line, and nothing is imported. The records are stored ``batch_size`` at
        a time, with their ids, times and history; ids the tenant already has are skipped,
        so importing the same file again adds nothing. Usually every record is checked
        first, then each batch is one transaction (an import cut short completes when run
        again). Into an empty store that can take it (``atomic_import``: PostgreSQL as a
        superuser) the whole import is one transaction instead, each record checked as it
        is read, in one pass (a bad one or a crash rolls it all back; the progress's
        ``total`` is None until the commit). Records without a vector of the configured
        model are embedded. ``on_progress(done, total)`` follows the storing. While it runs,
        Python's cyclic garbage collector is paused in this process (``_collector_paused``:
        docs/export.md, "Speed")."""
        tenant = self._tenant(tenant_id)
        if format not in FORMATS:
            raise invalid(f"format must be one of {', '.join(FORMATS)}, not {format!r}", "format")
        who = check_actor(actor)
        size = check_int("batch_size", batch_size, minimum=1, maximum=10_000)
        records = reader(source, format)

        # Into an empty store that can take an import as one transaction, the records are
        # checked while they are stored, in one pass: a bad one rolls everything back.
        with _collector_paused():
            async with (
                self._transfer.bulk_loading(),
                self._transfer.atomic_import(tenant) as writer,
            ):
                if writer is None:
                    return await self._import_in_batches(records, tenant, who, size, on_progress)
                report = await self._import_at_once(records, tenant, who, size, writer, on_progress)
            if on_progress is not None:  # committed, indexes built: the total is known now
                on_progress(report.imported + report.skipped, report.records)
        return report

    async def _check(self, tenant: str, item: StoredMemory, line: int) -> None:
        """The write guard's verdict on a record (INVALID_ARGUMENT naming its line)."""
        if self._write_guard is None:
            return
        entry = item.entry
        try:
            await self._write_guard(tenant, entry.layer.value, entry.identifiers, entry.content)
        except LaminaError as exc:
            exc.message = f"line {line}: {exc.message}"
            exc.args = (exc.message,)
            exc.details["line"] = line
            raise

    async def _import_at_once(
        self,
        records: Callable[[], Iterator[tuple[int, Any, str | None]]],
        tenant: str,
        who: str | None,
        size: int,
        writer: ImportWriter,
        on_progress: OnProgress | None,
    ) -> ImportReport:
        """One pass over the records: each checked, then stored ``size`` at a time through
        ``writer`` (one transaction: nothing is kept unless every record passes). The
        total is not known before the end."""
        report = {"records": 0, "imported": 0, "skipped": 0, "embedded": 0}
        #: Set once the call of the writer of the batch handed over last has begun (or the
        #: batch ended).
        called: asyncio.Event | None = None

        async def store(items: list[StoredMemory]) -> None:
            nonlocal called
            before, mine = called, asyncio.Event()
            called = mine

            async def in_order(batch: Sequence[StoredMemory], actor: str | None) -> list[str]:
                # A batch embedding its records (a batch without vectors) must not let the
                # next one reach the writer first: the writer stores them in the order of
                # its calls, and that is the file's.
                if before is not None:
                    await before.wait()
                mine.set()  # the next batch calls once this call waits in the writer
                return await writer(batch, actor)

            try:
                embedded = await self._store_batch(tenant, items, who, report, in_order)
            finally:
                mine.set()
            report["embedded"] += embedded
            if on_progress is not None:
                on_progress(report["imported"] + report["skipped"], None)

        # Batches are stored while the next ones are read and checked, two in flight: the
        # writer's transaction takes one at a time, in the file's order, and makes the next
        # one's rows meanwhile. A bad record stops the import once the batches in flight
        # are done, and the store rolls back.
        storing: list[asyncio.Task[None]] = []

        async def read() -> None:
            batch: list[StoredMemory] = []
            for line, data, _ in records():
                item = self._parse(data, line, tenant)
                await self._check(tenant, item, line)
                report["records"] += 1
                batch.append(item)
                if len(batch) >= size:
                    await _hand_over(storing, store, batch)
                    batch = []
                elif not len(batch) % _TURN:
                    await asyncio.sleep(0)  # the batches in flight go on meanwhile
            if batch:
                await _hand_over(storing, store, batch)
            while storing:
                await storing[0]
                storing.pop(0)

        try:
            await self._observe("import", read)
        finally:
            for task in storing:
                await _settle(task)
        return ImportReport(**report)

    async def _import_in_batches(
        self,
        records: Callable[[], Iterator[tuple[int, Any, str | None]]],
        tenant: str,
        who: str | None,
        size: int,
        on_progress: OnProgress | None,
    ) -> ImportReport:
        """Every record checked, then stored ``size`` per transaction."""
        #: Each text line's CRC when it was checked: the second pass skips the checks of
        #: a line that is still the same (a file changed in between is checked again).
        seen = array("L")

        async def check() -> int:
            total = 0
            for line, data, raw in records():
                seen.append(_crc(raw))
                await self._check(tenant, self._parse(data, line, tenant), line)
                total += 1
            return total

        total = await self._observe("import", check)
        report = {"records": total, "imported": 0, "skipped": 0, "embedded": 0}
        batch: list[StoredMemory] = []
        # One batch is stored while the next is read: the database works meanwhile.
        pending: asyncio.Task[None] | None = None

        async def store(items: list[StoredMemory]) -> None:
            report["embedded"] += await self._store_batch(tenant, items, who, report)
            if on_progress is not None:
                on_progress(report["imported"] + report["skipped"], total)

        async def hand_over(items: list[StoredMemory]) -> asyncio.Task[None]:
            if pending is not None:
                await pending
            task = asyncio.create_task(self._observe("import", lambda: store(items)))
            await asyncio.sleep(0)  # let it start before reading on
            return task

        try:
            for n, (line, data, raw) in enumerate(records()):
                same = raw is not None and n < len(seen) and seen[n] == _crc(raw)
                batch.append(self._parse(data, line, tenant, checked=same))
                if len(batch) >= size:
                    pending, batch = await hand_over(batch), []
                elif not len(batch) % _TURN:
                    await asyncio.sleep(0)  # the batch being stored sends its next statement
            if batch:
                pending = await hand_over(batch)
            if pending is not None:
                await pending
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
        return ImportReport(**report)

    def _parse(
        self, data: Mapping[str, Any], line: int, tenant: str, *, checked: bool = False
    ) -> StoredMemory:
        status = self._embeddings.embedding_status()
        return parse_record(
            data,
            line,
            tenant_id=tenant,
            max_length=self._settings.max_content_length,
            model=status.model,
            dimensions=status.dimensions,
            checked=checked,
        )

    async def _store_batch(
        self,
        tenant: str,
        batch: list[StoredMemory],
        actor: str | None,
        report: dict[str, int],
        writer: ImportWriter | None = None,
    ) -> int:
        """Embed the records without a usable vector, store the batch (through ``writer``
        when given: an atomic import, whose transaction a retry could not resume); how many
        embedded."""
        missing = [i for i, item in enumerate(batch) if item.vector is None]
        if missing:
            texts = [batch[i].entry.content for i in missing]
            vectors = await self._retry.run(
                "embed", lambda: self._embeddings.generate_embedding(tenant, texts)
            )
            for n, i in enumerate(missing):
                batch[i] = StoredMemory(batch[i].entry, vectors[n], batch[i].history)
        items = list(batch)
        if writer is not None:
            stored = await writer(items, actor)
        else:
            stored = await self._retry.run(
                "import", lambda: self._transfer.import_memories(tenant, items, actor=actor)
            )
        kept = set(stored)
        report["imported"] += len(stored)
        report["skipped"] += len(items) - len(stored)
        return sum(1 for i in missing if items[i].entry.id in kept)


#: Records read between two turns of the event loop: a batch is stored in several
#: statements, and each is sent only when the loop turns (reading a whole batch before the
#: next one ran the database's part of each batch mostly after the reading, not beside it).
_TURN = 32


#: Batches of an atomic import in flight at once: one being stored, the next one made
#: ready meanwhile (the writer makes its rows), so that the database and this process
#: work side by side instead of in turns.
_IN_FLIGHT = 2


async def _hand_over(
    storing: list[asyncio.Task[None]],
    store: Callable[[list[StoredMemory]], Coroutine[Any, Any, None]],
    batch: list[StoredMemory],
) -> None:
    """Start storing ``batch`` (a task appended to ``storing``, the batches in flight, in
    order) once fewer than ``_IN_FLIGHT`` are; never, if one before it failed (its error
    is raised)."""
    while len(storing) >= _IN_FLIGHT:
        await storing[0]  # kept in ``storing`` until done, to be settled if this is cancelled
        storing.pop(0)
    storing.append(asyncio.create_task(store(batch)))
    await asyncio.sleep(0)  # let it start before reading on


async def _settle(task: asyncio.Task[None]) -> None:
    """Wait for a batch still in flight when the import stops (its transaction is then
    rolled back: the writer's connection must be idle first), ignoring how it ends."""
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # seen: the import's own error is the one raised


#: ``_collector_paused``'s state: how many imports run, whether the collector was on.
_PAUSE = threading.Lock()
_paused = {"imports": 0, "was_on": False}


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while imports run in this process (on again
    when the last one ends, if it was on when the first began). An import keeps every
    record's objects until its batch is stored, so the collector moved them to its oldest
    generation and traversed every object of the process again and again: at 100k records
    it took 2.3 of the import's 12 CPU-seconds (27 full collections, 1.6 s). Objects
    without cycles are freed as they always are, by their reference counts; only garbage
    in cycles waits for the import's end."""
    counted = False
    try:
        with _PAUSE:
            if _paused["imports"] == 0:
                _paused["was_on"] = gc.isenabled()
                gc.disable()
            _paused["imports"] += 1
            counted = True
        yield
    finally:
        if counted:
            with _PAUSE:
                _paused["imports"] -= 1
                if _paused["imports"] == 0 and _paused["was_on"]:
                    gc.enable()


def _crc(raw: str | None) -> int:
    return 0 if raw is None else zlib.crc32(raw.encode("utf-8", "surrogatepass"))
