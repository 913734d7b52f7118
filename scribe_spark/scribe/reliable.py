"""Scribe's reliable, ordered extension over rounds: which events reach whom, and when."""
from __future__ import annotations

import numpy as np
import pandas as pd

from scribe_spark.columns import NODE, TOPIC


def deliveries(pub: np.ndarray, subs: pd.DataFrame, root_dead: np.ndarray, lost: np.ndarray,
               fail_round: int, timeout: int, buffer: int, reliable: bool) -> pd.DataFrame:
    """Return the delivery log (topic, node, event, seq, published, round), in delivery order.

    pub[t, r]: topic t publishes in round r. subs: (topic, node, joined) for the live
    subscribers; `joined` = still joined to a live root during the outage [fail, back).
    """
    fail, back = fail_round, fail_round + timeout
    rows = []
    for t in range(pub.shape[0]):
        rounds = np.flatnonzero(pub[t])
        s = subs[subs[TOPIC] == t]
        if s.empty or not len(rounds):
            continue
        nodes, joined = s[NODE].to_numpy(), s["joined"].to_numpy()
        seq, out = 0, []      # out: (event, seq, published, round, who, kind) with who a node mask
        everyone = np.ones(len(nodes), dtype=bool)
        recent = []           # (event, seq, published) numbered by the live root during the outage
        for e, r in enumerate(rounds):
            if r < fail:
                seq += 1
                out.append((e, seq, r, r, everyone, 1))
            elif r < back:
                if root_dead[t]:
                    # the publisher keeps it; at `back` the new root numbers it next
                    if reliable and not lost[t]:
                        seq += 1
                        out.append((e, seq, r, back, everyone, 0))
                    continue
                seq += 1
                out.append((e, seq, r, r, joined, 1))
                recent.append((e, seq, r))
            elif not lost[t]:
                seq += 1
                out.append((e, seq, r, r, everyone, 1))
        if reliable and recent:
            # subscribeHandler at the graft point: its buffer holds the last `buffer` events it received
            keep = recent[max(0, len(recent) - buffer):] if buffer else []
            for he, hs, hr in keep:
                out.append((he, hs, hr, back, ~joined, 0))
        for e, sq, pr, dr, who, kind in out:
            k = int(who.sum())
            if k:
                rows.append(pd.DataFrame({TOPIC: t, NODE: nodes[who], "event": e, "seq": sq, "published": pr,
                                          "round": dr, "kind": kind}))
    cols = [TOPIC, NODE, "event", "seq", "published", "round", "kind"]
    if not rows:
        return pd.DataFrame(columns=cols)
    log = pd.concat(rows, ignore_index=True)
    # delivery order: by round; at round `back` retransmissions (kind 0) come before that round's own event,
    # in the order they were sent
    return log.sort_values(["round", "kind", "seq"], kind="stable").reset_index(drop=True)[cols]
