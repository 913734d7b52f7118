"""Scribe topic workloads: group sizes by rank and the subscribers of each topic."""
from __future__ import annotations

import numpy as np

from scribe_spark import ids
from scribe_spark.config import TopicWorkload
from scribe_spark.pastry.kernels import Ring
from scribe_spark.scribe import topics as tp


def group_sizes(p: TopicWorkload) -> np.ndarray:
    """Return each topic's number of subscribers: fixed, or floor(N r^-e + 0.5) for rank r."""
    return p.sizes()


def named_topics(p: TopicWorkload) -> tp.Topics:
    """The run's topics: topic-1 .. topic-T, created by creator-(r mod 100), credentials keyed by the seed."""
    names = [f"topic-{r}" for r in range(1, p.topics + 1)]
    creators = [f"creator-{r % 100}" for r in range(1, p.topics + 1)]
    return tp.create(names, creators, secret=p.seed)   # type: ignore[attr-defined]


def subscriptions(p, rng: np.random.Generator) -> tuple[tp.Topics, np.ndarray, np.ndarray]:
    """Return (topics, subscription topics, subscribers): `group_sizes` distinct random nodes per topic.

    The small jobs (S3, churn) draw them in the driver; S1 and S2 in Spark (`spark_groups`).
    """
    sizes = group_sizes(p)
    sub_topic = np.repeat(np.arange(p.topics, dtype=np.int64), sizes)
    sub_node = np.concatenate([rng.choice(p.nodes, size=s, replace=False) for s in sizes]).astype(np.int64)
    return named_topics(p), sub_topic, sub_node


def rooted_at(topics: tp.Topics, ring: Ring, creator: np.ndarray, secret: int) -> tp.Topics:
    """Return the same topics named after their creator nodes (Scribe's creator-as-root naming)."""
    names = list(ids.to_hex(ring.hi[creator], ring.lo[creator]))
    return tp.creator_rooted(topics.name, ring.hi[creator], names, secret)
