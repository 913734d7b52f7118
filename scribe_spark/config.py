"""Experiment parameters: frozen dataclasses loaded from TOML and validated in one place.

Every problem is reported as a `ConfigError` whose one-line message names the key and
the reason; jobs turn it into a non-zero exit before Spark starts or anything is written.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from scribe_spark.topology import MODELS


class ConfigError(ValueError):
    """A parameter is unknown, of the wrong type, or impossible."""


def is_file(path: str | Path) -> bool:
    """Whether `path` is a file; False also for a path the system refuses (a name too long, say)."""
    try:
        return Path(path).is_file()
    except OSError:
        return False


def is_dir(path: str | Path) -> bool:
    """Whether `path` is a folder; False also for a path the system refuses."""
    try:
        return Path(path).is_dir()
    except OSError:
        return False


@dataclass(frozen=True)
class TopologyParams:
    """Transit-stub router graph (SPEC section 5); delays in ms."""

    transit_domains: int = 10
    routers_per_transit: int = 5
    stubs_per_transit_router: int = 10
    routers_per_stub: int = 10
    edge_prob: float = 0.3
    delay_transit_transit: float = 20.0
    delay_inter_transit: float = 50.0
    delay_transit_stub: float = 5.0
    delay_stub_stub: float = 2.0

    def validate(self, at: str) -> None:
        for f in ("transit_domains", "routers_per_transit", "stubs_per_transit_router", "routers_per_stub"):
            _require(getattr(self, f) >= 1, f"{at}{f}", "must be >= 1", getattr(self, f))
        _require(0.0 <= self.edge_prob <= 1.0, f"{at}edge_prob", "must be in [0, 1]", self.edge_prob)
        for f in ("delay_transit_transit", "delay_inter_transit", "delay_transit_stub", "delay_stub_stub"):
            _require(getattr(self, f) > 0, f"{at}{f}", "must be > 0", getattr(self, f))

    @property
    def routers(self) -> int:
        t = self.transit_domains * self.routers_per_transit
        return t + t * self.stubs_per_transit_router * self.routers_per_stub


@dataclass(frozen=True)
class OverlayParams:
    """Pastry knobs of every job that builds an overlay (SPEC section 2), validated once here."""

    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    seed: int = 1
    topology: TopologyParams = field(default_factory=TopologyParams)

    def peak_nodes(self) -> int:
        """The most Pastry nodes the run holds at once (every job's parameters have `nodes`)."""
        nodes = self.nodes   # type: ignore[attr-defined]
        return max(nodes) if isinstance(nodes, tuple) else nodes

    def validate_overlay(self, nodes: int) -> None:
        """Check the Pastry keys and the proximity model for an overlay of up to `nodes` nodes."""
        _require(1 <= self.b <= 8 and 128 % self.b == 0, "b", "must be in 1..8 and divide 128", self.b)
        _require(self.leaf_set >= 2 and self.leaf_set % 2 == 0, "leaf_set", "must be an even number >= 2",
                 self.leaf_set)
        _require(self.neighborhood >= 0, "neighborhood", "must be >= 0", self.neighborhood)
        _require(self.proximity in MODELS, "proximity", f"must be one of {', '.join(MODELS)}", self.proximity)
        _require_seed(self.seed)
        self.topology.validate("topology.")


@dataclass(frozen=True)
class OnRouters(OverlayParams):
    """An overlay on the transit-stub routers: the model is fixed, not a parameter (Scribe, T3)."""

    proximity: ClassVar[str] = "transit-stub"


@dataclass(frozen=True)
class AnyProximity(OverlayParams):
    """An overlay under a proximity model the user picks, a latency matrix included."""

    proximity: str = "plane"
    matrix: str = ""

    def validate_overlay(self, nodes: int) -> None:
        """Also check the latency matrix file and that it has a site for each of `nodes` nodes."""
        super().validate_overlay(nodes)
        if self.proximity == "matrix":
            _require(bool(self.matrix), "matrix", "must name a latency matrix file when proximity = 'matrix'",
                     self.matrix)
            _require(is_file(self.matrix), "matrix", "file not found", self.matrix)
            sites = _matrix_sites(self.matrix)
            _require(nodes <= sites, "nodes", f"{nodes} nodes exceed the {sites} sites of the latency matrix",
                     nodes)


@dataclass(frozen=True)
class TopicWorkload:
    """Scribe topics of subscribers by rank: floor(N r^-size_exponent + 0.5), at least min_size, or fixed."""

    topics: int = 1500
    size_exponent: float = 1.25
    min_size: int = 1
    group_size: int = 0

    def sizes(self, ranks: int | None = None) -> np.ndarray:
        """Return the subscribers of the topics of the first `ranks` ranks (default: every topic)."""
        ranks = self.topics if ranks is None else ranks
        nodes = self.nodes   # type: ignore[attr-defined]  (every job's parameters have `nodes`)
        if self.group_size:
            return np.full(ranks, self.group_size, dtype=np.int64)
        r = np.arange(1, ranks + 1, dtype=np.float64)
        law = np.floor(nodes * r ** -self.size_exponent + 0.5).astype(np.int64)
        return np.clip(law, self.min_size, nodes)

    def validate_topics(self, nodes: int) -> None:
        """Check the topic workload for `nodes` nodes."""
        _require(self.topics >= 1, "topics", "must be >= 1", self.topics)
        _require(self.size_exponent > 0, "size_exponent", "must be > 0", self.size_exponent)
        _require(1 <= self.min_size <= nodes, "min_size", f"must be in 1..nodes ({nodes})", self.min_size)
        _require(0 <= self.group_size <= nodes, "group_size",
                 f"must be in 0..nodes ({nodes}); 0 = sizes from size_exponent", self.group_size)


@dataclass(frozen=True)
class Failures:
    """`fail_fraction`, the share of nodes that fail at once (P3, S3), and its checks."""

    fail_fraction: float = 0.10

    def validate_failures(self, nodes: int, live: int, least: str) -> int:
        """Check fail_fraction leaves `live` of `nodes` alive (`least` says why); return the failing count."""
        _require(0.0 <= self.fail_fraction < 1.0, "fail_fraction", "must be in [0, 1)", self.fail_fraction)
        failing = round(self.fail_fraction * nodes)
        _require(nodes - failing >= live, "fail_fraction", f"must leave at least {least} live nodes",
                 self.fail_fraction)
        return failing


@dataclass(frozen=True)
class Replicas:
    """`replicas`, the root's leaf-set nodes that replicate its topic state (S3, churn), and its check."""

    replicas: int = 5

    def validate_replicas(self, leaf_set: int) -> None:
        """Check the replicas fit in the leaf set."""
        _require(1 <= self.replicas <= leaf_set, "replicas", "must be in 1..leaf_set", self.replicas)


class TnoDeployment:
    """Checks of the keys T2 and T3 share: topics, popularity, chains, servers and regions."""

    topics: int
    topics_per_client: int
    popularity: str | tuple[str, ...]
    chains: tuple[str, ...]
    servers: int
    regions: int

    def validate_deployment(self) -> None:
        """Check the topics, the subscriptions per client, the chains and the sequencing servers."""
        _require_chains(self.chains)
        _require(self.topics >= 2, "topics", "must be >= 2", self.topics)
        _require(1 <= self.topics_per_client <= self.topics, "topics_per_client",
                 f"must be in 1..topics ({self.topics})", self.topics_per_client)
        _require_models(self.popularity, self.topics)
        _require(1 <= self.servers <= self.topics, "servers", f"must be in 1..topics ({self.topics})",
                 self.servers)
        _require(self.regions >= 1, "regions", "must be >= 1", self.regions)


def _matrix_sites(path: str) -> int:
    from scribe_spark.topology import load_matrix
    try:
        return len(load_matrix(path))
    except ValueError as e:
        raise ConfigError(f"key 'matrix': {e}") from None


def _require(ok: bool, key: str, reason: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"key '{key}': {reason} (got {value!r})")


def _require_seed(seed: int) -> None:
    """Check a `seed`: NumPy seeds its generators from non-negative integers only."""
    _require(seed >= 0, "seed", "must be >= 0", seed)


def _require_sweep(key: str, values: tuple, what: str | None) -> None:
    """Check a swept list: at least one `what` (None: it may be empty), and no value twice."""
    if what is not None:
        _require(len(values) > 0, key, f"must list at least one {what}", list(values))
    _require(len(set(values)) == len(values), key, "values must be distinct (each is one sweep point)",
             list(values))


def _require_partitions(partitions: int, nodes: int) -> None:
    """Check `partitions`: 0 (automatic) or a count no larger than the largest overlay."""
    _require(0 <= partitions <= nodes, "partitions", f"must be in 0..nodes ({nodes}; 0 = automatic)",
             partitions)


def _require_choices(key: str, values: tuple[str, ...], allowed, what: str) -> None:
    """Check a list of named choices: non-empty, distinct, each one of `allowed`."""
    _require(len(values) > 0 and len(set(values)) == len(values), key, f"must list distinct {what}",
             list(values))
    for v in values:
        _require(v in allowed, key, f"{what} are {', '.join(allowed)}", v)


def _require_chains(chains: tuple[str, ...]) -> None:
    """Check a `chains` value: a non-empty list of distinct chain rules."""
    from scribe_spark.tno.sequencer import CHAINS
    _require_choices("chains", chains, CHAINS, "chain rules")


def _require_models(models: tuple[str, ...] | str, topics: int) -> None:
    """Check a `popularity` value: one model name, or a non-empty list of them."""
    from scribe_spark import capacity
    from scribe_spark.workloads.popularity import parse_model, popularity
    # the check below computes each law, so the topics must fit before it runs
    capacity.require(*capacity.popularity_need(topics))
    names = (models,) if isinstance(models, str) else models
    _require(len(names) > 0, "popularity", "must list at least one model", list(names))
    _require(len(set(names)) == len(names), "popularity", "models must be distinct", list(names))
    for m in names:
        try:
            parse_model(m)
        except ValueError as e:
            raise ConfigError(f"key 'popularity': {e}") from None
        _require(popularity(max(topics, 1), m).min() > 0, "popularity",
                 f"the law gives some of the {topics} topics probability 0 (shape too large)", m)


@dataclass(frozen=True)
class PastryHopsParams(AnyProximity):
    """SPEC P1 + P2: hops and relative route distance vs overlay size."""

    nodes: tuple[int, ...] = (1000, 3000, 10000, 30000, 100000)
    lookups: int = 200_000
    save_routes: bool = False
    partitions: int = 0

    def validate(self) -> None:
        _require_sweep("nodes", self.nodes, "overlay size")
        for n in self.nodes:
            _require(n >= 2, "nodes", "every size must be >= 2", n)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        self.validate_overlay(max(self.nodes))
        _require_partitions(self.partitions, max(self.nodes))


@dataclass(frozen=True)
class PastryJoinsParams(AnyProximity):
    """Pastry paper, routing-table quality: an overlay grown by joins, with each second join phase."""

    nodes: int = 5000
    initial: int = 500
    batch: int = 500
    lookups: int = 50_000
    improve: tuple[str, ...] = ("none", "rows", "tables")

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        _require(2 <= self.initial < self.nodes, "initial", f"must be in 2..nodes - 1 ({self.nodes - 1})",
                 self.initial)
        _require(self.batch >= 1, "batch", "must be >= 1", self.batch)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        _require_choices("improve", self.improve, ("none", "rows", "tables"), "second join phases")
        self.validate_overlay(self.nodes)


TOPIC_ROOTS = ("hash", "creator_publisher", "creator_member")   # how S1/S2 name topics (README)


@dataclass(frozen=True)
class ScribeParams(TopicWorkload, OnRouters):
    """SPEC S1 / S2: Scribe trees on a transit-stub network, measured against IP multicast."""

    nodes: int = 100_000
    bad_credentials: float = 0.001
    save_trees: bool = False
    partitions: int = 0
    topic_root: str = "hash"

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        self.validate_topics(self.nodes)
        _require(self.topic_root in TOPIC_ROOTS, "topic_root", f"must be one of {', '.join(TOPIC_ROOTS)}",
                 self.topic_root)
        _require(0.0 <= self.bad_credentials <= 1.0, "bad_credentials", "must be in [0, 1]",
                 self.bad_credentials)
        self.validate_overlay(self.nodes)
        _require_partitions(self.partitions, self.nodes)


@dataclass(frozen=True)
class TnoSizeParams:
    """SPEC T1: TNO timestamp size vs subscriptions."""

    clients: int = 10_000
    topics: int = 1000
    topics_per_client: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200)
    popularity: tuple[str, ...] = ("geographic", "spray_and_diffuse")
    causal: bool = False
    seed: int = 1

    def validate(self) -> None:
        _require(self.clients >= 1, "clients", "must be >= 1", self.clients)
        _require(self.topics >= 2, "topics", "must be >= 2", self.topics)
        _require_sweep("topics_per_client", self.topics_per_client, "value")
        for k in self.topics_per_client:
            _require(1 <= k <= self.topics, "topics_per_client",
                     f"every value must be in 1..topics ({self.topics})", k)
        _require_models(self.popularity, self.topics)
        _require_seed(self.seed)


