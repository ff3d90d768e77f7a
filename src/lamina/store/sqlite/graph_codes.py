"""A vector graph saved without its codes: the SQLite file holds them already (issue 35).

usearch saves a graph as a small header, the matrix of its vectors (one row of int8 codes
a slot) and then the graph itself. The codes are three quarters of the file (384 of about
530 bytes a vector at 384 dimensions), and each is ``quantize`` of the float32 vector that
the SQLite file holds and that a load reads anyway. So a graph is saved as usearch's bytes
with the matrix left out, and in its place, for each slot, the pk whose codes fill it and a
hash of those codes (16 bytes). Slots whose codes no stored vector has (a vector replaced
in place, say) keep their codes in the file.

Loading puts the codes of the vectors read back in their slots (``fill``) and hands usearch
the very bytes it saved (``graph``). A vector whose codes no longer hash as saved (it
changed after the save) is put into the graph again, as a write after the save would be;
a slot whose vector is no longer stored gets neutral codes, and the load removes its key.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lamina.store.sqlite.compact import quantize

if TYPE_CHECKING:
    from lamina.store.sqlite.compact import Int8s

log = logging.getLogger(__name__)

MAGIC = b"lamina-graph-1\n\x00"
#: Our header: magic, slots, bytes a slot, slots whose codes the file keeps, vectors.
_HEAD = struct.Struct(f"<{len(MAGIC)}sIIIQ")
#: usearch's header before the matrix: its rows and columns (uint32 each).
_USEARCH_HEAD = struct.Struct("<II")
#: Vectors quantized together while filling.
_BATCH = 4096
#: The hash weights: one odd 64-bit number a dimension (fixed: saved files depend on them).
_MIX = 0x9E3779B97F4A7C15

Pks = npt.NDArray[np.int64]
#: The codes a graph holds for some of its keys, in their order.
CodesOf = Callable[[Pks], "Int8s"]


def _weights(dim: int) -> npt.NDArray[np.uint64]:
    """One odd pseudo-random 64-bit weight a dimension (splitmix64: fixed for good)."""
    out, state, mask = [], 0, 2**64 - 1
    for _ in range(dim):
        state = (state + _MIX) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append((z ^ (z >> 31)) | 1)
    return np.array(out, dtype=np.uint64)


def code_hashes(codes: Int8s) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each row of codes (wrapping products: the same on every machine),
    ``_BATCH`` rows at a time (they are widened to 64 bits)."""
    weights = _weights(codes.shape[1])
    out = np.empty(len(codes), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for start in range(0, len(codes), _BATCH):
            wide = codes[start : start + _BATCH].astype(np.int64).view(np.uint64)
            out[start : start + _BATCH] = wide @ weights
    return out


def _ranked(hashes: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Each hash mixed with its rank among the equal ones before it: the slots of several
    keys with the same codes pair with those keys one to one."""
    order = np.argsort(hashes, kind="stable")
    ordered = hashes[order]
    rank = np.empty(len(hashes), dtype=np.uint64)
    rank[order] = (np.arange(len(hashes)) - np.searchsorted(ordered, ordered)).astype(np.uint64)
    with np.errstate(over="ignore"):
        out: npt.NDArray[np.uint64] = hashes ^ (rank * np.uint64(_MIX))
    return out


def strip(saved: bytes, keys: Pks, codes_of: CodesOf) -> list[Any] | None:
    """The parts of the file to write for usearch's ``saved`` bytes of a graph of ``keys``
    (``codes_of`` gives their codes); None when the bytes are not laid out as expected (the
    graph is then saved as usearch saves it)."""
    if len(saved) < _USEARCH_HEAD.size or not len(keys):
        return None
    rows, cols = _USEARCH_HEAD.unpack_from(saved)
    if rows < len(keys) or len(saved) < _USEARCH_HEAD.size + rows * cols:
        return None
    matrix = np.frombuffer(saved, dtype=np.int8, count=rows * cols, offset=_USEARCH_HEAD.size)
    matrix = matrix.reshape(rows, cols)
    hashes = code_hashes(matrix)
    parts = [codes_of(keys[i : i + _BATCH]) for i in range(0, len(keys), _BATCH)]
    if any(
        part.shape != (min(_BATCH, len(keys) - i * _BATCH), cols) for i, part in enumerate(parts)
    ):
        return None
    mine = _ranked(np.concatenate([code_hashes(part) for part in parts]))
    theirs = _ranked(hashes)
    order = np.argsort(mine, kind="stable")
    which = order[np.minimum(np.searchsorted(mine[order], theirs), len(order) - 1)]
    same = mine[which] == theirs
    slot_pks = np.where(same, keys[which], -1)
    for start in range(0, len(keys), _BATCH):  # the codes themselves, not just hashes
        slots = np.flatnonzero(same & (which >= start) & (which < start + _BATCH))
        equal = np.all(parts[start // _BATCH][which[slots] - start] == matrix[slots], axis=1)
        slot_pks[slots[~equal]] = -1
    kept = np.ascontiguousarray(matrix[slot_pks < 0])
    head = _HEAD.pack(MAGIC, rows, cols, len(kept), len(keys))
    tail = memoryview(saved)[_USEARCH_HEAD.size + rows * cols :]
    return [head, slot_pks.tobytes(), hashes.tobytes(), kept.tobytes(), saved[:8], tail]


class Stripped:
    """A saved graph waiting for its codes (module docstring): ``fill`` with every stored
    vector of its scope, then ``graph``."""

    def __init__(self, data: bytes, dim: int) -> None:
        _, rows, cols, kept, self.size = _HEAD.unpack_from(data)
        at = _HEAD.size
        self.slot_pks = np.frombuffer(data, dtype=np.int64, count=rows, offset=at)
        at += 8 * rows
        self.hashes = np.frombuffer(data, dtype=np.uint64, count=rows, offset=at)
        at += 8 * rows
        codes_at, at = at, at + kept * cols
        # usearch's bytes: its header, the matrix (``fill`` writes it), the graph.
        self._buffer = bytearray(data[at : at + _USEARCH_HEAD.size])
        self._buffer += bytes(rows * cols)
        self._buffer += data[at + _USEARCH_HEAD.size :]
        self._matrix = np.frombuffer(
            self._buffer, dtype=np.int8, count=rows * cols, offset=_USEARCH_HEAD.size
        ).reshape(rows, cols)
        explicit = self.slot_pks < 0
        self._matrix[explicit] = np.frombuffer(
            data, dtype=np.int8, count=kept * cols, offset=codes_at
        ).reshape(kept, cols)
        self._filled = explicit.copy()
        self._dim = dim
        self._order = np.argsort(self.slot_pks, kind="stable")
        self._sorted = self.slot_pks[self._order]
        self._pending: list[tuple[int, bytes]] = []
        #: Vectors to put into the graph once loaded: changed since the save, or new.
        self.puts: list[tuple[int, Int8s]] = []

    def __len__(self) -> int:
        return int(self.size)

    @classmethod
    def read(cls, path: Path, dim: int) -> Stripped | None:
        """The stripped graph saved at ``path``; None when it is not one (usearch's own
        file) or not of ``dim`` dimensions."""
        with path.open("rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return None
            data = MAGIC + f.read()
        if len(data) < _HEAD.size:
            return None
        _, rows, cols, kept, _ = _HEAD.unpack_from(data)
        if cols != dim or rows == 0 or len(data) < _HEAD.size + rows * 16 + kept * cols + 8:
            return None
        return cls(data, dim)

    def fill(self, pk: int, blob: bytes) -> None:
        """The stored float32 vector (bytes) of ``pk``, a vector of the graph's scope."""
        self._pending.append((pk, blob))
        if len(self._pending) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        pks = np.array([pk for pk, _ in self._pending], dtype=np.int64)
        joined = b"".join(blob for _, blob in self._pending)
        self._pending.clear()
        codes = quantize(np.frombuffer(joined, dtype=np.float32).reshape(len(pks), self._dim))[0]
        at = np.minimum(np.searchsorted(self._sorted, pks), len(self._sorted) - 1)
        found = self._sorted[at] == pks
        slots = self._order[at[found]]  # the first slot of each pk (see ``graph``)
        self._matrix[slots] = codes[found]
        self._filled[slots] = True
        changed = found.copy()
        changed[found] = self.hashes[slots] != code_hashes(codes[found])
        for pk, c in zip(pks[changed | ~found].tolist(), codes[changed | ~found], strict=True):
            self.puts.append((pk, c.copy()))

    def assemble(self) -> bytearray:
        """The bytes usearch saved (with the codes filled), to restore the graph from."""
        self._flush()
        # A pk in several slots (they hold the same codes): ``fill`` filled its first.
        first = np.searchsorted(self._sorted, self._sorted)
        again = (first != np.arange(len(first))) & (self._sorted >= 0)
        self._matrix[self._order[again]] = self._matrix[self._order[first[again]]]
        self._filled[self._order[again]] = self._filled[self._order[first[again]]]
        if not self._filled.all():
            self._matrix[~self._filled] = 1  # neutral codes: their keys are removed
        if self.puts:
            log.info("a restored vector graph takes %d vectors changed since", len(self.puts))
        del self._matrix
        return self._buffer
