"""General path of the KIP-54 sticky assignor: members subscribe to different topics.

Implements the document's algorithm on partition indexes (``base[topic] + partition``,
topics in sorted order) and member indexes (member names in sorted order):

1. keep each member's valid owned partitions (settled by the caller);
2. give every unassigned partition, fewest potential consumers first, to the member with
   the fewest partitions that can take it;
3. reassignment loop: while some partition's owner holds at least two more partitions
   than another member that could take it, move it to the smallest such member;
4. if the loop moved something but the balance score did not drop, undo the loop;
5. remove A → B → A cycles (below).

Deviations, and why:

* The document's "fixed consumers" step only shrinks the problem; here such members are
  skipped naturally (nothing can move to or from them), so it is left out.
* Within one pass the loop looks first at partitions that are not with their original
  owner (moving them costs no stickiness), then by fewest potential consumers as in the
  document.
* Every move the loop makes lowers the balance score by at least 2 (a move from a member
  of size ``a`` to one of size ``b <= a - 2``), so the loop ends, and step 4 is a guard.
* Kafka tracks partition movements to avoid cycles; instead, after balancing, each topic's
  moves are shortened: if one partition of the topic moved X → Y and another moved
  Y → Z, the first goes X → Z and the second stays at Y (both home when X == Z). Sizes
  and each member's topics are unchanged, so balance is too, and fewer partitions move.
  At the end no member both gains and loses partitions of the same topic.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Sequence
from itertools import accumulate, compress
from operator import ne

__all__ = ["assign_general", "balance_score"]


def balance_score(sizes: Sequence[int]) -> int:
    """The document's balance score: sum over member pairs of the size difference."""
    ordered = sorted(sizes)
    n = len(ordered)
    return sum(size * (2 * i - n + 1) for i, size in enumerate(ordered))


def assign_general(
    counts: Sequence[int],
    member_topics: Sequence[Sequence[int]],
    owned: Sequence[Sequence[int]],
) -> list[list[int]]:
    """Per member, the partition indexes it gets; ``owned`` must be valid and disjoint."""
    bases = [0, *accumulate(counts)]
    subscribers: list[list[int]] = [[] for _ in counts]
    for m, topics in enumerate(member_topics):
        for t in topics:
            subscribers[t].append(m)
    original = [-1] * bases[-1]
    for m, mine in enumerate(owned):
        for g in mine:
            original[g] = m
    owner = list(original)
    sizes = [len(mine) for mine in owned]

    _assign_unowned(owner, sizes, subscribers, bases)
    settled = list(owner)
    settled_score = balance_score(sizes)
    if _rebalance(owner, sizes, original, subscribers, member_topics, bases):
        new_score = balance_score(sizes)
        if new_score >= settled_score:
            owner = settled
    moved = list(compress(range(bases[-1]), map(ne, owner, original)))
    for t in range(len(counts)):
        lo, hi = bisect_left(moved, bases[t]), bisect_left(moved, bases[t + 1])
        if hi - lo > 1:
            _shorten_moves(owner, original, moved[lo:hi])

    assigned: list[list[int]] = [[] for _ in member_topics]
    for g, m in enumerate(owner):
        if m >= 0:
            assigned[m].append(g)
    return assigned


def _assign_unowned(
    owner: list[int], sizes: list[int], subscribers: Sequence[Sequence[int]], bases: Sequence[int]
) -> None:
    """Step 2: each unowned partition to its least-loaded potential consumer."""
    by_scarcity = sorted(
        (len(subs), t) for t, subs in enumerate(subscribers) if subs
    )
    for _, t in by_scarcity:
        unowned = [g for g in range(bases[t], bases[t + 1]) if owner[g] == -1]
        if not unowned:
            continue
        heap = [(sizes[m], m) for m in subscribers[t]]
        heapq.heapify(heap)
        for g in unowned:
            size, m = heapq.heappop(heap)
            owner[g] = m
            sizes[m] = size + 1
            heapq.heappush(heap, (size + 1, m))


def _rebalance(
    owner: list[int],
    sizes: list[int],
    original: Sequence[int],
    subscribers: Sequence[Sequence[int]],
    member_topics: Sequence[Sequence[int]],
    bases: Sequence[int],
) -> bool:
    """Step 3: move partitions to members at least two smaller; True if anything moved."""
    # Members that can take some partition, ordered by (size, member): the smallest first.
    ranked = sorted((sizes[m], m) for m, topics in enumerate(member_topics) if topics)
    if not ranked or ranked[-1][0] - ranked[0][0] <= 1:
        return False
    topic_of: list[int] = []
    for t in range(len(subscribers)):
        topic_of.extend([t] * (bases[t + 1] - bases[t]))
    takes = [frozenset(topics) for topics in member_topics]
    movable = [g for g, m in enumerate(owner) if m >= 0 and len(subscribers[topic_of[g]]) > 1]
    moved_any = False
    while True:
        # Only an owner two above the smallest member can give; one that grows into a
        # giver during this pass is seen by the next.
        floor = ranked[0][0]
        candidates = [g for g in movable if sizes[owner[g]] - floor >= 2]
        candidates.sort(
            key=lambda g: (owner[g] == original[g], len(subscribers[topic_of[g]]), g)
        )
        moved = False
        for g in candidates:
            if ranked[-1][0] - ranked[0][0] <= 1:
                break
            giver = owner[g]
            taker = _smallest_taker(ranked, sizes[giver] - 2, topic_of[g], takes)
            if taker == -1:
                continue
            for m, delta in ((giver, -1), (taker, 1)):
                del ranked[bisect_left(ranked, (sizes[m], m))]
                sizes[m] += delta
                insort(ranked, (sizes[m], m))
            owner[g] = taker
            moved = True
        moved_any = moved_any or moved
        if not moved:
            return moved_any


def _smallest_taker(
    ranked: Sequence[tuple[int, int]], limit: int, topic: int, takes: Sequence[frozenset[int]]
) -> int:
    """The smallest member with at most ``limit`` partitions subscribing to ``topic``, or -1."""
    for size, m in ranked:
        if size > limit:
            break
        if topic in takes[m]:
            return m
    return -1


def _shorten_moves(owner: list[int], original: Sequence[int], moved: Sequence[int]) -> None:
    """Step 5 for one topic's ``moved`` partitions: X → Y, Y → Z becomes X → Z.

    Afterwards no member both gains and loses partitions of the topic.
    """
    gains: dict[int, list[int]] = {}
    losses: dict[int, list[int]] = {}
    for g in moved:
        gains.setdefault(owner[g], []).append(g)
        if original[g] >= 0:
            losses.setdefault(original[g], []).append(g)
    # Shortening never makes a member a relay, so the relays can be listed once.
    for relay in sorted(m for m in gains if m in losses):
        while gains[relay] and losses[relay]:
            arrived = gains[relay].pop(0)  # came from its original owner X (or was unowned)
            left = losses[relay].pop(0)  # went from the relay to Z
            destination = owner[left]
            gains[destination].remove(left)
            owner[left] = relay
            owner[arrived] = destination
            if original[arrived] == destination:
                losses[destination].remove(arrived)
            else:
                insort(gains[destination], arrived)
