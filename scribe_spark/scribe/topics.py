"""Scribe topics: topicId = SHA-1(name || creator) or creator-rooted, credentials, rendez-vous points."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import functions as F

from scribe_spark.columns import NODE, TOPIC
from scribe_spark.spark.arrow import local_frame


def topic_id(name: str, creator: str) -> tuple[int, int]:
    """Return the 128-bit topicId (hi, lo): the first 128 bits of SHA-1(name || creator)."""
    digest = hashlib.sha1((name + creator).encode()).digest()
    return int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:16], "big")


def credential(name: str, creator: str, secret: int) -> str:
    """Return the credential that gates create/subscribe/publish on a topic."""
    return hashlib.sha1(f"{secret}:{name}:{creator}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Topics:
    """A set of created topics: number t has name[t], creator[t], id (hi[t], lo[t]), credential."""

    name: list[str]
    creator: list[str]
    hi: np.ndarray
    lo: np.ndarray
    cred: list[str]

    @property
    def n(self) -> int:
        return len(self.name)

    def cred_numbers(self) -> np.ndarray:
        """Return each topic's credential as the 64-bit number its 16 hex digits spell (int64)."""
        return np.array([int(c, 16) for c in self.cred], dtype=np.uint64).view(np.int64)


def forged(cred_numbers: np.ndarray) -> np.ndarray:
    """Return credentials that are certainly wrong: the given ones with every bit flipped."""
    return ~cred_numbers


def create(names: list[str], creators: list[str], secret: int) -> Topics:
    """Create topics (the creator's credential becomes the topic's access credential)."""
    pairs = [topic_id(n, c) for n, c in zip(names, creators)]
    hi = np.array([p[0] for p in pairs], dtype=np.uint64)
    lo = np.array([p[1] for p in pairs], dtype=np.uint64)
    if len(set(pairs)) != len(pairs):
        raise ValueError("two topics have the same topicId (same name and creator)")
    return Topics(list(names), list(creators), hi, lo,
                  [credential(n, c, secret) for n, c in zip(names, creators)])


def creator_rooted(names: list[str], creator_hi: np.ndarray, creators: list[str], secret: int) -> Topics:
    """Create topics named after their creator node: topicId = its id's first 64 bits, then SHA-1(name)'s.

    Scribe's alternative naming: the topicId shares the creator's nodeId prefix, so the creator
    (or a node numerically next to it) is the root; `creators` are the creators' names (ids).
    """
    lo = np.array([int.from_bytes(hashlib.sha1(n.encode()).digest()[:8], "big") for n in names],
                  dtype=np.uint64)
    hi = np.asarray(creator_hi, dtype=np.uint64)
    if len(set(zip(hi.tolist(), lo.tolist()))) != len(names):
        raise ValueError("two topics have the same topicId (same name and creator)")
    return Topics(list(names), list(creators), hi, lo,
                  [credential(n, c, secret) for n, c in zip(names, creators)])


def admit(spark, topics: Topics, topic: np.ndarray, node: np.ndarray, cred: np.ndarray):
    """Admit requests whose credential matches the topic's; return (accepted (topic, node), refused count).

    Credentials travel as numbers (`Topics.cred_numbers`): equal numbers are equal credentials.
    """
    req = local_frame(spark, pd.DataFrame({TOPIC: topic.astype(np.int64), NODE: node.astype(np.int64),
                                           "cred": np.asarray(cred, dtype=np.int64)}))
    return admit_frame(req, acl_frame(spark, topics))


def acl_frame(spark, topics: Topics):
    """Each topic's credential number, as a frame (topic, acl)."""
    return local_frame(spark, pd.DataFrame({TOPIC: np.arange(topics.n, dtype=np.int64),
                                            "acl": topics.cred_numbers()}))


def admit_frame(req, acl):
    """`admit` for requests (topic, node, cred) already in a frame, against the topics' `acl_frame`."""
    checked = (req.join(F.broadcast(acl), TOPIC).withColumn("ok", F.col("cred") == F.col("acl"))
               .localCheckpoint())
    refused = checked.where(~F.col("ok")).count()
    accepted = checked.where("ok").select(TOPIC, NODE).distinct().localCheckpoint()
    return accepted, refused
