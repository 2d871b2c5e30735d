"""The hosts reach aiokafka's private group coordinator only through
`membership.group_coordinator`: an aiokafka without the hooks fails with a `HostError`
naming the release and the fix, and the installed (pinned) release has them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import aiokafka
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.consumer.group_coordinator import GroupCoordinator

from framework.hosts.errors import AiokafkaUnsupportedError, HostError
from framework.hosts.membership import COORDINATOR_HOOKS, group_coordinator


def test_the_pinned_aiokafka_has_every_hook() -> None:
    for hook in COORDINATOR_HOOKS:
        assert callable(getattr(GroupCoordinator, hook, None)), hook


def test_a_consumer_without_a_group_coordinator_names_the_release_and_the_fix() -> None:
    async def check() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9", group_id="g")  # unstarted
        with pytest.raises(AiokafkaUnsupportedError) as raised:
            group_coordinator(consumer)
        assert isinstance(raised.value, HostError)
        text = str(raised.value)
        assert f"aiokafka {aiokafka.__version__} has no group coordinator " \
               "consumer._coordinator" in text
        assert "pip install 'aiokafka>=0.14,<0.15'" in text

    asyncio.run(check())


def test_a_coordinator_missing_a_hook_names_it() -> None:
    old = SimpleNamespace(_coordinator=SimpleNamespace(request_rejoin=lambda: None))
    with pytest.raises(AiokafkaUnsupportedError, match="has no group coordinator "
                       "_maybe_leave_group, which sampan hosts use"):
        group_coordinator(old)
