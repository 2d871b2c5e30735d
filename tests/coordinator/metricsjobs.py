"""Helpers of the metrics tests: scrape a job's /metrics endpoints and read their samples."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable

from jobs.runs import CountJob
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str) -> Samples:
    """Every sample of one endpoint, parsed with prometheus_client's own parser."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def values(samples: Samples, name: str, **labels: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return {found: value for (metric, found), value in samples.items()
            if metric == name and wanted <= found}


def total(samples: Iterable[Samples], name: str, **labels: str) -> float:
    return sum(sum(values(s, name, **labels).values()) for s in samples)


async def endpoints(job: CountJob) -> tuple[str, dict[int, str]]:
    """The coordinator's and the current workers' /metrics URLs, as the job reports them."""
    state = await job.state()
    assert state.model is not None and state.status.metrics_port
    workers = {w: f"http://127.0.0.1:{p.metrics_port}/metrics"
               for w, p in state.progress.items()
               if w < state.model.workers and p.metrics_port and p.epoch == state.model.epoch}
    return f"http://127.0.0.1:{state.status.metrics_port}/metrics", workers
