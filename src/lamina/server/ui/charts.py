"""Small charts drawn on the server as SVG geometry (the template draws the shapes; no
script, no inline style): horizontal bars for a breakdown, a line for a figure over time;
and the figures themselves, read from the Prometheus registry."""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from lamina.metrics import Sample

#: Width and bar height of a bar chart (SVG user units).
WIDTH = 320
BAR = 16
LABEL = 120


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    text: str
    y: int
    width: float
    bad: bool = False


@dataclass(frozen=True)
class BarChart:
    title: str
    bars: list[Bar]
    height: int
    empty: str = "nothing yet"


def bar_chart(
    title: str,
    rows: Iterable[tuple[str, float]],
    *,
    unit: str = "",
    bad: Callable[[str], bool] = lambda _: False,
) -> BarChart:
    """Bars for (label, value) rows, largest first (at most 12); ``bad`` says which bars
    are drawn as trouble (errors, refusals)."""
    ordered = sorted(((k, v) for k, v in rows if v > 0), key=lambda r: -r[1])[:12]
    top = max((v for _, v in ordered), default=0.0)
    span = WIDTH - LABEL - 60
    bars = [
        Bar(
            label=label[:24],
            value=value,
            text=_figure(value, unit),
            y=4 + i * (BAR + 4),
            width=round(span * value / top, 2) if top else 0.0,
            bad=bad(label),
        )
        for i, (label, value) in enumerate(ordered)
    ]
    return BarChart(title, bars, max(24, 8 + len(bars) * (BAR + 4)))


def _figure(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.1f} ms"
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


@dataclass(frozen=True)
class LineChart:
    title: str
    points: str
    height: int
    last: str
    peak: str


def line_chart(title: str, values: Sequence[float], *, height: int = 80) -> LineChart:
    """A polyline of ``values`` (oldest first) across the chart's width."""
    top = max(values, default=0.0) or 1.0
    step = WIDTH / max(len(values) - 1, 1)
    points = " ".join(
        f"{round(i * step, 1)},{round(height - 4 - (height - 8) * v / top, 1)}"
        for i, v in enumerate(values)
    )
    last = values[-1] if values else 0.0
    return LineChart(title, points, height, f"{last:,.1f}", f"{max(values, default=0.0):,.1f}")


# -- the figures -----------------------------------------------------------------------------


def by_label(samples: Iterable[Sample], name: str, *labels: str) -> dict[str, float]:
    """The values of one sample name summed per combination of ``labels`` ("a / b")."""
    out: dict[str, float] = {}
    for s in samples:
        if s.name == name:
            key = " / ".join(s.labels.get(label, "") for label in labels)
            out[key] = out.get(key, 0.0) + s.value
    return out


def mean_latency_ms(samples: Sequence[Sample], family: str, label: str) -> dict[str, float]:
    """Mean latency per label value of a histogram family (milliseconds)."""
    sums = by_label(samples, f"{family}_sum", label)
    counts = by_label(samples, f"{family}_count", label)
    return {k: 1000 * sums[k] / n for k, n in counts.items() if n and k in sums}


def quantile_ms(samples: Sequence[Sample], family: str, label: str, q: float) -> dict[str, float]:
    """The ``q`` quantile per label value of a histogram, at its bucket's upper bound (ms)."""
    buckets: dict[str, list[tuple[float, float]]] = {}
    for s in samples:
        if s.name == f"{family}_bucket" and s.labels.get("le") != "+Inf":
            buckets.setdefault(s.labels.get(label, ""), []).append((float(s.labels["le"]), s.value))
    counts = by_label(samples, f"{family}_count", label)
    out = {}
    for key, found in buckets.items():
        total = counts.get(key, 0.0)
        if not total:
            continue
        for bound, cumulative in sorted(found):
            if cumulative >= q * total:
                out[key] = bound * 1000
                break
        else:
            out[key] = sorted(found)[-1][0] * 1000
    return out


@dataclass
class History:
    """Totals sampled over time (requests, errors, rate-limit refusals), for the line
    charts: the last ``size`` samples, at most one per ``interval`` seconds."""

    size: int = 60
    interval: float = 10.0
    points: deque[tuple[float, float, float, float]] = field(default_factory=deque)

    def record(self, samples: Sequence[Sample]) -> None:
        now = time.monotonic()
        if self.points and now - self.points[-1][0] < self.interval:
            return
        requests = sum(by_label(samples, "a2a_http_requests_total", "route").values())
        errors = sum(
            v
            for k, v in by_label(samples, "a2a_http_requests_total", "status").items()
            if k.startswith("5")
        )
        limited = sum(by_label(samples, "a2a_rate_limit_hits_total", "skill_name").values())
        self.points.append((now, requests, errors, limited))
        while len(self.points) > self.size:
            self.points.popleft()

    def rates(self, column: int) -> list[float]:
        """Per-minute rates between consecutive samples of one column (1 requests, 2 server
        errors, 3 rate-limit refusals)."""
        out = []
        pts = list(self.points)
        for a, b in itertools.pairwise(pts):
            elapsed = b[0] - a[0]
            out.append(60 * max(b[column] - a[column], 0.0) / elapsed if elapsed > 0 else 0.0)
        return out
