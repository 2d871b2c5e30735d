"""`framework.lifecycle.Lifecycle`: a state moves only along its table, an illegal move
names both states, and a table must cover its enum."""

from __future__ import annotations

from enum import Enum

import pytest

from framework.errors import SampanError
from framework.lifecycle import IllegalTransitionError, Lifecycle


class Light(Enum):
    OFF = "off"
    ON = "on"
    BROKEN = "broken"


TABLE = {Light.OFF: {Light.ON}, Light.ON: {Light.OFF, Light.BROKEN}, Light.BROKEN: set()}


def test_legal_moves_change_the_state_and_tell_the_listener() -> None:
    moves: list[tuple[str, str]] = []
    light = Lifecycle("lamp", Light.OFF, TABLE, lambda a, b: moves.append((a.name, b.name)))
    light.to(Light.ON)
    light.to(Light.OFF)
    light.to(Light.ON)
    light.to(Light.BROKEN)
    assert light.state is Light.BROKEN
    assert moves == [("OFF", "ON"), ("ON", "OFF"), ("OFF", "ON"), ("ON", "BROKEN")]


def test_an_illegal_move_raises_naming_both_states_and_changes_nothing() -> None:
    light = Lifecycle("lamp", Light.OFF, TABLE)
    with pytest.raises(IllegalTransitionError,
                       match=r"^lamp: illegal transition OFF → BROKEN \(legal from OFF: ON\); "
                             r"this is a bug in sampan"):
        light.to(Light.BROKEN)
    assert light.state is Light.OFF
    assert issubclass(IllegalTransitionError, SampanError)


def test_a_final_state_allows_no_move() -> None:
    light = Lifecycle("lamp", Light.BROKEN, TABLE)
    assert not any(light.can(state) for state in Light)
    with pytest.raises(IllegalTransitionError, match=r"legal from BROKEN: none"):
        light.to(Light.OFF)


def test_a_table_missing_a_state_is_refused() -> None:
    with pytest.raises(ValueError, match="must list every state of Light"):
        Lifecycle("lamp", Light.OFF, {Light.OFF: {Light.ON}, Light.ON: set()})
