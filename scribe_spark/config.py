"""Experiment parameters: frozen dataclasses of declared knobs, loaded from TOML and checked in one place.

Each field is a `knobs.knob`: what it means, its unit and the values the code can run. The
loader checks those; a class's `validate` checks what relates several knobs, and its `needs`
says what memory the run needs at least, by knob (`capacity` weighs that against the machine).
Every problem is a `ConfigError` whose one-line message names the key and the reason; jobs
turn it into a non-zero exit before Spark starts or anything is written.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from scribe_spark import laws, sessions, sizes
from scribe_spark.knobs import INT_MAX, ConfigError, count, knob, share
from scribe_spark.topology import LAN_DELAY_MS, MODELS, PLANE_SIZE, load_matrix

DELAY_MAX_MS = 100_000.0   # one link or one matrix entry: beyond 100 s a delay is a unit mistake
TIME_MAX_MS = 3.6e9        # any duration in ms: a thousand hours
TIME_MAX_S = TIME_MAX_MS / 1000.0
REFERENCE_NODES_MAX = 20_000   # churn: the sequential reference runs one event at a time
RATE_MAX = 10_000_000.0    # events per second
PARTITIONS_MAX = 10_000    # Spark tasks per superstep: more cost more in start-up than they gain
TNO_TOPICS_MAX = 10_000_000
CHAINS = ("etree", "interval", "literal")                      # tno.sequencer.CHAINS
PRECEDENCE = ("topic_id", "reverse_topic_id", "popular_first", "popular_last")   # tno.sequencer.PRECEDENCE
TOPIC_ROOTS = ("hash", "creator_publisher", "creator_member")   # how S1/S2 name topics


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


def delay(default: float, doc: str) -> Any:
    """Declare a link delay in ms."""
    return knob(default, doc, unit="ms", lo=0.0, hi=DELAY_MAX_MS, lo_open=True,
                why_hi="a link of over 100 s is a unit mistake")


def popularity_model(name: Any) -> str | None:
    """Why a popularity model name is refused, or None."""
    try:
        laws.parse_model(name)
    except ValueError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class TopologyParams:
    """Transit-stub router graph (docs/model.md, networks); delays in ms."""

    transit_domains: int = count(10, "transit domains", hi=1000)
    routers_per_transit: int = count(5, "routers in each transit domain", hi=1000)
    stubs_per_transit_router: int = count(10, "stub domains hanging off each transit router", hi=1000)
    routers_per_stub: int = count(10, "routers in each stub domain", hi=1000)
    edge_prob: float = share(0.3, "extra-edge probability inside a domain, on top of a random tree")
    delay_transit_transit: float = delay(20.0, "link inside a transit domain")
    delay_inter_transit: float = delay(50.0, "link between transit domains")
    delay_transit_stub: float = delay(5.0, "transit router to stub domain")
    delay_stub_stub: float = delay(2.0, "link inside a stub domain")

    @property
    def routers(self) -> int:
        t = self.transit_domains * self.routers_per_transit
        return t + t * self.stubs_per_transit_router * self.routers_per_stub


@dataclass(frozen=True)
class OverlayParams:
    """Pastry knobs of every job that builds an overlay (docs/model.md, Pastry)."""

    b: int = knob(4, "bits per digit of an id (must divide 128)", choices=(1, 2, 4, 8))
    leaf_set: int = count(16, "leaf-set size |L|, even, below the overlay's size", lo=2, hi=256,
                          why_hi="larger leaf sets are not Pastry's")
    neighborhood: int = count(32, "neighborhood-set size |M|, below the overlay's size", lo=0, hi=256,
                              why_hi="larger sets are not Pastry's")
    seed: int = knob(1, "seed of every random stream of the run", lo=0, hi=INT_MAX)
    topology: TopologyParams = knob(TopologyParams(), "the transit-stub network, when it is the proximity "
                                    "model",
                                    only_with=("proximity", "transit-stub"))

    def peak_nodes(self) -> int:
        """The most Pastry nodes the run holds at once (every job's parameters have `nodes`)."""
        nodes = self.nodes   # type: ignore[attr-defined]
        return max(nodes) if isinstance(nodes, tuple) else nodes

    def least_nodes(self) -> int:
        """The fewest Pastry nodes an overlay of the run has."""
        nodes = self.nodes   # type: ignore[attr-defined]
        return min(nodes) if isinstance(nodes, tuple) else nodes

    def validate_overlay(self) -> None:
        """Check the Pastry sets against the overlay's size and the proximity model."""
        _require(self.leaf_set % 2 == 0, "leaf_set", "must be even", self.leaf_set)
        least = self.least_nodes()
        _require(self.leaf_set < least, "leaf_set", f"must be below the overlay's size ({least} nodes)",
                 self.leaf_set)
        _require(self.neighborhood < least, "neighborhood",
                 f"must be below the overlay's size ({least} nodes)", self.neighborhood)

    def overlay_needs(self) -> list[tuple[Any, int, str]]:
        """The memory an overlay of `peak_nodes` needs at least: ids and router delays (its node state,
        which Spark keeps in the JVM heap and spills to local disk, is `state_need`)."""
        nodes = self.peak_nodes()
        out = [("nodes", sizes.id_bytes(nodes), f"{nodes:,} nodes' ids and ring order")]
        if self.proximity == "transit-stub":   # type: ignore[attr-defined]
            out.append(("topology", sizes.router_bytes(self.topology.routers),
                        f"all-pairs delays of {self.topology.routers:,} routers"))
        return out

    def state_need(self) -> tuple[Any, int, str]:
        """The node state's bytes at least, which Spark holds: in the JVM heap, the rest on local disk."""
        nodes = self.peak_nodes()
        return ("nodes", sizes.state_bytes(nodes, self.b, self.leaf_set, self.neighborhood),
                f"the Pastry state of {nodes:,} nodes")


@dataclass(frozen=True)
class OnRouters(OverlayParams):
    """An overlay on the transit-stub routers: the model is fixed, not a parameter (T3)."""

    proximity: ClassVar[str] = "transit-stub"


@dataclass(frozen=True)
class AnyProximity(OverlayParams):
    """An overlay under a proximity model the user picks, a latency matrix included."""

    proximity: str = knob("plane", "proximity model", choices=MODELS)
    matrix: str = knob("", "latency matrix file (.npy or text, N x N ms)", only_with=("proximity", "matrix"))

    def validate_overlay(self) -> None:
        """Also check the latency matrix file and that it has a site for each node."""
        if self.proximity == "matrix":
            _require(bool(self.matrix), "matrix", "must name a latency matrix file when proximity = 'matrix'",
                     self.matrix)
            _require(is_file(self.matrix), "matrix", "file not found", self.matrix)
            sites = _matrix_sites(self.matrix)
            nodes = self.peak_nodes()
            _require(nodes <= sites, "nodes", f"{nodes} nodes exceed the {sites} sites of the latency matrix",
                     nodes)
        super().validate_overlay()


@dataclass(frozen=True)
class TopicWorkload:
    """Scribe topics of subscribers by rank: floor(N r^-size_exponent + 0.5), at least min_size, or fixed."""

    topics: int = count(1500, "Scribe topics")
    size_exponent: float = knob(1.25, "topic of rank r has floor(nodes * r^-size_exponent + 0.5) subscribers",
                                lo=0.0, hi=100.0, lo_open=True)
    min_size: int = count(1, "least subscribers of a topic")
    group_size: int = count(0, "subscribers of every topic; 0 = sizes from size_exponent", lo=0)

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
        _require(self.min_size <= nodes, "min_size", f"must be in 1..nodes ({nodes})", self.min_size)
        _require(self.group_size <= nodes, "group_size",
                 f"must be in 0..nodes ({nodes}); 0 = sizes from size_exponent", self.group_size)

    def topic_needs(self) -> list[tuple[Any, int, str]]:
        """The memory of the subscriptions and topics."""
        subs = sizes.subscriptions(self)
        return [("topics", (subs + self.topics) * 16,
                 f"{sizes.count_text(subs)} subscriptions to {sizes.count_text(self.topics)} topics")]


@dataclass(frozen=True)
class Failures:
    """`fail_fraction`, the share of nodes that fail at once (P3, S3), and its checks."""

    fail_fraction: float = share(0.10, "share of nodes that fail silently at once", hi_open=True)

    def validate_failures(self, nodes: int, live: int, least: str) -> int:
        """Check fail_fraction leaves `live` of `nodes` alive (`least` says why); return the failing count."""
        failing = round(self.fail_fraction * nodes)
        _require(nodes - failing >= live, "fail_fraction", f"must leave at least {least} live nodes",
                 self.fail_fraction)
        return failing


OVERLAYS = ("converged", "joined")
JOIN_PHASES = ("none", "rows", "tables")   # pastry.joins.IMPROVE


@dataclass(frozen=True)
class Growth:
    """`overlay`: the converged construction, or an overlay grown by Pastry's joins (P1, P2, S1, S2)."""

    overlay: str = knob("converged", "how the overlay is built: converged (every routing-table entry the "
                                     "proximity-nearest valid node) or joined (grown by Pastry's join "
                                     "protocol from a converged seed)", choices=OVERLAYS)
    join_initial: int = count(500, "joined overlay: nodes that start converged", lo=2,
                              only_with=("overlay", "joined"))
    join_batch: int = count(500, "joined overlay: newcomers joining concurrently in one batch",
                            only_with=("overlay", "joined"))
    join_improve: str = knob("tables", "joined overlay: the second join phase (none, rows, tables)",
                             choices=JOIN_PHASES, only_with=("overlay", "joined"))

    def validate_growth(self, least: int, most: int, leaf_set: int) -> None:
        """Check a joined overlay's seed fits every size (`least`..`most`) and its batches are bounded."""
        if self.overlay != "joined":
            return
        _require(leaf_set < self.join_initial < least, "join_initial",
                 f"must be above leaf_set ({leaf_set}) and below the overlay's size ({least} nodes)",
                 self.join_initial)
        batches = math.ceil((most - self.join_initial) / self.join_batch)
        _bounded_work("'nodes', 'join_initial' and 'join_batch'", batches, JOIN_BATCHES_MAX, "join batches",
                      "raise 'join_batch'")


@dataclass(frozen=True)
class Replicas:
    """`replicas`, the root's leaf-set nodes that replicate its topic state (S3, churn), and its check."""

    replicas: int = count(5, "root state replicated on this many of the root's leaf-set nodes nearest the "
                             "topicId", hi=256)

    def validate_replicas(self, leaf_set: int) -> None:
        """Check the replicas fit in the leaf set."""
        _require(self.replicas <= leaf_set, "replicas", "must be in 1..leaf_set", self.replicas)


class TnoDeployment:
    """Checks of the keys T2 and T3 share: topics, popularity and servers."""

    topics: int
    topics_per_client: int
    popularity: str | tuple[str, ...]
    servers: int
    clients: int

    def validate_deployment(self) -> None:
        """Check the subscriptions per client, the popularity laws and the sequencing servers."""
        _require(self.topics_per_client <= self.topics, "topics_per_client",
                 f"must be in 1..topics ({self.topics})", self.topics_per_client)
        _require_laws(self.popularity, self.topics)
        _require(self.servers <= self.topics, "servers", f"must be in 1..topics ({self.topics})",
                 self.servers)

    def client_needs(self, per_client: int) -> list[tuple[Any, int, str]]:
        """The memory of the subscriptions and of the popularity laws."""
        subs = self.clients * per_client
        return [("clients", subs * 16, f"{sizes.count_text(subs)} subscriptions"),
                sizes.popularity_need(self.topics)]


def _matrix_sites(path: str) -> int:
    """The sites of a latency matrix, checked for what the models assume of delays."""
    try:
        m = load_matrix(path)
    except ValueError as e:
        raise ConfigError(f"key 'matrix': {e}") from None
    off = ~np.eye(len(m), dtype=bool)
    if (m[off] <= 0).any():
        i, j = np.argwhere((m <= 0) & off)[0]
        raise ConfigError(f"key 'matrix': {path}: delay 0 between distinct sites {i} and {j} (row {i + 1}); "
                          "only the diagonal may be 0, as every hop costs time")
    if (m > DELAY_MAX_MS).any():
        raise ConfigError(f"key 'matrix': {path}: delays must be at most {DELAY_MAX_MS:,.0f} ms "
                          f"(got {float(m.max()):g})")
    return len(m)


def _require(ok: bool, key: str, reason: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"key '{key}': {reason} (got {value!r})")


def _checked_trace(path: str, nodes: int) -> Any:
    """The session trace `path` names (a DataFrame), read and checked: a file, well formed, with `nodes`
    sessions under way at time 0 (the members a run replaying it starts with); one line naming the key
    otherwise."""
    _require(bool(path), "trace", "must name a session trace file when session = 'trace'", path)
    _require(is_file(path), "trace", "file not found", path)
    try:
        trace = sessions.read_trace(path)
    except ValueError as e:
        raise ConfigError(f"key 'trace': {e} ({path})") from None
    online = int(((trace.start_s <= 0) & (trace.end_s > 0)).sum())
    _require(online == nodes, "nodes", f"must equal the trace's sessions under way at time 0 ({online})",
             nodes)
    return trace


def _require_partitions(partitions: int, nodes: int) -> None:
    """Check `partitions`: 0 (automatic) or a count no larger than the largest overlay."""
    _require(partitions <= nodes, "partitions", f"must be in 0..nodes ({nodes}; 0 = automatic)", partitions)


def _require_laws(models: tuple[str, ...] | str, topics: int) -> None:
    """Check that each popularity law gives every one of `topics` topics a probability above 0."""
    # the check computes each law, so the topics must fit before it runs
    sizes.require(*sizes.popularity_need(topics))
    for m in (models,) if isinstance(models, str) else models:
        _require(laws.popularity(max(topics, 1), m).min() > 0, "popularity",
                 f"the law gives some of the {topics} topics probability 0 (shape too large)", m)


def _bounded_work(keys: str, amount: float, most: float, what: str, lower: str) -> None:
    """Refuse a run whose sequential work (`amount` of `what`) exceeds `most`, naming the keys."""
    if not amount <= most:
        shown = f"{amount:,.0f}" if amount < 1e15 else f"{amount:.3g}"
        raise ConfigError(f"keys {keys}: {shown} {what}, more than the {most:,.0f} a run can take; {lower}")


def node_counts(default: Any, doc: str, least: int = 2) -> Any:
    """Declare `nodes`: an overlay size, or a list of them."""
    return count(default, doc, lo=least, min_items=1)


@dataclass(frozen=True)
class PastryHopsParams(Growth, AnyProximity):
    """P1 + P2: hops and relative route distance vs overlay size."""

    nodes: tuple[int, ...] = node_counts((1000, 3000, 10000, 30000, 100000),
                                         "overlay sizes, one sweep point each")
    lookups: int = count(200_000, "lookups between random node pairs, per size and mode")
    save_routes: bool = knob(False, "also write nodes.parquet and routes.parquet")
    partitions: int = count(0, "Spark partitions of the node state; 0 = automatic", lo=0, hi=PARTITIONS_MAX,
                            why_hi="more tasks per superstep cost more than they gain")

    def validate(self) -> None:
        self.validate_overlay()
        self.validate_growth(min(self.nodes), max(self.nodes), self.leaf_set)
        _require_partitions(self.partitions, max(self.nodes))

    def needs(self) -> list[tuple[Any, int, str]]:
        return self.overlay_needs() + [("lookups", self.lookups * 48, f"{self.lookups:,} lookups")]


JOIN_BATCHES_MAX = 1000   # each batch is several superstep loops


@dataclass(frozen=True)
class PastryJoinsParams(AnyProximity):
    """Pastry paper, routing-table quality: an overlay grown by joins, with each second join phase."""

    nodes: int = node_counts(5000, "overlay size at the end")
    initial: int = count(500, "nodes that start converged", lo=2)
    batch: int = count(500, "newcomers joining concurrently in one batch")
    lookups: int = count(50_000, "lookups from random nodes to random keys, on each grown overlay")
    improve: tuple[str, ...] = knob(("none", "rows", "tables"), "second join phases: none (route alone), "
                                    "rows, tables", choices=("none", "rows", "tables"), min_items=1)

    def validate(self) -> None:
        _require(self.initial < self.nodes, "initial", f"must be in 2..nodes - 1 ({self.nodes - 1})",
                 self.initial)
        batches = math.ceil((self.nodes - self.initial) / self.batch)
        _bounded_work("'nodes', 'initial' and 'batch'", batches, JOIN_BATCHES_MAX, "join batches",
                      "raise 'batch'")
        _require(self.leaf_set < self.initial, "leaf_set", f"must be below initial ({self.initial} nodes)",
                 self.leaf_set)
        self.validate_overlay()

    def needs(self) -> list[tuple[Any, int, str]]:
        return self.overlay_needs() + [("lookups", self.lookups * 48, f"{self.lookups:,} lookups")]


@dataclass(frozen=True)
class ScribeParams(Growth, TopicWorkload, AnyProximity):
    """S1 / S2: Scribe trees, measured against IP (on a transit-stub network: IP multicast's links too)."""

    proximity: str = knob("transit-stub", "proximity model; link stress (router links) needs transit-stub",
                          choices=MODELS)
    nodes: int = node_counts(100_000, "Scribe (Pastry) nodes (on transit-stub: attached to random stub "
                                      "routers by 1 ms LAN links)")
    bad_credentials: float = share(0.001, "extra subscribe/publish requests with forged credentials (share "
                                          "of "
                                          "subscriptions); refused and counted")
    save_trees: bool = knob(False, "also write trees.parquet, subscriptions.parquet and nodes.parquet")
    partitions: int = count(0, "Spark partitions of the node state; 0 = automatic", lo=0, hi=PARTITIONS_MAX,
                            why_hi="more tasks per superstep cost more than they gain")
    topic_root: str = knob("hash", "topic naming: hash = SHA-1(name || creator); creator_publisher / "
                                   "creator_member: topicId = the creator's nodeId prefix, the creator is "
                                   "root",
                           choices=TOPIC_ROOTS)

    def validate(self) -> None:
        # the subscribers' split over chunks of nodes is a multivariate hypergeometric draw, which
        # NumPy makes for fewer than 10^9 items (workloads/spark_groups.py)
        _require(self.nodes < 10**9, "nodes", "must be below 1,000,000,000 (the subscriptions' draw)",
                 self.nodes)
        self.validate_topics(self.nodes)
        self.validate_overlay()
        self.validate_growth(self.nodes, self.nodes, self.leaf_set)
        _require_partitions(self.partitions, self.nodes)

    def needs(self) -> list[tuple[Any, int, str]]:
        return self.overlay_needs() + self.topic_needs()


@dataclass(frozen=True)
class TnoSizeParams:
    """T1: TNO timestamp size vs subscriptions."""

    clients: int = count(10_000, "clients, each subscribing to topics_per_client distinct topics")
    topics: int = count(1000, "topics", lo=2, hi=TNO_TOPICS_MAX, why_hi="each law is computed per topic")
    topics_per_client: tuple[int, ...] = count((1, 2, 5, 10, 20, 50, 100, 200),
                                               "distinct topics each client subscribes to (one sweep point "
                                               "each)",
                                               min_items=1)
    popularity: tuple[str, ...] = knob(("geographic", "spray_and_diffuse"), "popularity models: geographic, "
                                       "spray_and_diffuse, skewed, spread or pareto:<shape>",
                                       check=popularity_model, min_items=1)
    causal: bool = knob(False, "causal variant: groups from one shared subscription instead of two")
    seed: int = knob(1, "seed of every random stream of the run", lo=0, hi=INT_MAX)

    def validate(self) -> None:
        for k in self.topics_per_client:
            _require(k <= self.topics, "topics_per_client",
                     f"every value must be in 1..topics ({self.topics})", k)
        _require_laws(self.popularity, self.topics)

    def needs(self) -> list[tuple[Any, int, str]]:
        subs = self.clients * max(self.topics_per_client)
        return [("clients", subs * 16, f"{sizes.count_text(subs)} subscriptions"),
                sizes.popularity_need(self.topics)]


TICKS_MAX = 1_000_000   # the unreliable scenarios' TTL checks, each over every subscriber


@dataclass(frozen=True)
class TnoOrderingParams(TnoDeployment, OnRouters):
    """T3: TNO over Scribe trees whose per-hop delays reorder events."""

    nodes: int = node_counts(2000, "Scribe (Pastry) nodes on the transit-stub network")
    clients: int = count(300, "subscribers and publishers, a subset of the nodes")
    topics: int = count(50, "topics", lo=2, hi=TNO_TOPICS_MAX, why_hi="each law is computed per topic")
    topics_per_client: int = count(5, "distinct topics each client subscribes to")
    popularity: str = knob("spread", "popularity model, as in tno_timestamp_size", check=popularity_model)
    events: int = count(3000, "publications")
    rate: float = knob(500.0, "publications per second (uniform times)", unit="1/s", lo=0.0, hi=RATE_MAX,
                       lo_open=True)
    jitter: float = share(0.5, "each hop's delay is multiplied by 1 + jitter * U(-1, 1)", hi_open=True)
    subscription_changes: int = count(30, "clients that add topics during the run", lo=0)
    loss: float = knob(0.02, "ENS delivery loss in the unreliable scenario", lo=0.0, hi=0.5,
                       why_hi="beyond, retransmissions outnumber deliveries")
    loss_sweep: tuple[float, ...] = knob((0.005, 0.01, 0.02, 0.05), "ENS and sequencer losses, each run "
                                         "without and with recovery; [] = no sweep", lo=0.0, hi=0.5,
                                         why_hi="beyond, retransmissions outnumber deliveries")
    recovery_after_ms: float = knob(50.0, "a subscriber asks its Scribe parent for a missing event this long "
                                          "after an arrival", unit="ms", lo=0.0, hi=TIME_MAX_MS)
    recovery_timeout_ms: float = knob(300.0, "unanswered recovery requests and lost sequencer messages are "
                                             "sent again after this", unit="ms", lo=1.0, hi=TIME_MAX_MS)
    ttl_ms: float = knob(2000.0, "unreliable mode: an event waits at most this long", unit="ms", lo=1.0,
                         hi=TIME_MAX_MS)
    # the default run's subscribers hold up to about 190 events with a reliable ENS and 300 at 5% loss
    # with recovery (`peak_buffered`): a buffer below that forces releases that recovery would avoid
    buffer_size: int = count(1000, "unreliable mode: at most this many buffered events", hi=10_000_000)
    servers: int = count(5, "TM servers (contiguous topic ranges)")
    regions: int = count(2, "regions of servers and clients: same region = short link")
    chains: tuple[str, ...] = knob(CHAINS, "chain rules: the first runs the four scenarios and the loss "
                                           "sweep, the others the reliable ENS", choices=CHAINS, min_items=1)
    causal: bool = knob(False, "causal variant: groups from one shared subscription instead of two")
    engine: str = knob("process", "process: one discrete-event simulation; spark: ENS and subscribers in "
                                  "Spark",
                       choices=("process", "spark"))

    def validate(self) -> None:
        _require(self.clients <= self.nodes, "clients", f"must be in 1..nodes ({self.nodes})", self.clients)
        self.validate_deployment()
        _require(self.subscription_changes <= self.clients, "subscription_changes",
                 f"must be in 0..clients ({self.clients})", self.subscription_changes)
        if self.loss or self.loss_sweep:
            span_ms = 1000.0 * self.events / self.rate
            ticks = 5 * span_ms / self.ttl_ms + 100
            _bounded_work("'events', 'rate' and 'ttl_ms'", ticks, TICKS_MAX,
                          "TTL checks (one every ttl_ms / 5 over the 1000 * events / rate ms of "
                          "publications)",
                          "raise 'rate' or 'ttl_ms', or lower 'events'")
        self.validate_overlay()

    def needs(self) -> list[tuple[Any, int, str]]:
        return (self.overlay_needs() + self.client_needs(self.topics_per_client)
                + [("events", self.events * 512, f"{self.events:,} simulated events")])


@dataclass(frozen=True)
class TnoSequencerParams(TnoDeployment):
    """T2: latency, throughput and inter-server bandwidth of the multistage sequencer."""

    clients: int = count(1000, "clients")
    topics: int = count(1000, "topics", lo=2, hi=TNO_TOPICS_MAX, why_hi="each law is computed per topic")
    servers: int = count(5, "TM servers: contiguous ranges of topic ids (geo) or of the precedence order "
                            "(global)")
    regions: int = count(5, "geo: one per server (must equal servers); global: servers and clients spread "
                            "over regions at random; same region = short link (10 +- 2 ms), else long "
                            "(100 +- 10 ms)")
    topics_per_client: int = count(10, "distinct topics each client subscribes to")
    popularity: tuple[str, ...] = knob(("geographic", "spray_and_diffuse"), "popularity models, as in "
                                       "tno_timestamp_size", check=popularity_model, min_items=1)
    deployment: str = knob("geo", "geo: one server per site, TMs by topic id range, popularity per site; "
                                  "global: one popularity, TMs by precedence ranges, random regions",
                           choices=("geo", "global"))
    precedence: str = knob("topic_id", "topic precedence (global deployment also: popular_first, "
                                       "popular_last)",
                           choices=PRECEDENCE)
    chains: tuple[str, ...] = knob(CHAINS, "chain rules compared side by side", choices=CHAINS, min_items=1)
    rates: tuple[float, ...] = knob((500.0, 1000.0, 2000.0, 5000.0, 10000.0), "events per second (latency "
                                    "sweep)", unit="1/s", lo=0.0, hi=RATE_MAX, lo_open=True, min_items=1)
    service_ms: float = knob(0.05, "core time of one timestamp stage at a TM, in the rate and subscription "
                                   "sweeps", unit="ms", lo=0.0, hi=10_000.0,
                             why_hi="a stage of over 10 s is a unit mistake")
    message_ms: float = knob(0.01, "core time of one message a server receives from or sends to the "
                                   "network", unit="ms", lo=0.0, hi=10_000.0,
                             why_hi="a message of over 10 s is a unit mistake")
    server_cores: int = count(4, "cores of each server, shared by its TMs (the TNO paper's servers have 4)",
                              hi=1024)
    service_sweep_ms: tuple[float, ...] = knob((0.0, 0.025, 0.05, 0.1, 0.2), "throughput sweep at the "
                                               "highest "
                                               "rate; [] = no sweep", unit="ms", lo=0.0, hi=10_000.0,
                                               why_hi="a stage of over 10 s is a unit mistake")
    duration_s: float = knob(2.0, "seconds of publications per point (throughput is measured over the second "
                                  "half)", unit="s", lo=1.0, hi=86_400.0)
    subscription_sweep: tuple[int, ...] = count((2, 5, 10, 20, 50), "topics per client for the sweep against "
                                                "total subscriptions", min_items=1)
    subscription_rate: float = knob(5000.0, "events per second in that sweep", unit="1/s", lo=0.0,
                                    hi=RATE_MAX, lo_open=True)
    causal: bool = knob(False, "causal variant: groups from one shared subscription instead of two")
    seed: int = knob(1, "seed of every random stream of the run", lo=0, hi=INT_MAX)

    def validate(self) -> None:
        self.validate_deployment()
        if self.deployment == "geo":
            _require(self.regions == self.servers, "regions",
                     f"the geo deployment has one site per server: must equal servers ({self.servers})",
                     self.regions)
            _require(self.clients >= self.servers, "clients",
                     f"the geo deployment needs at least one client per site ({self.servers})", self.clients)
            _require(not self.precedence.startswith("popular"), "precedence",
                     "popularity differs per site in the geo deployment: use topic_id or reverse_topic_id",
                     self.precedence)
        for k in self.subscription_sweep:
            _require(k <= self.topics, "subscription_sweep",
                     f"every value (topics per client) must be in 1..topics ({self.topics})", k)

    def needs(self) -> list[tuple[Any, int, str]]:
        rate, knob_name = max((max(self.rates), "rates"), (self.subscription_rate, "subscription_rate"))
        events = rate * self.duration_s
        return self.client_needs(max(self.topics_per_client, *self.subscription_sweep)) + [
            ((knob_name, "duration_s"), int(events * 512),
             f"{sizes.count_text(events)} simulated events (the highest rate, in '{knob_name}', times "
             "duration_s)")]


@dataclass(frozen=True)
class PastryFailuresParams(Failures, AnyProximity):
    """P3: routing before failures, after failures without repair, and after repair."""

    nodes: int = node_counts(5000, "overlay size")
    lookups: int = count(200_000, "random keys from random surviving nodes, the same in every phase")
    table_repair: str = knob("lazy", "lazy: entries repaired when lookups find them dead; eager: all before "
                                     "routing", choices=("lazy", "eager"))
    passes: int = count(2, "lazy only: route the lookups this many times in a row after the failure", hi=100,
                        why_hi="the repair has converged long before")

    def validate(self) -> None:
        self.validate_failures(self.nodes, 2, "2")
        self.validate_overlay()

    def needs(self) -> list[tuple[Any, int, str]]:
        return self.overlay_needs() + [("lookups", self.lookups * 48, f"{self.lookups:,} lookups")]


@dataclass(frozen=True)
class ScribeRepairParams(TopicWorkload, Failures, Replicas, AnyProximity):
    """S3: Scribe tree repair, with and without the reliable extension, during an event stream."""

    nodes: int = node_counts(5000, "overlay size")
    topics: int = count(100, "Scribe topics")
    failed_roots: int = count(10, "of the failing nodes, the roots of this many random topics", lo=0)
    rounds: int = count(30, "heartbeat periods simulated", lo=2, hi=10_000,
                        why_hi="each round is a Spark job; more is hours")
    fail_round: int = count(10, "the nodes fail at the start of this round")
    timeout: int = count(3, "missed heartbeats before a child re-subscribes (and parents expire dead "
                            "children)")
    publish_probability: float = share(0.5, "chance that a topic publishes an event in a round (events count "
                                            "as heartbeats)", lo_open=True)
    buffer: int = count(8, "reliable extension: events each node keeps for retransmission", lo=0,
                        hi=10_000_000)

    def validate(self) -> None:
        self.validate_topics(self.nodes)
        failing = self.validate_failures(self.nodes, self.leaf_set + 2, f"leaf_set + 2 = {self.leaf_set + 2}")
        _require(failing <= self.nodes - self.topics, "fail_fraction",
                 f"must leave at least topics = {self.topics} live nodes "
                 "(every topic's publisher never fails)", self.fail_fraction)
        _require(self.failed_roots <= min(self.topics, failing), "failed_roots",
                 f"must be in 0..min(topics, failing nodes = {failing})", self.failed_roots)
        _require(self.fail_round + self.timeout < self.rounds, "rounds",
                 f"must exceed fail_round + timeout = {self.fail_round + self.timeout}", self.rounds)
        self.validate_replicas(self.leaf_set)
        self.validate_overlay()

    def needs(self) -> list[tuple[Any, int, str]]:
        draws = ("rounds", self.topics * self.rounds * 8,
                 f"the publication draws of {sizes.count_text(self.topics)} topics over "
                 f"{sizes.count_text(self.rounds)} rounds")
        return self.overlay_needs() + self.topic_needs() + [draws]


def max_delay_ms(p: AnyProximity) -> float:
    """An upper bound of one message's link delay under the run's proximity model (ms).

    Transit-stub: a path that climbs the stub domain, crosses every transit domain and climbs down,
    each domain's graph being connected (a random tree at least), plus the two LAN hops.
    """
    if p.proximity == "plane":
        return PLANE_SIZE * math.sqrt(2.0)
    if p.proximity == "sphere":
        return math.pi
    if p.proximity == "matrix":
        return float(np.max(load_matrix(p.matrix)))
    t = p.topology
    inside_transit = (t.routers_per_transit - 1) * t.delay_transit_transit
    climb = (t.routers_per_stub - 1) * t.delay_stub_stub + t.delay_transit_stub
    return (2 * LAN_DELAY_MS + 2 * climb + inside_transit
            + (t.transit_domains - 1) * (t.delay_inter_transit + inside_transit))


@dataclass(frozen=True)
class ChurnParams(AnyProximity):
    """Pastry in simulated time: crashes and leaves at session ends, keep-alives, repair, lookups per bin."""

    nodes: int = node_counts(1000, "nodes, all up and converged at the start unless start = steady")
    duration_s: float = knob(600.0, "simulated time", unit="s", lo=0.0, hi=TIME_MAX_S, lo_open=True)
    bin_s: float = knob(10.0, "width of a timeline.csv row", unit="s", lo=0.0, hi=TIME_MAX_S, lo_open=True)
    warmup_s: float = knob(0.0, "sweep.csv measures from this time on (a whole number of bins; timeline.csv "
                                "and repairs.csv keep the whole run)", unit="s", lo=0.0, hi=TIME_MAX_S)
    session: str = knob("exponential", "session-time law: exponential, weibull or pareto, or trace (the "
                                       "sessions of the file `trace`); a session that ends within "
                                       "duration_s ends in a crash or a leave",
                        choices=(*sessions.LAWS, "trace"))
    mean_session_s: tuple[float, ...] = knob((3600.0,), "mean session times, one sweep point each (each node "
                                                        "draws what remains of a session under way; not "
                                                        "used with a trace, whose mean session labels the "
                                                        "points)",
                                             unit="s", lo=0.0, hi=1e9, lo_open=True, min_items=1)
    weibull_shape: float = knob(1.0, "Weibull shape k (1 = exponential)", lo=0.05, hi=100.0,
                                only_with=("session", "weibull"))
    pareto_shape: float = knob(2.0, "Pareto shape alpha (> 1 for a finite mean)", lo=1.0, hi=100.0,
                               lo_open=True, only_with=("session", "pareto"))
    trace: str = knob("", "session trace (CSV with header node,start_s,end_s; a row per session, in s from "
                          "the run's start): a node with a session under way at 0 is a member, one first "
                          "seen later joins by Pastry's join, in time, and a node's later sessions are "
                          "returns with the state it had", only_with=("session", "trace"))
    leave_share: float = share(0.0, "share of the session ends that are graceful leaves (the node tells its "
                                    "leaf set first); the others are crashes")
    recover_share: float = share(0.0, "share of the departures (crash or leave) after which the node comes "
                                      "back, with its id and the state it had, after a downtime, for a new "
                                      "session from the law")
    mean_downtime_s: float = knob(60.0, "mean downtime of a node that comes back (a return after duration_s "
                                        "does not happen)", unit="s", lo=0.0, hi=TIME_MAX_S, lo_open=True)
    downtime: str = knob("exponential", "downtime law: exponential, weibull or pareto, of mean "
                                        "mean_downtime_s", choices=sessions.LAWS)
    downtime_weibull_shape: float = knob(1.0, "downtime = weibull: shape k (1 = exponential)", lo=0.05,
                                         hi=100.0, only_with=("downtime", "weibull"))
    downtime_pareto_shape: float = knob(2.0, "downtime = pareto: shape alpha (> 1 for a finite mean)", lo=1.0,
                                        hi=100.0, lo_open=True, only_with=("downtime", "pareto"))
    start: str = knob("all_up", "all_up: every node up and converged at time 0; steady: the steady state "
                                "of sessions and downtimes (needs recover_share = 1): each node down with "
                                "chance mean_downtime_s / (mean_session_s + mean_downtime_s), for what "
                                "remains of a downtime under way, and in no other node's state; the others "
                                "converged among themselves", choices=("all_up", "steady"))
    arrivals: str = knob("none", "none: the nodes are all there is; steady: newcomers join by Pastry's join, "
                                 "in time, as a Poisson process at the rate nodes leave for good, nodes x (1 "
                                 "- recover_share) / mean_session_s per second (none if recover_share = 1); "
                                 "each then lives sessions as the others do", choices=("none", "steady"))
    lookups_per_node_s: float = knob(0.01, "lookups of random keys issued per node and second (a Poisson "
                                           "process; a crashed node issues none)", unit="1/s", lo=0.0,
                                     hi=1000.0)
    topics: int = count(0, "Scribe topics (0: none): each has `subscribers` subscribers among the nodes up "
                           "at the start, whose tree is built on the overlay at the start (and repaired in "
                           "time: resubscribe); their events are routed to the root by Pastry in time and go "
                           "down the tree at the link delays", lo=0, hi=100_000)
    subscribers: int = count(10, "subscribers of each topic (topics > 0), drawn among the nodes up at the "
                                 "start")
    publications_per_topic_s: float = knob(0.1, "events published per topic and second (a Poisson process; "
                                                "each by a random node, none if that node is down)",
                                           unit="1/s", lo=0.0, hi=1000.0)
    heartbeat_s: float = knob(30.0, "a Scribe parent sends each child a heartbeat this often, unless it "
                                    "sent it an event since its last tick", unit="s", lo=0.0,
                              hi=TIME_MAX_S, lo_open=True)
    heartbeat_timeout_s: float = knob(60.0, "a child that hears nothing from its parent this long declares "
                                            "it dead (at least 2 heartbeat_s, as an event spares the next "
                                            "heartbeat, and more than heartbeat_s plus the longest delay and "
                                            "hop_ms)",
                                      unit="s", lo=0.0, hi=TIME_MAX_S, lo_open=True)
    resubscribe: bool = knob(True, "Scribe's tree repair (topics > 0): a child that declares its parent "
                                   "dead, and a subscriber that comes back, sends a SUBSCRIBE, routed by "
                                   "Pastry in time, that grafts it at the first node holding the topic; "
                                   "false keeps the trees of the start, unrepaired")
    keepalive_s: tuple[float, ...] = knob((30.0,), "periods of the leaf-set keep-alive probes, one sweep "
                                                   "point each (with every mean_session_s)", unit="s",
                                          lo=0.0, hi=TIME_MAX_S, lo_open=True, min_items=1)
    failure_timeout_s: float = knob(3.0, "a probe, leaf-set or table request unanswered this long "
                                         "declares its node failed", unit="s", lo=0.0, hi=TIME_MAX_S,
                                         lo_open=True)
    rto_ms: float = knob(500.0, "a forwarder learns that the node it sent a lookup to is dead this long "
                                "after sending", unit="ms", lo=0.0, hi=TIME_MAX_MS, lo_open=True)
    hop_ms: float = knob(1.0, "processing time added to every message's link delay", unit="ms", lo=0.0,
                         hi=DELAY_MAX_MS, lo_open=True)
    table_repair: str = knob("lazy", "lazy: a routing-table entry a lookup found dead is refilled by asking "
                                     "the entries of its row; none: it stays empty", choices=("lazy", "none"))
    lookup_timeout_s: float = knob(60.0, "a lookup not delivered this long after its issue is lost",
                                   unit="s", lo=0.0, hi=TIME_MAX_S, lo_open=True)
    check: bool = knob(True, "also run the sequential reference simulation on the same inputs and stop if "
                             "anything differs (up to 20,000 nodes)")

    def validate(self) -> None:
        self.validate_overlay()
        if self.session == "trace":
            self.validate_trace()
        _require(self.bin_s <= self.duration_s, "bin_s", f"must be at most duration_s ({self.duration_s:g})",
                 self.bin_s)
        _require(self.duration_s / self.bin_s <= 100_000, "bin_s", "must leave at most 100,000 bins",
                 self.bin_s)
        bins = self.warmup_s / self.bin_s   # a whole number of them, below the run's count of bins
        whole = abs(bins - round(bins)) <= 1e-9 * max(bins, 1)
        _require(whole and round(bins) < math.ceil(self.duration_s / self.bin_s - 1e-9), "warmup_s",
                 f"must be a whole number of bins (bin_s = {self.bin_s:g}) below duration_s "
                 f"({self.duration_s:g})", self.warmup_s)
        _require(not self.check or self.peak_nodes() <= REFERENCE_NODES_MAX, "check",
                 f"the sequential reference is too slow above {REFERENCE_NODES_MAX:,} nodes (newcomers "
                 "counted); set false", self.check)
        _require(self.start == "all_up" or self.recover_share == 1, "start",
                 "steady needs recover_share = 1 (without newcomers, only nodes that always come back keep a "
                 "steady state)", self.start)
        shortest = min(self.mean_session_s)
        up, least = self.nodes * shortest / (shortest + self.mean_downtime_s), 2 * (self.leaf_set + 1)
        _require(self.start == "all_up" or up >= least, "start",
                 f"steady leaves about nodes x mean_session_s / (mean_session_s + mean_downtime_s) = "
                 f"{up:.0f} nodes up at the start, fewer than 2 (leaf_set + 1) = {least}", self.start)
        cycle = min(self.mean_session_s) + self.mean_downtime_s
        _require(self.recover_share == 0 or cycle >= self.duration_s / 1000, "mean_downtime_s",
                 f"with recover_share > 0, must leave mean_session_s + mean_downtime_s >= duration_s / 1,000 "
                 f"(at most 1,000 sessions per node on average; now {min(self.mean_session_s):g} s + "
                 f"{self.mean_downtime_s:g} s)", self.mean_downtime_s)
        _require(self.subscribers <= self.nodes, "subscribers", f"must be at most nodes ({self.nodes})",
                 self.subscribers)
        beat = 1000.0 * self.heartbeat_s + max_delay_ms(self) + self.hop_ms
        enough = self.heartbeat_timeout_s >= 2 * self.heartbeat_s and 1000.0 * self.heartbeat_timeout_s > beat
        _require(not self.topics or enough, "heartbeat_timeout_s",
                 "must be at least 2 heartbeat_s and exceed heartbeat_s plus the longest delay "
                 f"({beat / 1000:.3f} s): a live parent is never declared dead",
                 self.heartbeat_timeout_s)
        trip = 2 * (max_delay_ms(self) + self.hop_ms)
        _require(1000.0 * self.failure_timeout_s > trip, "failure_timeout_s",
                 f"must exceed every round trip ({trip:.0f} ms at most under the {self.proximity} model): "
                 "a probe answered after its timeout is not modelled", self.failure_timeout_s)

    def validate_trace(self) -> None:
        """Check the trace file (readable, well formed, `nodes` sessions under way at time 0) and the knobs a
        trace replaces."""
        _checked_trace(self.trace, self.nodes)
        _require(self.start == "all_up", "start", "must be all_up with a trace (the trace says who is up "
                 "at time 0)", self.start)
        _require(self.arrivals == "none", "arrivals", "must be none with a trace (the trace says who joins "
                 "when)", self.arrivals)

    def peak_nodes(self) -> int:
        """The ring's nodes: the members and the newcomers (a trace's nodes seen within the run, or about
        the arrivals expected, with a margin)."""
        if self.session == "trace" and is_file(self.trace):
            t = sessions.read_trace(self.trace)
            return int(t.node[(t.end_s > 0) & (t.start_s < self.duration_s)].nunique())
        if self.arrivals == "none":
            return self.nodes
        rate = self.nodes * (1.0 - self.recover_share) / min(self.mean_session_s)
        return self.nodes + math.ceil(1.1 * rate * self.duration_s + 10)

    def needs(self) -> list[tuple[Any, int, str]]:
        lookups = int(self.lookups_per_node_s * self.nodes * self.duration_s)
        events = int(self.publications_per_topic_s * self.topics * self.duration_s)
        return self.overlay_needs() + [("lookups_per_node_s", lookups * 200, f"{lookups:,} lookups"),
                                       ("publications_per_topic_s", events * 200 * (1 + self.subscribers),
                                        f"{events:,} events")]