@dataclass(frozen=True)
class TnoOrderingParams(TnoDeployment, OnRouters):
    """SPEC T3: TNO over Scribe trees whose per-hop delays reorder events."""

    nodes: int = 2000
    clients: int = 300
    topics: int = 50
    topics_per_client: int = 5
    popularity: str = "spread"
    events: int = 3000
    rate: float = 500.0
    jitter: float = 0.5
    subscription_changes: int = 30
    loss: float = 0.02
    loss_sweep: tuple[float, ...] = (0.005, 0.01, 0.02, 0.05)
    recovery_after_ms: float = 50.0
    recovery_timeout_ms: float = 300.0
    ttl_ms: float = 2000.0
    buffer_size: int = 100
    servers: int = 5
    regions: int = 2
    chains: tuple[str, ...] = ("etree", "interval", "literal")
    causal: bool = False
    engine: str = "process"

    def validate(self) -> None:
        _require(self.engine in ("process", "spark"), "engine", "must be 'process' or 'spark'", self.engine)
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        _require(1 <= self.clients <= self.nodes, "clients", f"must be in 1..nodes ({self.nodes})",
                 self.clients)
        self.validate_deployment()
        _require(self.events >= 1, "events", "must be >= 1", self.events)
        _require(self.rate > 0, "rate", "must be > 0 (events per second)", self.rate)
        _require(0.0 <= self.jitter < 1.0, "jitter", "must be in [0, 1)", self.jitter)
        _require(0 <= self.subscription_changes <= self.clients, "subscription_changes",
                 f"must be in 0..clients ({self.clients})", self.subscription_changes)
        _require(0.0 <= self.loss < 1.0, "loss", "must be in [0, 1)", self.loss)
        for x in self.loss_sweep:
            _require(0.0 <= x < 1.0, "loss_sweep", "every value must be in [0, 1)", x)
        _require_sweep("loss_sweep", self.loss_sweep, None)   # empty: no sweep
        _require(self.recovery_after_ms >= 0, "recovery_after_ms", "must be >= 0", self.recovery_after_ms)
        _require(self.recovery_timeout_ms > 0, "recovery_timeout_ms", "must be > 0", self.recovery_timeout_ms)
        _require(self.ttl_ms > 0, "ttl_ms", "must be > 0", self.ttl_ms)
        _require(self.buffer_size >= 1, "buffer_size", "must be >= 1", self.buffer_size)
        self.validate_overlay(self.nodes)


