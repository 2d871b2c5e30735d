"""Small helpers to build metric families from plain figures at scrape time."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.utils import floatToGoString

from framework.metrics.families import FAMILIES, Family

__all__ = ["WeightedHistogram", "family", "histogram_family", "histogram_of"]

_BY_NAME = {f.name: f for f in FAMILIES}


def family(name: str) -> CounterMetricFamily | GaugeMetricFamily:
    """An empty counter or gauge family of ``name`` (one of `FAMILIES`), with its labels
    and help; a histogram's name is refused (`histogram_family` builds those)."""
    spec: Family = _BY_NAME[name]
    if spec.kind == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    if spec.kind == "gauge":
        return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
    raise ValueError(f"metric {name!r} is a {spec.kind}: build it with histogram_family")


def histogram_family(name: str) -> HistogramMetricFamily:
    """An empty histogram family of ``name`` (one of `FAMILIES`), with its labels and help."""
    spec: Family = _BY_NAME[name]
    if spec.kind != "histogram":
        raise ValueError(f"metric {name!r} is a {spec.kind}: build it with family")
    return HistogramMetricFamily(spec.name, spec.help, labels=spec.labels)


class WeightedHistogram:
    """Histogram buckets that take ``n`` equal observations in one call: a batch of ``n``
    records costs one bisect, not ``n`` observations (the hot path stays cheap)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum = 0.0

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += n
        self.sum += value * n

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs, ``+Inf`` last, as Prometheus wants them."""
        counts = list(self.counts)  # one copy: a consistent view while the worker writes
        result, running = [], 0
        for bound, count in zip((*map(floatToGoString, self.bounds), "+Inf"), counts,
                                strict=True):
            running += count
            result.append((bound, float(running)))
        return result


def histogram_of(values: Iterable[float], bounds: Sequence[float]) -> WeightedHistogram:
    """A histogram of ``values`` (computed at scrape from a few recorded figures)."""
    histogram = WeightedHistogram(bounds)
    for value in values:
        histogram.observe(value)
    return histogram
