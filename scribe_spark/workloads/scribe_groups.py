"""Scribe topic workloads: group sizes by rank and the subscribers of each topic."""
from __future__ import annotations

import numpy as np

from scribe_spark import ids
from scribe_spark.config import ScribeParams, TopicWorkload
from scribe_spark.pastry.kernels import Ring
from scribe_spark.scribe import topics as tp
from scribe_spark.streams import Purpose, stream


def group_sizes(p: TopicWorkload) -> np.ndarray:
    """Return each topic's number of subscribers: fixed, or floor(N r^-e + 0.5) for rank r."""
    return p.sizes()


def subscriptions(p, rng: np.random.Generator) -> tuple[tp.Topics, np.ndarray, np.ndarray]:
    """Return (topics, subscription topics, subscribers): `group_sizes` distinct random nodes per topic."""
    names = [f"topic-{r}" for r in range(1, p.topics + 1)]
    creators = [f"creator-{r % 100}" for r in range(1, p.topics + 1)]
    topics = tp.create(names, creators, secret=p.seed)
    sizes = group_sizes(p)
    sub_topic = np.repeat(np.arange(p.topics, dtype=np.int64), sizes)
    sub_node = np.concatenate([rng.choice(p.nodes, size=s, replace=False) for s in sizes]).astype(np.int64)
    return topics, sub_topic, sub_node


def requests(p: ScribeParams, rng: np.random.Generator):
    """Return (topics, subscription topics, subscribers, (topics, nodes) of wrong-credential requests)."""
    topics, sub_topic, sub_node = subscriptions(p, rng)
    bogus = int(round(p.bad_credentials * len(sub_topic)))
    bad_topic = rng.integers(0, p.topics, bogus)
    bad_node = rng.integers(0, p.nodes, bogus)
    return topics, sub_topic, sub_node, (bad_topic, bad_node)


def creators(p: ScribeParams, publisher: np.ndarray, sub_topic: np.ndarray,
             sub_node: np.ndarray) -> np.ndarray:
    """Return each topic's creator node for `topic_root`: its publisher, or one of its members at random."""
    if p.topic_root == "creator_publisher":
        return publisher
    start = np.searchsorted(sub_topic, np.arange(p.topics))    # subscriptions come sorted by topic
    size = np.bincount(sub_topic, minlength=p.topics)
    return sub_node[start + stream(p.seed, Purpose.CREATORS, p.nodes).integers(0, size)]


def rooted_at(topics: tp.Topics, ring: Ring, creator: np.ndarray, secret: int) -> tp.Topics:
    """Return the same topics named after their creator nodes (Scribe's creator-as-root naming)."""
    names = list(ids.to_hex(ring.hi[creator], ring.lo[creator]))
    return tp.creator_rooted(topics.name, ring.hi[creator], names, secret)