@dataclass(frozen=True)
class TnoSequencerParams(TnoDeployment):
    """SPEC T2: latency, throughput and inter-server bandwidth of the multistage sequencer."""

    clients: int = 1000
    topics: int = 1000
    servers: int = 5
    regions: int = 5
    topics_per_client: int = 10
    popularity: tuple[str, ...] = ("geographic", "spray_and_diffuse")
    deployment: str = "geo"
    precedence: str = "topic_id"
    chains: tuple[str, ...] = ("etree", "interval", "literal")
    rates: tuple[float, ...] = (500.0, 1000.0, 2000.0, 5000.0, 10000.0)
    service_ms: float = 0.05
    service_sweep_ms: tuple[float, ...] = (0.0, 0.025, 0.05, 0.1, 0.2)
    duration_s: float = 2.0
    subscription_sweep: tuple[int, ...] = (2, 5, 10, 20, 50)
    subscription_rate: float = 5000.0
    causal: bool = False
    seed: int = 1

    def validate(self) -> None:
        from scribe_spark.tno.sequencer import PRECEDENCE
        _require(self.clients >= 1, "clients", "must be >= 1", self.clients)
        self.validate_deployment()
        _require(self.deployment in ("geo", "global"), "deployment", "must be 'geo' or 'global'",
                 self.deployment)
        _require(self.precedence in PRECEDENCE, "precedence", f"must be one of {', '.join(PRECEDENCE)}",
                 self.precedence)
        if self.deployment == "geo":
            _require(self.regions == self.servers, "regions",
                     f"the geo deployment has one site per server: must equal servers ({self.servers})",
                     self.regions)
            _require(self.clients >= self.servers, "clients",
                     f"the geo deployment needs at least one client per site ({self.servers})", self.clients)
            _require(not self.precedence.startswith("popular"), "precedence",
                     "popularity differs per site in the geo deployment: use topic_id or reverse_topic_id",
                     self.precedence)
        _require_sweep("subscription_sweep", self.subscription_sweep, "value")
        for k in self.subscription_sweep:
            _require(1 <= k <= self.topics, "subscription_sweep",
                     f"every value (topics per client) must be in 1..topics ({self.topics})", k)
        _require(self.subscription_rate > 0, "subscription_rate", "must be > 0 (events per second)",
                 self.subscription_rate)
        _require_sweep("rates", self.rates, "rate")
        for r in self.rates:
            _require(r > 0, "rates", "every rate must be > 0 (events per second)", r)
        _require(self.service_ms >= 0, "service_ms", "must be >= 0", self.service_ms)
        for s in self.service_sweep_ms:
            _require(s >= 0, "service_sweep_ms", "every value must be >= 0", s)
        _require_sweep("service_sweep_ms", self.service_sweep_ms, None)   # empty: no sweep
        _require(self.duration_s >= 1.0, "duration_s",
                 "must be >= 1 (throughput is measured over the second half of the run)", self.duration_s)
        _require_seed(self.seed)


