"""The random streams of a run, named by purpose.

Every draw of a run comes from a NumPy generator seeded with [seed, *scope, purpose]: the run's
`seed`, what the stream belongs to (an overlay size, a popularity model, nothing) and the number
of its purpose below. Streams are independent of each other and of the order in which a run asks
for them, so a run gives the same tables whatever it computes first or resumes from. Experiments
are separate runs, so two of them may use the same number for different purposes.
"""
from __future__ import annotations

import numpy as np


class Purpose:
    """The number that names a stream's purpose (the last entry of its seed)."""

    NETWORK = 0              # the transit-stub router graph (scope: none)
    LOOKUPS = 1              # lookup sources and keys
    JOIN_ORDER = 2           # pastry_joins: which nodes join in which batch
    SUBSCRIPTIONS = 2        # S3, churn: each topic's subscribers (S1/S2 draw with MEMBERS)
    PUBLISHERS = 3           # Scribe: the node that publishes each topic's event
    CREATORS = 4             # Scribe: each topic's creator, when the creator is the root
    FAILURES = 5             # pastry_failures: who fails, and the lookups after
    WORKLOAD = 7             # scribe_repair, tno_ordering: failures, topics and subscriptions
    PUBLICATIONS = 8         # tno_ordering, churn: publication times, publishers and topics
    SEQUENCER_DELAYS = 9     # tno_ordering: the sequencer's link delays
    RECOVERY = 10            # tno_ordering: gap recovery's delays
    CHURN = 11               # churn: sessions, crashes and lookups
    KEYS = 11                # tno_ordering: the keys of the ENS's jitter and loss draws
    GROWTH = 12              # overlay = joined: the order in which nodes join (P1/P2, S1/S2)
    MEMBERS = 13             # S1/S2: each topic's subscribers per chunk of nodes (scope: topic[, chunk])
    FORGED = 14              # S1/S2: requests with forged credentials (scope: block)
    LEAVES = 15              # churn: who leaves gracefully (nodes)
    RING = 16                # the ring's blocks after the first (scope: nodes, block)
    LOOKUP_BLOCKS = 17       # lookups' later blocks (scope: their first block's scope and purpose, block)
    RETURNS = 18             # churn: which departed nodes come back, and after how long (nodes)
    SESSIONS = 19            # churn: the sessions after a return, how they end (nodes, round)
    START = 20               # churn: who is down at a steady start, and for how long (nodes)
    ARRIVALS = 21            # churn: newcomers' arrivals, sessions and returns (nodes[, round])


def stream(seed: int, purpose: int | None, *scope: int) -> np.random.Generator:
    """The generator of one purpose of a run: seeded with [seed, *scope, purpose].

    The ring of an overlay of N nodes (ids and locations) is `stream(seed, None, N)`, and a sweep
    point's workload may be named by its scope alone: their seeds have no purpose entry.
    """
    return np.random.default_rng([seed, *scope] + ([] if purpose is None else [purpose]))
