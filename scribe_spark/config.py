"""Experiment parameters: frozen dataclasses loaded from TOML and validated in one place.

Every problem is reported as a `ConfigError` whose one-line message names the key and
the reason; jobs turn it into a non-zero exit before Spark starts or anything is written.
"""
from __future__ import annotations

import tomllib
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from scribe_spark.topology import MODELS


class ConfigError(ValueError):
    """A parameter is unknown, of the wrong type, or impossible."""


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
class PastryHopsParams:
    """SPEC P1 + P2: hops and relative route distance vs overlay size."""

    nodes: tuple[int, ...] = (1000, 3000, 10000, 30000, 100000)
    lookups: int = 200_000
    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    proximity: str = "plane"
    matrix: str = ""
    seed: int = 1
    save_routes: bool = False
    partitions: int = 0
    topology: TopologyParams = field(default_factory=TopologyParams)

    def validate(self) -> None:
        _require(len(self.nodes) > 0, "nodes", "must list at least one overlay size", list(self.nodes))
        for n in self.nodes:
            _require(n >= 2, "nodes", "every size must be >= 2", n)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        _validate_pastry(self)
        if self.proximity == "matrix":
            sites = _matrix_sites(self.matrix)
            _require(max(self.nodes) <= sites, "nodes", f"exceeds the {sites} sites of the latency matrix",
                     max(self.nodes))
        _require(self.partitions >= 0, "partitions", "must be >= 0 (0 = automatic)", self.partitions)
        self.topology.validate("topology.")


def _validate_pastry(p) -> None:
    _require(1 <= p.b <= 8 and 128 % p.b == 0, "b", "must be in 1..8 and divide 128", p.b)
    _require(p.leaf_set >= 2 and p.leaf_set % 2 == 0, "leaf_set", "must be an even number >= 2", p.leaf_set)
    _require(p.neighborhood >= 0, "neighborhood", "must be >= 0", p.neighborhood)
    _require(p.proximity in MODELS, "proximity", f"must be one of {', '.join(MODELS)}", p.proximity)
    if p.proximity == "matrix":
        _require(bool(p.matrix), "matrix", "must name a latency matrix file when proximity = 'matrix'", p.matrix)
        _require(Path(p.matrix).is_file(), "matrix", "file not found", p.matrix)


def _matrix_sites(path: str) -> int:
    from scribe_spark.topology import load_matrix
    try:
        return len(load_matrix(path))
    except ValueError as e:
        raise ConfigError(f"key 'matrix': {e}") from None


def _validate_overlay(p, nodes: int) -> None:
    """Pastry keys, the latency matrix (when used) for `nodes` nodes, and the topology table."""
    _validate_pastry(p)
    if p.proximity == "matrix":
        sites = _matrix_sites(p.matrix)
        _require(nodes <= sites, "nodes", f"{nodes} nodes exceed the {sites} sites of the latency matrix", p.nodes)
    p.topology.validate("topology.")


def _validate_topic_sizes(p) -> None:
    _require(p.topics >= 1, "topics", "must be >= 1", p.topics)
    _require(p.size_exponent > 0, "size_exponent", "must be > 0", p.size_exponent)
    _require(1 <= p.min_size <= p.nodes, "min_size", "must be in 1..nodes", p.min_size)


def _require(ok: bool, key: str, reason: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"key '{key}': {reason} (got {value!r})")


# ------------------------------------------------------------------ loading