@dataclass(frozen=True)
class PastryFailuresParams(Failures, AnyProximity):
    """SPEC P3: routing before failures, after failures without repair, and after repair."""

    nodes: int = 5000
    lookups: int = 200_000
    table_repair: str = "lazy"
    passes: int = 2

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        self.validate_failures(self.nodes, 2, "2")
        _require(self.table_repair in ("lazy", "eager"), "table_repair", "must be 'lazy' or 'eager'",
                 self.table_repair)
        _require(self.passes >= 1, "passes", "must be >= 1", self.passes)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        self.validate_overlay(self.nodes)


@dataclass(frozen=True)
class ScribeRepairParams(TopicWorkload, Failures, Replicas, AnyProximity):
    """SPEC S3: Scribe tree repair, with and without the reliable extension, during an event stream."""

    nodes: int = 5000
    topics: int = 100
    failed_roots: int = 10
    rounds: int = 30
    fail_round: int = 10
    timeout: int = 3
    publish_probability: float = 0.5
    buffer: int = 8

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        self.validate_topics(self.nodes)
        failing = self.validate_failures(self.nodes, self.leaf_set + 2, f"leaf_set + 2 = {self.leaf_set + 2}")
        _require(failing <= self.nodes - self.topics, "fail_fraction",
                 f"must leave at least topics = {self.topics} live nodes "
                 "(every topic's publisher never fails)", self.fail_fraction)
        _require(0 <= self.failed_roots <= min(self.topics, failing), "failed_roots",
                 f"must be in 0..min(topics, failing nodes = {failing})", self.failed_roots)
        _require(self.timeout >= 1, "timeout", "must be >= 1 round", self.timeout)
        _require(1 <= self.fail_round, "fail_round", "must be >= 1 (events flow before the failure)",
                 self.fail_round)
        _require(self.fail_round + self.timeout < self.rounds, "rounds",
                 f"must exceed fail_round + timeout = {self.fail_round + self.timeout}", self.rounds)
        _require(0.0 < self.publish_probability <= 1.0, "publish_probability", "must be in (0, 1]",
                 self.publish_probability)
        _require(self.buffer >= 0, "buffer", "must be >= 0", self.buffer)
        self.validate_replicas(self.leaf_set)
        self.validate_overlay(self.nodes)


