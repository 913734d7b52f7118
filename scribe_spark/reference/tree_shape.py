"""Scribe trees checked without the Pastry state: roots, one parent per member, reachability, no cycles.

For runs too large to collect the routing tables (the sequential Scribe needs them), this
checks what must hold of any Scribe tree, on a sample of topics:
- every node number is a node of the ring;
- the topic has one root, and it is the numerically closest node to the topicId;
- every node in the tree has at most one parent, and the root has none;
- following parents from every subscriber and every child ends at the root (so no cycles);
- every subscriber is in the tree.
It assumes every node is alive and every sampled topic has a subscriber (else it has no tree).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from scribe_spark.pastry.kernels import Ring
from scribe_spark.reference.closest import closest_live

CHECKS = ("bad_ids", "roots", "wrong_root", "two_parents", "root_has_parent", "unreached",
          "missing_subscribers")


def tree_faults(ring: Ring, key_hi: np.ndarray, key_lo: np.ndarray, topics: np.ndarray,
                edges: pd.DataFrame, roots: pd.DataFrame, sub_topic: np.ndarray,
                sub_node: np.ndarray) -> dict[str, int]:
    """Return, for each check in CHECKS, how many fail it in `topics` (all zero: correct).

    Counted are: rows naming a node outside the ring (bad_ids, left out of the other checks);
    topics (roots, wrong_root, root_has_parent); members with more than one parent (two_parents);
    children and subscribers that do not reach their root (unreached); subscribers not in the tree.
    `key_hi`, `key_lo` are every topic's id; `edges` (topic, src = child, dst = parent) and
    `roots` (topic, node) may hold other topics too, as may the subscriptions (sub_topic, sub_node).
    """
    topics = np.unique(np.asarray(topics, dtype=np.int64))
    n = np.int64(ring.n)
    faults = dict.fromkeys(CHECKS, 0)

    def on_ring(*cols: np.ndarray) -> np.ndarray:
        ok = np.logical_and.reduce([(np.asarray(c) >= 0) & (np.asarray(c) < n) for c in cols])
        faults["bad_ids"] += int((~ok).sum())
        return ok

    edges = edges[edges.topic.isin(topics)]
    edges = edges[on_ring(edges.src, edges.dst)]
    roots = roots[roots.topic.isin(topics)]
    roots = roots[on_ring(roots.node)]
    keep = np.isin(sub_topic, topics)
    st, sn = np.asarray(sub_topic)[keep].astype(np.int64), np.asarray(sub_node)[keep].astype(np.int64)
    ok = on_ring(sn)
    st, sn = st[ok], sn[ok]

    per_topic = roots.groupby("topic").node.nunique().reindex(topics, fill_value=0)
    faults["roots"] = int((per_topic != 1).sum())
    root = roots.drop_duplicates("topic").set_index("topic").node.reindex(topics, fill_value=-1).to_numpy()
    closest = closest_live(ring, np.ones(ring.n, dtype=bool), key_hi[topics], key_lo[topics])
    faults["wrong_root"] = int((root != closest).sum())
    has_root = root >= 0
    root_key = np.where(has_root, topics * n + root, -1)     # -1: no member's number, so none reaches it

    # (topic, node) as one number; a member's parent is an index into `member`, -1 where it has none
    child = edges.topic.to_numpy() * n + edges.src.to_numpy()
    par = edges.topic.to_numpy() * n + edges.dst.to_numpy()
    keys = np.concatenate([child, par, root_key[has_root], st * n + sn])
    member, inv = np.unique(keys, return_inverse=True)
    e, r = len(child), int(has_root.sum())
    ci, pi, ri, si = inv[:e], inv[e:2 * e], inv[2 * e:2 * e + r], inv[2 * e + r:]
    linked = np.unique(ci * len(member) + pi)            # distinct (child, parent) links
    faults["two_parents"] = int((np.bincount(linked // len(member)) > 1).sum())
    parent = np.full(len(member), -1, dtype=np.int64)
    parent[ci] = pi
    faults["root_has_parent"] = int((parent[ri] >= 0).sum())

    # pointer doubling: after ceil(log2(members)) + 1 rounds every chain without a cycle has ended
    top = np.where(parent >= 0, parent, np.arange(len(member)))
    for _ in range(int(np.ceil(np.log2(max(len(member), 2)))) + 1):
        top = top[top]
    ended = parent[top] < 0
    own_root = root_key[np.searchsorted(topics, member // n)]
    starts = np.unique(np.concatenate([ci, si]))
    faults["unreached"] = int((~ended[starts] | (member[top[starts]] != own_root[starts])).sum())

    in_tree = np.zeros(len(member), dtype=bool)
    in_tree[ci] = True
    in_tree[ri] = True
    faults["missing_subscribers"] = int((~in_tree[np.unique(si)]).sum())
    return faults
