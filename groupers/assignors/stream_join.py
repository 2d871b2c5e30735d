"""Stream-join sticky assignor: Kafka KIP-315 (seed 000_f5a1c20b2ec931bc).

A stream-to-stream join needs partition *n* of every joined topic on the same member.
The assignor therefore hands out partition **numbers**: a member given number ``n``
consumes partition ``n`` of every topic it subscribes to. It follows the document's
steps: eligible numbers are ``0 .. min(partition count of every subscribed topic) - 1``;
previous ownership comes with each member's subscription and is settled by epoch;
members then draft numbers one by one (own first, then unowned, then stolen); every
member's result carries the epoch ``max(subscription epochs) + 1``.

Where this deviates from the document and its example code, and why:

* Two claims of one number at the same highest epoch: **neither** member keeps it (the
  number becomes unowned). One assignment never gives a number to two members, so such
  claims cannot both be current and neither can be trusted; this is also Kafka's rule and
  what `groupers.assignors.sticky` does.
* Draft quotas are fixed before the draft: ``eligible // members`` each, and the
  ``eligible % members`` extra numbers go to the members holding the most valid previous
  numbers (ties: smaller member id), which is where an extra number keeps most state.
* Stealing takes from the member whose remaining previous numbers exceed its remaining
  picks the most (the document's "longest list", refreshed after every steal; the
  example code computes it once and can steal from an exhausted list), and takes that
  member's highest number so it keeps the ones it drafts first.
* A number equal to the eligible count is not eligible (the example code's check is off
  by one). Negative owned numbers are an error; numbers beyond the eligible range are
  dropped, as the document says.
* A member that subscribes to no topic takes no numbers (they would consume nothing); it
  still appears in the result, and its claims still out-rank lower-epoch claims.

    >>> import groupers as G
    >>> first = G.StreamJoinStickyAssignor().assign({"clicks": 4, "impressions": 4}, {
    ...     "A": G.JoinSubscription(["clicks", "impressions"]),
    ...     "B": G.JoinSubscription(["clicks", "impressions"])})
    >>> first["A"].partition_numbers, first["B"].partition_numbers, first["A"].epoch
    ((0, 2), (1, 3), 0)
    >>> [str(tp) for tp in first["B"].topic_partitions]
    ['clicks-1', 'clicks-3', 'impressions-1', 'impressions-3']
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping

from groupers.errors import AssignmentError
from groupers.model import JoinAssignment, JoinSubscription, TopicPartition

__all__ = ["StreamJoinStickyAssignor"]


class StreamJoinStickyAssignor:
    """KIP-315: co-partitioned, balanced (sizes differ by at most one) and sticky.

    Stateless: what each member owned, and the epoch of that assignment, come in with its
    `JoinSubscription`.
    """

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, JoinSubscription],
    ) -> dict[str, JoinAssignment]:
        """Member → its partition numbers, their topic partitions and the new epoch."""
        members = sorted(subscriptions)
        if not members:
            return {}
        eligible = eligible_partition_count(partitions_per_topic, subscriptions)
        drafting = [member for member in members if subscriptions[member].topics]
        owned = previous_ownership(subscriptions, eligible, set(drafting))
        numbers = draft(eligible, drafting, owned)
        epoch = max(subscriptions[member].epoch for member in members) + 1
        result: dict[str, JoinAssignment] = {}
        for member in members:
            mine = tuple(sorted(numbers.get(member, ())))
            topics = sorted(subscriptions[member].topics)
            result[member] = JoinAssignment(
                partition_numbers=mine,
                topic_partitions=tuple(TopicPartition(t, n) for t in topics for n in mine),
                epoch=epoch,
            )
        return result


def eligible_partition_count(
    partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, JoinSubscription]
) -> int:
    """Step 1: the smallest partition count over every topic anyone subscribes to."""
    for topic in sorted(partitions_per_topic):
        if partitions_per_topic[topic] < 0:
            raise AssignmentError(
                f"topic {topic!r} has a negative partition count "
                f"({partitions_per_topic[topic]}); pass 0 for a topic that does not exist"
            )
    counts: list[int] = []
    for member in sorted(subscriptions):
        for topic in sorted(subscriptions[member].topics):
            if topic not in partitions_per_topic:
                raise AssignmentError(
                    f"member {member!r} subscribes to topic {topic!r}, which is missing from "
                    "partitions_per_topic; pass its partition count (0 if it does not exist)"
                )
            counts.append(partitions_per_topic[topic])
    return min(counts, default=0)


def previous_ownership(
    subscriptions: Mapping[str, JoinSubscription], eligible: int, drafting: set[str]
) -> dict[str, list[int]]:
    """Step 2: drafting member → the eligible numbers it validly owned, ascending.

    The claim with the highest epoch wins a number; a tie at the highest epoch leaves the
    number unowned.
    """
    best: dict[int, tuple[int, str | None]] = {}
    for member in sorted(subscriptions):
        subscription = subscriptions[member]
        for number in sorted(subscription.owned):
            if number < 0:
                raise AssignmentError(
                    f"member {member!r} claims partition number {number}; "
                    "owned partition numbers must be >= 0"
                )
            if number >= eligible:
                continue
            held = best.get(number)
            if held is None or subscription.epoch > held[0]:
                best[number] = (subscription.epoch, member)
            elif subscription.epoch == held[0]:
                best[number] = (held[0], None)
    owned: dict[str, list[int]] = {member: [] for member in sorted(drafting)}
    for number in sorted(best):
        holder = best[number][1]
        if holder is not None and holder in drafting:
            owned[holder].append(number)
    return owned


def draft(
    eligible: int, drafting: list[str], owned: Mapping[str, list[int]]
) -> dict[str, list[int]]:
    """Steps 3–4: members pick one number per round until every eligible number is taken.

    A member picks its lowest remaining previous number, else the lowest unowned number,
    else steals the highest remaining number of the member with the largest surplus
    (remaining previous numbers minus remaining picks). Members still holding previous
    numbers pick first in each round.
    """
    if not drafting:
        return {}
    base, extra = divmod(eligible, len(drafting))
    by_holdings = sorted(drafting, key=lambda member: (-len(owned[member]), member))
    picks_left = {member: base + (1 if rank < extra else 0)
                  for rank, member in enumerate(by_holdings)}
    own = {member: deque(owned[member]) for member in drafting}
    taken = {number for numbers in owned.values() for number in numbers}
    unowned = deque(number for number in range(eligible) if number not in taken)
    # Heap of (-surplus, -previous holdings, member). A member with a surplus always picks
    # its own number, which lowers its remaining numbers and picks alike, so a surplus
    # changes only when stolen from and the entries never go stale.
    victims = [(picks_left[m] - len(own[m]), -len(owned[m]), m)
               for m in drafting if len(own[m]) > picks_left[m]]
    heapq.heapify(victims)

    result: dict[str, list[int]] = {member: [] for member in drafting}
    for _ in range(max(picks_left.values())):
        order = sorted((m for m in drafting if picks_left[m] > 0),
                       key=lambda member: (not own[member], member))
        for member in order:
            if own[member]:
                number = own[member].popleft()
            elif unowned:
                number = unowned.popleft()
            else:
                negated_surplus, negated_held, victim = heapq.heappop(victims)
                number = own[victim].pop()
                if negated_surplus + 1 < 0:
                    heapq.heappush(victims, (negated_surplus + 1, negated_held, victim))
            result[member].append(number)
            picks_left[member] -= 1
    return result