@dataclass(frozen=True)
class ChurnParams(TopicWorkload, Replicas, AnyProximity):
    """Churn run: nodes leave and join continuously (exponential sessions) while lookups and events go on."""

    nodes: int = 2000
    epochs: int = 8
    epoch_s: float = 60.0
    mean_session_s: float = 1800.0
    lookups: int = 20_000
    topics: int = 30

    def validate(self) -> None:
        least = 2 * (self.leaf_set + 2)
        _require(self.nodes >= least, "nodes", f"must be >= 2 (leaf_set + 2) = {least}", self.nodes)
        _require(self.epochs >= 1, "epochs", "must be >= 1", self.epochs)
        _require(self.epoch_s > 0, "epoch_s", "must be > 0", self.epoch_s)
        _require(self.mean_session_s > 0, "mean_session_s", "must be > 0", self.mean_session_s)
        _require(self.epochs * self.epoch_s <= 0.5 * self.mean_session_s, "mean_session_s",
                 "must be at least twice epochs * epoch_s (the pool of newcomers is `nodes` ids)",
                 self.mean_session_s)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        self.validate_topics(self.nodes)
        self.validate_replicas(self.leaf_set)
        self.validate_overlay(self.peak_nodes())

    def peak_nodes(self) -> int:
        """Members and the pool of newcomers."""
        return 2 * self.nodes
