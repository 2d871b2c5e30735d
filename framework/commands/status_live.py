"""The live part of `sampan status`: scrape the job's ``/metrics`` endpoints, and the
figures read from the coordinator stream (restore ETA, expansion pause)."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from framework.commands.status_document import Endpoints, ExpansionRow, RestoreRow
from framework.metadata import CoordinatorState
from framework.metrics.server import endpoint_url

__all__ = ["endpoints", "expansions", "restoring", "scrape_rates"]

SCRAPE_TIMEOUT_S = 1.0


def endpoints(state: CoordinatorState, bind: str) -> Endpoints:
    """The ``/metrics`` URLs of the coordinator and of each current worker."""
    status, model = state.status, state.model
    workers = model.workers if model is not None else 0
    address = status.metrics_bind or bind
    return Endpoints(
        endpoint_url(address, status.metrics_port) if status.metrics_port else None,
        {str(w): endpoint_url(address, p.metrics_port)
         for w, p in sorted(state.progress.items()) if w < workers and p.metrics_port},
        hosts={name: endpoint_url(bind, r.metrics_port)
               for name, r in sorted(state.hosts.items()) if r.metrics_port})


def restoring(state: CoordinatorState) -> list[RestoreRow]:
    """Restores in progress of the current epoch, with their ETA in seconds."""
    epoch = state.model.epoch if state.model is not None else None
    rows = []
    for worker, progress in sorted(state.progress.items()):
        if progress.epoch != epoch:
            continue
        for restore in progress.restoring:
            rows.append(RestoreRow(worker, restore, progress.updated_ms))
    return rows


def expansions(state: CoordinatorState) -> list[ExpansionRow]:
    """Applied expansions with their pause (`ExpansionRecord.pause_ms`: detection until
    every worker resumed on the new epoch, as the coordinator recorded it)."""
    rows = []
    current = state.model.epoch if state.model is not None else None
    for record in state.status.expansions:
        note = None
        if record.pause_ms is None and state.model is not None and state.model.hosts:
            note = ("pause ongoing: waiting for every host to resume"
                    if record.epoch == current else
                    "pause unknown: another rebalance came before every host resumed")
        elif record.pause_ms is None:
            note = ("pause ongoing: waiting for every worker to resume"
                    if record.epoch == current and state.status.state == "running"
                    else "pause unknown: the job restarted before every worker resumed")
        rows.append(ExpansionRow(record, note))
    return rows


def _scrape(url: str) -> dict[str, float]:
    """Task → records/s from one worker's ``sampan_task_records_per_second``; {} if unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as response:
            text = response.read().decode()
    except (OSError, urllib.error.URLError):
        return {}
    rates = {}
    for metric in text_string_to_metric_families(text):
        if metric.name == "sampan_task_records_per_second":
            for sample in metric.samples:
                rates[sample.labels["task"]] = sample.value
    return rates


async def scrape_rates(urls: list[str]) -> dict[str, float]:
    """Task → processing rate over the workers' endpoints, scraped in parallel."""
    found = await asyncio.gather(*(asyncio.to_thread(_scrape, url) for url in urls))
    return {task: rate for rates in found for task, rate in rates.items()}