def parse_override(text: str) -> tuple[str, Any]:
    """Parse `key=value` where value is TOML (bare words are taken as strings)."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def load(cls: type, path: str | Path | None, overrides: list[str] = ()) -> Any:
    """Return validated parameters of dataclass `cls` from a TOML file plus `key=value` overrides."""
    data: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from None
    for item in overrides:
        key, value = parse_override(item)
        node = data
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"key '{key}': '{p}' is not a table")
        node[parts[-1]] = value
    params = _build(cls, data, "")
    params.validate()
    return params


def _build(cls: type, data: dict, at: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    for key in data:
        if key not in known:
            raise ConfigError(f"key '{at}{key}': unknown parameter (known: {', '.join(sorted(known))})")
    kwargs = {}
    for f in fields(cls):
        if f.name in data:
            kwargs[f.name] = _coerce(hints[f.name], data[f.name], at + f.name)
    return cls(**kwargs)


def _coerce(tp: Any, value: Any, key: str) -> Any:
    if is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"key '{key}': must be a table")
        return _build(tp, value, key + ".")
    origin = typing.get_origin(tp)
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        if not isinstance(value, list):
            value = [value]
        return tuple(_coerce(inner, v, key) for v in value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"key '{key}': must be true or false (got {value!r})")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"key '{key}': must be an integer (got {value!r})")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"key '{key}': must be a number (got {value!r})")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"key '{key}': must be a string (got {value!r})")
        return value
    raise ConfigError(f"key '{key}': unsupported parameter type {tp}")


def to_toml(params: Any) -> str:
    """Return the parameters as TOML text (tables after plain keys)."""
    plain, tables = [], []
    for f in fields(params):
        v = getattr(params, f.name)
        if is_dataclass(v):
            tables.append((f.name, v))
        else:
            plain.append(f"{f.name} = {_toml_value(v)}")
    out = "\n".join(plain) + "\n"
    for name, v in tables:
        out += f"\n[{name}]\n" + "\n".join(f"{g.name} = {_toml_value(getattr(v, g.name))}" for g in fields(v)) + "\n"
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


@dataclass(frozen=True)
class ScribeParams:
    """SPEC S1 / S2: Scribe trees on a transit-stub network, measured against IP multicast."""

    nodes: int = 100_000
    topics: int = 1500
    size_exponent: float = 1.25
    min_size: int = 1
    group_size: int = 0
    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    seed: int = 1
    bad_credentials: float = 0.001
    save_trees: bool = False
    partitions: int = 0
    topology: TopologyParams = field(default_factory=TopologyParams)

    proximity = "transit-stub"   # Scribe experiments run on the router topology (not a parameter)

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        _require(self.topics >= 1, "topics", "must be >= 1", self.topics)
        _require(self.size_exponent > 0, "size_exponent", "must be > 0", self.size_exponent)
        _require(1 <= self.min_size <= self.nodes, "min_size", f"must be in 1..nodes ({self.nodes})", self.min_size)
        _require(0 <= self.group_size <= self.nodes, "group_size",
                 f"must be in 0..nodes ({self.nodes}); 0 = sizes from size_exponent", self.group_size)
        _require(0.0 <= self.bad_credentials <= 1.0, "bad_credentials", "must be in [0, 1]", self.bad_credentials)
        _validate_pastry(self)
        _require(self.partitions >= 0, "partitions", "must be >= 0 (0 = automatic)", self.partitions)
        self.topology.validate("topology.")


@dataclass(frozen=True)
class TnoSizeParams:
    """SPEC T1: TNO timestamp size vs subscriptions."""

    clients: int = 10_000
    topics: int = 1000
    topics_per_client: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200)
    popularity: tuple[str, ...] = ("skewed", "spread")
    causal: bool = False
    seed: int = 1

    def validate(self) -> None:
        _require(self.clients >= 1, "clients", "must be >= 1", self.clients)
        _require(self.topics >= 2, "topics", "must be >= 2", self.topics)
        _require(len(self.topics_per_client) > 0, "topics_per_client", "must list at least one value",
                 list(self.topics_per_client))
        for k in self.topics_per_client:
            _require(1 <= k <= self.topics, "topics_per_client", f"every value must be in 1..topics ({self.topics})", k)
        _require(len(self.popularity) > 0, "popularity", "must list at least one model", list(self.popularity))
        for m in self.popularity:
            _require(m in ("skewed", "spread"), "popularity", "models are 'skewed' and 'spread'", m)


@dataclass(frozen=True)
class TnoOrderingParams:
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
    ttl_ms: float = 2000.0
    buffer_size: int = 100
    servers: int = 5
    regions: int = 2
    causal: bool = False
    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    seed: int = 1
    topology: TopologyParams = field(default_factory=TopologyParams)

    proximity = "transit-stub"

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        _require(1 <= self.clients <= self.nodes, "clients", f"must be in 1..nodes ({self.nodes})", self.clients)
        _require(self.topics >= 2, "topics", "must be >= 2", self.topics)
        _require(1 <= self.topics_per_client <= self.topics, "topics_per_client",
                 f"must be in 1..topics ({self.topics})", self.topics_per_client)
        _require(self.popularity in ("skewed", "spread"), "popularity", "must be 'skewed' or 'spread'", self.popularity)
        _require(self.events >= 1, "events", "must be >= 1", self.events)
        _require(self.rate > 0, "rate", "must be > 0 (events per second)", self.rate)
        _require(0.0 <= self.jitter < 1.0, "jitter", "must be in [0, 1)", self.jitter)
        _require(0 <= self.subscription_changes <= self.clients, "subscription_changes",
                 f"must be in 0..clients ({self.clients})", self.subscription_changes)
        _require(0.0 <= self.loss < 1.0, "loss", "must be in [0, 1)", self.loss)
        _require(self.ttl_ms > 0, "ttl_ms", "must be > 0", self.ttl_ms)
        _require(self.buffer_size >= 1, "buffer_size", "must be >= 1", self.buffer_size)
        _require(1 <= self.servers <= self.topics, "servers", f"must be in 1..topics ({self.topics})", self.servers)
        _require(self.regions >= 1, "regions", "must be >= 1", self.regions)
        _validate_pastry(self)
        self.topology.validate("topology.")


@dataclass(frozen=True)
class TnoSequencerParams:
    """SPEC T2: latency, throughput and inter-server bandwidth of the multistage sequencer."""

    clients: int = 1000
    topics: int = 1000
    servers: int = 5
    regions: int = 5
    topics_per_client: int = 10
    popularity: tuple[str, ...] = ("skewed", "spread")
    precedence: str = "popular_last"
    rates: tuple[float, ...] = (500.0, 1000.0, 2000.0, 5000.0, 10000.0)
    service_ms: float = 0.05
    service_sweep_ms: tuple[float, ...] = (0.0, 0.025, 0.05, 0.1, 0.2)
    duration_s: float = 2.0
    causal: bool = False
    seed: int = 1

    def validate(self) -> None:
        _require(self.clients >= 1, "clients", "must be >= 1", self.clients)
        _require(self.topics >= 2, "topics", "must be >= 2", self.topics)
        _require(1 <= self.servers <= self.topics, "servers", f"must be in 1..topics ({self.topics})", self.servers)
        _require(self.regions >= 1, "regions", "must be >= 1", self.regions)
        _require(1 <= self.topics_per_client <= self.topics, "topics_per_client",
                 f"must be in 1..topics ({self.topics})", self.topics_per_client)
        _require(len(self.popularity) > 0, "popularity", "must list at least one model", list(self.popularity))
        for m in self.popularity:
            _require(m in ("skewed", "spread"), "popularity", "models are 'skewed' and 'spread'", m)
        _require(self.precedence in ("popular_last", "popular_first"), "precedence",
                 "must be 'popular_last' or 'popular_first'", self.precedence)
        _require(len(self.rates) > 0, "rates", "must list at least one rate", list(self.rates))
        for r in self.rates:
            _require(r > 0, "rates", "every rate must be > 0 (events per second)", r)
        _require(self.service_ms >= 0, "service_ms", "must be >= 0", self.service_ms)
        for s in self.service_sweep_ms:
            _require(s >= 0, "service_sweep_ms", "every value must be >= 0", s)
        _require(self.duration_s >= 1.0, "duration_s",
                 "must be >= 1 (throughput is measured over the second half of the run)", self.duration_s)


@dataclass(frozen=True)
class PastryFailuresParams:
    """SPEC P3: routing before failures, after failures without repair, and after repair."""

    nodes: int = 5000
    fail_fraction: float = 0.10
    lookups: int = 200_000
    table_repair: str = "lazy"
    passes: int = 2
    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    proximity: str = "plane"
    matrix: str = ""
    seed: int = 1
    topology: TopologyParams = field(default_factory=TopologyParams)

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        _require(0.0 <= self.fail_fraction < 1.0, "fail_fraction", "must be in [0, 1)", self.fail_fraction)
        _require(self.table_repair in ("lazy", "eager"), "table_repair", "must be 'lazy' or 'eager'", self.table_repair)
        _require(self.passes >= 1, "passes", "must be >= 1", self.passes)
        _require(self.nodes - round(self.fail_fraction * self.nodes) >= 2, "fail_fraction",
                 "must leave at least 2 live nodes", self.fail_fraction)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        _validate_overlay(self, self.nodes)


@dataclass(frozen=True)
class ScribeRepairParams:
    """SPEC S3: Scribe tree repair, with and without the reliable ordered extension, during an event stream."""

    nodes: int = 5000
    topics: int = 100
    size_exponent: float = 1.25
    min_size: int = 1
    fail_fraction: float = 0.10
    failed_roots: int = 10
    rounds: int = 30
    fail_round: int = 10
    timeout: int = 3
    publish_probability: float = 0.5
    buffer: int = 8
    replicas: int = 5
    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    proximity: str = "plane"
    matrix: str = ""
    seed: int = 1
    topology: TopologyParams = field(default_factory=TopologyParams)

    def validate(self) -> None:
        _require(self.nodes >= 2, "nodes", "must be >= 2", self.nodes)
        _validate_topic_sizes(self)
        _require(0.0 <= self.fail_fraction < 1.0, "fail_fraction", "must be in [0, 1)", self.fail_fraction)
        failing = round(self.fail_fraction * self.nodes)
        _require(self.nodes - failing >= self.leaf_set + 2, "fail_fraction",
                 f"must leave at least leaf_set + 2 = {self.leaf_set + 2} live nodes", self.fail_fraction)
        _require(failing <= self.nodes - self.topics, "fail_fraction",
                 f"must leave at least topics = {self.topics} live nodes (every topic's publisher never fails)",
                 self.fail_fraction)
        _require(0 <= self.failed_roots <= min(self.topics, failing), "failed_roots",
                 f"must be in 0..min(topics, failing nodes = {failing})", self.failed_roots)
        _require(self.timeout >= 1, "timeout", "must be >= 1 round", self.timeout)
        _require(1 <= self.fail_round, "fail_round", "must be >= 1 (events flow before the failure)", self.fail_round)
        _require(self.fail_round + self.timeout < self.rounds, "rounds",
                 f"must exceed fail_round + timeout = {self.fail_round + self.timeout}", self.rounds)
        _require(0.0 < self.publish_probability <= 1.0, "publish_probability", "must be in (0, 1]",
                 self.publish_probability)
        _require(self.buffer >= 0, "buffer", "must be >= 0", self.buffer)
        _require(1 <= self.replicas <= self.leaf_set, "replicas", "must be in 1..leaf_set", self.replicas)
        _validate_overlay(self, self.nodes)


@dataclass(frozen=True)
class ChurnParams:
    """Churn run: nodes leave and join continuously (exponential sessions) while lookups and events go on."""

    nodes: int = 2000
    epochs: int = 8
    epoch_s: float = 60.0
    mean_session_s: float = 1800.0
    lookups: int = 20_000
    topics: int = 30
    size_exponent: float = 1.25
    min_size: int = 1
    replicas: int = 5
    b: int = 4
    leaf_set: int = 16
    neighborhood: int = 32
    proximity: str = "plane"
    matrix: str = ""
    seed: int = 1
    topology: TopologyParams = field(default_factory=TopologyParams)

    def validate(self) -> None:
        least = 2 * (self.leaf_set + 2)
        _require(self.nodes >= least, "nodes", f"must be >= 2 (leaf_set + 2) = {least}", self.nodes)
        _require(self.epochs >= 1, "epochs", "must be >= 1", self.epochs)
        _require(self.epoch_s > 0, "epoch_s", "must be > 0", self.epoch_s)
        _require(self.mean_session_s > 0, "mean_session_s", "must be > 0", self.mean_session_s)
        _require(self.epochs * self.epoch_s <= 0.5 * self.mean_session_s, "mean_session_s",
                 "must be at least twice epochs * epoch_s (the pool of newcomers is `nodes` ids)", self.mean_session_s)
        _require(self.lookups >= 1, "lookups", "must be >= 1", self.lookups)
        _validate_topic_sizes(self)
        _require(1 <= self.replicas <= self.leaf_set, "replicas", "must be in 1..leaf_set", self.replicas)
        _validate_overlay(self, 2 * self.nodes)   # members and newcomers
