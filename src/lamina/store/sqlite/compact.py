"""Compact vectors: the one in-memory form of the embedded store's vectors.

A unit vector is kept as int8 codes with one float32 scale (its largest magnitude / 127) and
the length of its rounding error, ``|v - scale * codes|``: 392 bytes at 384 dimensions
against 1,536 for float32 (float16 was measured too: twice the bytes, NumPy computes in
float16 several times slower than in float32, and float32 from int8 in turn 8 times slower
than numkong's int8 dot products). The error length bounds how far the
approximate cosine can lie from the exact one (Cauchy-Schwarz: ``|q . (v - v')| <= |q| |v - v'|``),
so that a search knows which vectors might still belong to the exact top ``k`` and scores
exactly only those, from the float32 vectors stored in the SQLite file.

A large scope also has binary codes (one bit a dimension, set above the scope's mean vector)
for a first pass by Hamming distance.
"""

from __future__ import annotations

import numkong
import numpy as np
import numpy.typing as npt

from lamina.embeddings.base import Vector

Codes = npt.NDArray[np.uint64]
Int8s = npt.NDArray[np.int8]
Floats = npt.NDArray[np.float32]
Slots = npt.NDArray[np.intp]

#: Added to every bound: float32 rounding of the two products compared (384 terms each).
ROUNDING = 1e-4


def quantize(vectors: Vector) -> tuple[Int8s, Floats, Floats]:
    """Int8 codes, scales and error lengths of float32 ``vectors`` (n x dim)."""
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    peak = np.abs(vectors).max(axis=1)
    scales = np.where(peak > 0, peak / 127, 1).astype(np.float32)
    codes = np.clip(np.rint(vectors / scales[:, None]), -127, 127).astype(np.int8)
    errors = np.linalg.norm(vectors - codes * scales[:, None], axis=1).astype(np.float32)
    return codes, scales, errors


def approximate(codes: Int8s, scales: Floats, query: Vector) -> tuple[Floats, float]:
    """The approximate cosine of ``query`` with each coded vector, and the length of the
    query's own rounding error: the query is coded as the vectors are, and the int8 dot
    products run in SIMD (numkong, on the calling thread), ten times faster than NumPy
    converting the codes to float32. The error of each approximate cosine is then at most
    ``|q| error + query_error (1 + error)`` (``slack``)."""
    peak = float(np.abs(query).max())
    step = peak / 127 if peak > 0 else 1.0
    mine = np.clip(np.rint(query / step), -127, 127).astype(np.int8)
    query_error = float(np.linalg.norm(query - mine * np.float32(step)))
    dots = numkong.cdist(mine[None, :], codes, metric="dot", out_dtype="float32", threads=1)
    out: Floats = np.asarray(dots, dtype=np.float32)[0] * (scales * np.float32(step))
    return out, query_error


def slack(errors: Floats, query: Vector, query_error: float) -> Floats:
    """How far each approximate cosine (``approximate``) may lie from the exact one."""
    norm = np.float32(np.linalg.norm(query))
    out: Floats = errors * (norm + np.float32(query_error))
    out += np.float32(query_error + ROUNDING)
    return out


def finalists(approx: Floats, slack: Floats, k: int, most: int) -> Slots:
    """Positions (in ``approx``) of every vector whose exact cosine may be among the best
    ``k``: those whose upper bound (``approx + slack``) reaches the ``k``-th best lower
    bound. More than ``most`` of them: the ``most`` best by ``approx`` (the exact result is
    then likely, no longer certain)."""
    if k >= len(approx):
        return np.arange(len(approx))
    lower = approx - slack
    kth = -np.partition(-lower, k - 1)[k - 1]
    found: Slots = np.flatnonzero(approx + slack >= kth)
    if len(found) > most:
        found = np.argpartition(-approx, most - 1)[:most]
    return found


def words(dim: int) -> int:
    return (dim + 63) // 64


def binary_codes(vectors: Vector, center: Vector) -> Codes:
    """One bit per dimension (set: above ``center``), packed in 64-bit words, one column
    per vector (words x n: each word of every code is contiguous)."""
    bits = np.packbits(vectors > center, axis=1)
    padded = np.zeros((len(vectors), words(vectors.shape[1]) * 8), dtype=np.uint8)
    padded[:, : bits.shape[1]] = bits
    return np.ascontiguousarray(padded.view(np.uint64).T)


def dequantize(codes: Int8s, scales: Floats) -> Vector:
    out: Vector = codes.astype(np.float32) * scales[:, None]
    return out


def hamming_within(codes: Codes, size: int, query: Vector, center: Vector, want: int) -> Slots:
    """Slots (ascending) of every code within the smallest Hamming distance of the query's
    that holds at least ``want`` of them."""
    mine = binary_codes(query[None, :], center)[:, 0]
    distance = np.bitwise_count(codes[0, :size] ^ mine[0]).astype(np.uint16)
    for word in range(1, len(mine)):
        distance += np.bitwise_count(codes[word, :size] ^ mine[word])
    within = np.cumsum(np.bincount(distance))
    radius = int(np.searchsorted(within, want))
    slots: Slots = np.flatnonzero(distance <= radius)
    return slots
