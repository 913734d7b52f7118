"""Experiment churn: Pastry and Scribe in simulated time while nodes crash, leave, come back and join.

`nodes` members start converged (with `start = "steady"`, a share of them down and the others converged
among themselves). Each draws what remains of a session under way from `session`'s law (mean
`mean_session_s`); a session that ends before `duration_s` ends in a graceful leave (a share `leave_share`
of them: the node tells its leaf set first) or a crash. After a share `recover_share` of the departures
the node comes back after a downtime (law `downtime`, mean `mean_downtime_s`) with its id and last state,
asks its last leaf set to take it back, and lives a new session from the law, and so on; the others stay
down. With `arrivals = "steady"`, newcomers (numbered after the members, absent from the start) join by
Pastry's join in time, as a Poisson process at the rate nodes leave for good, then live sessions as the
others. Leaf-set members probe each other every `keepalive_s`; a member unanswered
`failure_timeout_s` after a probe is declared failed and the leaf set repaired, and a routing-table entry
that names a node declared failed is refilled by asking the entries of its row; lookups of random keys
from random nodes are issued as a Poisson process of `lookups_per_node_s` per node and routed hop by hop
at the link delays, a forwarder that sends to a dead node learning it `rto_ms` later (`pastry.timed`,
docs/model.md, "Simulated time"). With `check = true` the sequential reference simulation runs on the same
inputs and the run stops if any lookup, detection, repair or message count differs. With `topics` > 0, each
topic has `subscribers` subscribers among the members up at the start, on the tree Scribe builds on the
overlay at the start; events published as a Poisson process are routed to their roots as the lookups are
and sent down the trees at the link delays, parents send their children heartbeats, and a child that hears
nothing from its parent for `heartbeat_timeout_s` declares it dead and, with `resubscribe`, sends a
SUBSCRIBE that Pastry routes in time and that grafts it back (in rounds: `_simulated`;
`experiments.timed_events`, `scribe.timed`).

`mean_session_s` and `keepalive_s` take lists: every pair is a sweep point, run from the same converged
state (with `start = "steady"`, that of the nodes up at its start) with the same draws. Tables:
`timeline.csv` (one row per point and bin of `bin_s`: members, lookups by outcome, latency, hops, timeouts,
maintenance messages per node and second), `repairs.csv` (one row per point and departure: when it was
noticed and when the leaf sets that held it were repaired) and `sweep.csv` (one row per point, over the run
from `warmup_s` on).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np
import pandas as pd

from scribe_spark import bsp, ids
from scribe_spark import report as plots
from scribe_spark.config import ChurnParams
from scribe_spark.experiments import timed_events
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.pastry import timed
from scribe_spark.pastry.kernels import Ring
from scribe_spark.pastry.overlay import build_overlay
from scribe_spark.scribe import timed as scribe_timed
from scribe_spark.sessions import SessionLaw, Times, outages, read_trace
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import Purpose, stream
from scribe_spark.workloads.network import make_ring, shared_network

KINDS = {"keepalive": ("probe", "probe_reply"), "leaf_repair": ("leaf_request", "leaf_reply"),
         "table_repair": ("table_request", "table_reply"), "leave": ("leave",), "rejoin": timed.RECOVERY,
         "join": timed.JOINING}
OPTIONAL = (*timed.RECOVERY, *timed.JOINING)   # kinds a run without returns (or joins) counts none of
# message sizes (bytes), for maintenance_bytes_per_node_s: a node handle is a 128-bit id, an IPv4
# address and a UDP port; every message carries IPv4 and UDP headers, its type and its sender's handle;
# a leaf-set reply adds a count and |L| handles (counted full); a table request the slot (row and column,
# a byte each), a table reply the slot and a handle (zero for an empty entry); a JOIN the newcomer's
# handle, a JOIN's reply a count, |L| handles and the table row the newcomer takes from it (2^b handles:
# the model's reply holds the whole state, of which Pastry sends that row); the others nothing more
HANDLE_BYTES = 16 + 4 + 2
HEADER_BYTES = 20 + 8 + 1 + HANDLE_BYTES
TOPIC_BYTES = 16   # a Scribe heartbeat names its topic: a 128-bit topicId
KEYS = ["mean_session_s", "keepalive_s"]   # a sweep point's columns in every table
DELAYS = ("detected_after_s", "leaf_detected_after_s", "leaf_sets_repaired_after_s")   # repairs.csv
# timeline.csv's columns that sweep.csv gives over its window (from warmup_s on)
WINDOW = ("lookup_success", "lookup_wrong", "lookup_lost", "lookup_latency_ms_mean",
          "lookup_latency_ms_p99", "timeouts_per_lookup")


@dataclass(frozen=True)
class Departures:
    """Who goes when and comes back when (ms): a row per time a node goes down, by node then time (node,
    down, up, graceful; up inf: not back before the end)."""

    spans: pd.DataFrame
    newcomers: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # first return: a join

    @classmethod
    def of(cls, node: np.ndarray, down: np.ndarray, up: np.ndarray, graceful: np.ndarray,
           newcomers: np.ndarray | None = None) -> "Departures":
        """From a row per going, in any order (`newcomers`: nodes absent from the start that join)."""
        spans = pd.DataFrame({"node": np.asarray(node, np.int64), "down": np.asarray(down, np.float64),
                              "up": np.asarray(up, np.float64), "graceful": np.asarray(graceful, bool)})
        new = np.zeros(0, np.int64) if newcomers is None else np.asarray(newcomers, np.int64)
        return cls(spans.sort_values(["node", "down"], kind="stable").reset_index(drop=True), new)

    @classmethod
    def of_times(cls, crashes: dict[int, Times], leaves: dict[int, Times] | None = None,
                 returns: dict[int, Times] | None = None) -> "Departures":
        """From {node: time or times} of crashes, graceful leaves and returns (`sessions.outages`)."""
        rows = outages(crashes, leaves, returns)
        return cls.of(*(list(c) for c in zip(*rows))) if rows else cls.of([], [], [], [])

    def _times(self, rows: pd.DataFrame, col: str) -> dict[int, list[float]]:
        """{node: its times in `col`} of these rows."""
        return {int(v): g[col].tolist() for v, g in rows.groupby("node", sort=True)}

    @property
    def crashes(self) -> dict[int, list[float]]:
        """{node: when it crashes}."""
        return self._times(self.spans[~self.spans.graceful], "down")

    @property
    def leaves(self) -> dict[int, list[float]]:
        """{node: when it leaves gracefully}."""
        return self._times(self.spans[self.spans.graceful], "down")

    @property
    def returns(self) -> dict[int, list[float]]:
        """{node: when it comes back}."""
        return self._times(self.spans[np.isfinite(self.spans.up)], "up")

    @property
    def in_time(self) -> pd.DataFrame:
        """The rows by time, then node (`within` leaves out the absences from before the start)."""
        return self.spans.sort_values(["down", "node"], kind="stable").reset_index(drop=True)

    @property
    def absent(self) -> np.ndarray:
        """The nodes down from before the start (gone at -inf: a steady start, or newcomers), sorted."""
        return np.unique(self.spans.node[self.spans.down == -np.inf].to_numpy(np.int64))

    def _ups(self, joins: bool) -> np.ndarray:
        """When nodes come up, in no order: newcomers' joins (their first returns), or the other returns."""
        s = self.spans
        first = (s.down == -np.inf) & np.isin(s.node, self.newcomers)
        return s.up[np.isfinite(s.up) & (first if joins else ~first)].to_numpy(np.float64)

    @property
    def arrivals(self) -> np.ndarray:
        """When newcomers join (their first returns), in no order."""
        return self._ups(joins=True)

    @property
    def back(self) -> np.ndarray:
        """When nodes come back (returns, not joins), in no order."""
        return self._ups(joins=False)

    @property
    def within(self) -> pd.DataFrame:
        """The rows of the goings within the run (not the absences from before the start), by time."""
        spans = self.in_time
        return spans[np.isfinite(spans.down)].reset_index(drop=True)

    def counts(self) -> dict[str, int]:
        """How many crashes and leaves within the run, and returns (also of nodes absent at the start, and
        how many those are, if any), and newcomers' arrivals (if the run has newcomers)."""
        s, absent = self.spans, len(np.setdiff1d(self.absent, self.newcomers))
        run = s[np.isfinite(s.down)]
        new = {"arrivals": len(self.arrivals)} if len(self.newcomers) else {}
        return {"crashes": int((~run.graceful).sum()), "leaves": int(run.graceful.sum()),
                "returns": len(self.back), **({"absent": absent} if absent else {}), **new}


@dataclass(frozen=True)
class Point:
    """One sweep point: a mean session time and a keep-alive period (s)."""

    mean_session_s: float
    keepalive_s: float

    @property
    def label(self) -> str:
        """The point's name in progress lines and saved points: exact, so that no two points share one."""
        return f"mean_session_s={self.mean_session_s!r} keepalive_s={self.keepalive_s!r}"


def timers(p: ChurnParams, at: Point) -> timed.Timers:
    """The protocol's timers at a sweep point, in ms."""
    return timed.Timers(keepalive_ms=1000.0 * at.keepalive_s, failure_timeout_ms=1000.0 * p.failure_timeout_s,
                        rto_ms=p.rto_ms, proc_ms=p.hop_ms, lookup_timeout_ms=1000.0 * p.lookup_timeout_s,
                        table_repair=p.table_repair == "lazy")


def workload(p: ChurnParams, mean_session_s: float) -> tuple[Departures, pd.DataFrame]:
    """The departures and the lookups (t_issue, src, key_hi, key_lo), from the seed.

    The draws do not depend on the sweep point: every point sees the same uniform draws (common random
    numbers), the sessions scaled by its mean, the same downtimes and lookups.
    """
    rng = stream(p.seed, Purpose.CHURN, p.nodes)
    if p.session == "trace":
        return _replayed(p), _lookups(p, rng)
    law = SessionLaw.of(p, mean_session_s)
    ends = 1000.0 * law.residuals(rng, p.nodes)
    graceful = stream(p.seed, Purpose.LEAVES, p.nodes).random(p.nodes) < p.leave_share   # per node
    back = stream(p.seed, Purpose.RETURNS, p.nodes)   # per node, as the leaves: the same at every point
    comes = back.random(p.nodes) < p.recover_share
    up = _after(ends, _downtimes(p, back, p.nodes))
    if p.start == "steady":
        ends, graceful, comes, up = _steady_start(p, mean_session_s, ends, graceful, comes, up)
    rows = _sessions(p, law, ends, graceful, comes, up)
    candidates = _candidates(p)
    pool = len(candidates[0])
    if pool:
        rows = tuple(np.concatenate(c) for c in zip(rows, _arrivals(p, law, mean_session_s, *candidates)))
    gone = Departures.of(*rows, newcomers=p.nodes + np.arange(pool))
    return gone, _lookups(p, rng)


def _lookups(p: ChurnParams, rng: np.random.Generator) -> pd.DataFrame:
    """The lookups (t_issue, src, key_hi, key_lo): a Poisson process from the members (0 .. nodes - 1)."""
    count = int(rng.poisson(p.lookups_per_node_s * p.nodes * p.duration_s))
    khi, klo = ids.random_ids(count, rng)
    return pd.DataFrame({"t_issue": np.sort(rng.uniform(0.0, 1000.0 * p.duration_s, count)),
                         "src": rng.integers(0, p.nodes, count), "key_hi": khi, "key_lo": klo})


def traced(p: ChurnParams) -> pd.DataFrame:
    """The trace's sessions that overlap the run (ms), each with its node's number (`ring`): the nodes with a
    session under way at 0 first (the members, by the trace's order), then the others by first session."""
    t = read_trace(p.trace)   # by start, then node
    t = t[(t.end_s > 0) & (t.start_s < p.duration_s)]
    members = list(dict.fromkeys(t.node[t.start_s <= 0]))
    order = members + [v for v in dict.fromkeys(t.node) if v not in set(members)]
    number = {v: i for i, v in enumerate(order)}
    out = pd.DataFrame({"ring": t.node.map(number).to_numpy(np.int64), "start": 1000.0 * t.start_s.to_numpy(),
                        "end": 1000.0 * t.end_s.to_numpy()})
    return out.sort_values(["ring", "start"], kind="stable")


def _replayed(p: ChurnParams) -> Departures:
    """A trace's departures: a node goes at each session's end within the run (a crash or, a share
    leave_share of them, a leave) and comes back at its next session's start; a node first seen after 0
    is a newcomer, absent from the start, that joins at its first session's start."""
    t, until = traced(p), 1000.0 * p.duration_s
    rows = []
    for v, s in t.groupby("ring", sort=True):
        start, end = s.start.to_numpy(), s.end.to_numpy()
        if start[0] > 0:
            rows.append((v, -np.inf, start[0]))
        nxt = np.r_[start[1:], np.inf]
        rows += [(v, e, max(n, np.nextafter(e, np.inf)) if n < until else np.inf)
                 for e, n in zip(end.tolist(), nxt.tolist()) if e < until]
    node, down, up = (np.array(c) for c in zip(*rows)) if rows else (np.zeros(0),) * 3
    leave = stream(p.seed, Purpose.LEAVES, p.nodes).random(len(rows)) < p.leave_share
    return Departures.of(node, down, up, leave & np.isfinite(down),
                         newcomers=np.arange(p.nodes, int(t.ring.max()) + 1))


def trace_mean_s(p: ChurnParams) -> float:
    """The trace's mean session (s, to the ms), over all its sessions: what labels a point run on it."""
    t = read_trace(p.trace)
    return round(float((t.end_s - t.start_s).mean()), 3)


def _sessions(p: ChurnParams, law: SessionLaw, ends: np.ndarray, graceful: np.ndarray,
              comes: np.ndarray, up: np.ndarray, first: int = 0,
              purpose: int = Purpose.SESSIONS) -> tuple[np.ndarray, ...]:
    """Every node's goings and returns before the end (node, down, up, graceful: a row each), from its first
    session's end, how it ends, whether it comes back and when: after a return a node lives a whole new
    session from the law, and so on. Round k draws every node's k-th session and its end, so each node's
    draws do not depend on others'. The nodes are numbered from `first`, their streams named `purpose`."""
    until, n = 1000.0 * p.duration_s, len(ends)
    rows, live, k = [], np.ones(n, bool), 0
    while live.any():
        going = np.flatnonzero(live & (ends < until))
        back = comes[going] & (ends[going] < up[going]) & (up[going] < until)
        rows.append((first + going, ends[going], np.where(back, up[going], np.inf), graceful[going]))
        live = np.zeros(n, bool)
        live[going[back]] = True
        k += 1
        again = stream(p.seed, purpose, p.nodes, k)
        ends = _after(up, 1000.0 * law.sessions(again, n))
        graceful = again.random(n) < p.leave_share
        comes = again.random(n) < p.recover_share
        up = _after(ends, _downtimes(p, again, n))
    return tuple(np.concatenate(c) for c in zip(*rows))


def _candidates(p: ChurnParams) -> tuple[np.ndarray, np.ndarray]:
    """The newcomers' candidate arrivals (ms, sorted) and a uniform draw each: a Poisson process at the
    sweep's fastest rate (of its shortest mean session); a point keeps the candidates whose draw is below
    its own rate's share of that one, so that every point draws the same numbers."""
    if p.arrivals == "none":
        return np.zeros(0), np.zeros(0)
    rng = stream(p.seed, Purpose.ARRIVALS, p.nodes)
    top = p.nodes * (1.0 - p.recover_share) / min(p.mean_session_s)   # per second
    count = int(rng.poisson(top * p.duration_s))
    return np.sort(rng.uniform(0.0, 1000.0 * p.duration_s, count)), rng.random(count)


def ring_size(p: ChurnParams) -> int:
    """The ring's nodes: the members and every candidate newcomer (numbered after them; with a trace, every
    node it has in the run)."""
    if p.session == "trace":
        return p.peak_nodes()   # the trace's nodes in the run, which `traced` numbers from 0
    return p.nodes + len(_candidates(p)[0])


def _arrivals(p: ChurnParams, law: SessionLaw, mean_session_s: float, t: np.ndarray,
              draw: np.ndarray) -> tuple[np.ndarray, ...]:
    """The newcomers' rows: absent from the start, joining at their candidate arrival `t` (never, if this
    point's rate leaves its `draw` out: `_candidates`), then sessions from the law as the others', each
    ending in a crash or a leave and maybe a return."""
    m = len(t)
    joins = np.where(draw < min(p.mean_session_s) / mean_session_s, t, np.inf)
    rng = stream(p.seed, Purpose.ARRIVALS, p.nodes, 0)
    ends = _after(joins, 1000.0 * law.sessions(rng, m))
    graceful = rng.random(m) < p.leave_share
    comes = rng.random(m) < p.recover_share
    up = _after(ends, _downtimes(p, rng, m))
    first = (p.nodes + np.arange(m), np.full(m, -np.inf), joins, np.zeros(m, bool))
    later = _sessions(p, law, ends, graceful, comes, up, first=p.nodes, purpose=Purpose.ARRIVALS)
    return tuple(np.concatenate(c) for c in zip(first, later))


def _steady_start(p: ChurnParams, mean_session_s: float, ends: np.ndarray, graceful: np.ndarray,
                  comes: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, ...]:
    """The first sessions' ends, how they end and the returns after them, when the run starts in the steady
    state of sessions and downtimes: each node is down with chance mean downtime / (mean session + mean
    downtime), gone since -inf (before the start) for what remains of a downtime under way, then back; the
    others' draws are those of a start with every node up."""
    rng = stream(p.seed, Purpose.START, p.nodes)
    down = rng.random(p.nodes) < p.mean_downtime_s / (mean_session_s + p.mean_downtime_s)
    rest = _downtimes(p, rng, p.nodes, residual=True)
    return (np.where(down, -np.inf, ends), graceful & ~down, comes | down, np.where(down, rest, up))


def _downtimes(p: ChurnParams, rng: np.random.Generator, n: int, residual: bool = False) -> np.ndarray:
    """Downtimes of `n` nodes (ms) from `downtime`'s law of mean `mean_downtime_s` (with `residual`, what
    remains of downtimes under way at a random moment of the steady state)."""
    if p.downtime == "exponential":   # a unit draw times the mean: SessionLaw's draw rounds otherwise
        return 1000.0 * p.mean_downtime_s * rng.exponential(1.0, n)   # memoryless: the residual is alike
    shape = {"weibull": p.downtime_weibull_shape, "pareto": p.downtime_pareto_shape}[p.downtime]
    law = SessionLaw(p.downtime, p.mean_downtime_s, shape)
    return 1000.0 * (law.residuals(rng, n) if residual else law.sessions(rng, n))


def _after(start: np.ndarray, span: np.ndarray) -> np.ndarray:
    """The ends of spans (sessions, downtimes; ms) from their starts: one too short to tell from its start
    (a small Weibull shape draws some below a float's step at that time) still ends after it."""
    return np.maximum(start + span, np.nextafter(start, np.inf))


def simulate(p: ChurnParams, run: Run) -> Outcome:
    """Run the timed protocol at every sweep point; per point its timeline, repairs and one sweep row."""
    spark = spark_session(run.name)
    routers, matrix = shared_network(p, p.seed)
    ring = make_ring(ring_size(p), p, p.seed, routers, matrix, spark=spark)
    # every point starts from the same converged state, or with a steady start from that of the nodes up at
    # its start, which its mean session decides (the points of one mean session follow each other)
    starts = _Starts(p, run, ring)
    means = [trace_mean_s(p)] if p.session == "trace" else p.mean_session_s
    points = [Point(m, k) for m in means for k in p.keepalive_s]
    try:
        done = [run.point(at.label, lambda at=at: _point(p, run, ring, starts, at)) for at in points]
    finally:
        starts.drop()
    tables = {name: pd.concat([d[name] for d in done], ignore_index=True)
              for name in ("timeline", "repairs", "sweep")}
    return Outcome(tables, {"points": [d["notes"] for d in done], "checked": p.check})


def _converged(p: ChurnParams, run: Run, ring: Ring, absent: np.ndarray):
    """The converged overlay of the nodes present at the start (`build_overlay`)."""
    present = ring.n - len(absent)
    if present <= p.leaf_set:
        raise ValueError(f"only {present} of the {p.nodes} nodes are up at the steady start, and the overlay "
                         f"needs more than leaf_set = {p.leaf_set}: raise nodes or mean_session_s")
    t0 = time.time()
    overlay = build_overlay(spark_session(run.name), ring, seed=p.seed,
                            absent=absent if len(absent) else None)
    run.log(f"converged state for {present} nodes" + (f" ({len(absent)} absent)" if len(absent) else "")
            + f" ({time.time() - t0:.1f}s)")
    return overlay


class _Starts:
    """The converged overlay a point starts from: of the nodes up at its start, built once for each set of
    them in turn (the last one kept)."""

    def __init__(self, p: ChurnParams, run: Run, ring: Ring) -> None:
        self.p, self.run, self.ring = p, run, ring
        self.absent: tuple[int, ...] | None = None
        self.overlay = None

    def of(self, absent: np.ndarray):
        """The overlay without the `absent` nodes in any state."""
        if self.absent != tuple(absent.tolist()):
            self.drop()
            self.overlay = _converged(self.p, self.run, self.ring, absent)
            self.absent = tuple(absent.tolist())
        return self.overlay

    def drop(self) -> None:
        """Free the overlay kept."""
        if self.overlay is not None:
            self.overlay.unpersist()
        self.overlay, self.absent = None, None


def _point(p: ChurnParams, run: Run, ring: Ring, starts: _Starts, at: Point) -> dict:
    """One sweep point: simulate, check against the reference, and tabulate."""
    t0 = time.time()
    gone, lookups = workload(p, at.mean_session_s)
    events = timed_events.workload(p, gone.absent)
    n = gone.counts()
    back = f", {n['returns']} come back" if n["returns"] else ""
    away = f"{n['absent']} of {p.nodes} down at the start; " if n.get("absent") else ""
    new = f", {n['arrivals']} newcomers join" if "arrivals" in n else ""
    run.log(f"{at.label}: {away}within {p.duration_s:g} s {n['crashes']} crash and {n['leaves']} leave"
            f"{back}{new}; {len(lookups):,} lookups"
            + (f", {len(events.published):,} events" if events is not None else ""))
    overlay, asked = starts.of(gone.absent), timed_events.routed(lookups, events)
    whole, scribe, subs = _simulated(p, at, run, overlay, gone, asked, events, t0)
    got = replace(whole, lookups=whole.lookups.iloc[:len(lookups)])   # the lookups' own routes
    if p.check:
        _check(p, at, run, ring, gone, asked, whole, events, scribe, subs)
    keys = dict(zip(KEYS, (at.mean_session_s, at.keepalive_s)))
    line, rep = timeline(p, ring, gone, lookups, got, scribe), repairs(gone, got, scribe)
    notes = {**keys, **gone.counts(), "lookups": len(lookups), "passes": got.passes,
             "messages": dict(got.messages), **_reached(scribe)}
    return {"timeline": line.assign(**keys)[[*keys, *line.columns]],
            "repairs": rep.assign(**keys)[[*keys, *rep.columns]],
            "sweep": pd.DataFrame([{**keys, **sweep_row(p, ring, gone, lookups, got, rep, scribe)}]),
            "notes": notes}


def heartbeats(p: ChurnParams) -> scribe_timed.Heartbeats:
    """The Scribe heartbeat timers of a run, in ms, with the run's end and bins."""
    return scribe_timed.Heartbeats(1000.0 * p.heartbeat_s, 1000.0 * p.heartbeat_timeout_s, p.seed, p.hop_ms,
                                   1000.0 * p.duration_s, 1000.0 * p.bin_s)


# rounds of SUBSCRIBEs a run may take (`_simulated`): each gets right at least the earliest SUBSCRIBE the
# round before got wrong, and a run has few SUBSCRIBEs that follow one another
ROUNDS_MAX = 50


def _simulated(p: ChurnParams, at: Point, run: Run, overlay, gone: Departures, asked: pd.DataFrame,
               events: timed_events.Events | None, t0: float
               ) -> tuple[timed.TimedRun, timed_events.Outcomes | None, pd.DataFrame | None]:
    """The timed run of the lookups and the events (`asked`: `timed_events.routed`), and what the events and
    heartbeats did (None: no topics), with the SUBSCRIBEs routed (None: no topics).

    A child that declares its parent dead re-subscribes, and its SUBSCRIBE is routed by the same run as
    the lookups; so the run goes in rounds: each routes the SUBSCRIBEs the round before asked for (at
    first, a guess: those of the subscribers that come back, and of the timeouts that heartbeats alone
    would give on the trees of the start), stopping where the round before's trees held their topic, until
    a round asks for the same SUBSCRIBEs and grows the same trees as the one before. Each round after the
    first starts from the last's events (`timed.simulate`'s `warm`). Without resubscribe, one round."""
    if events is None:
        return _pastry(p, at, run, overlay, gone, asked, t0), None, None
    lookups = len(asked) - len(events.published)
    start, asks, warm = timed_events.begin(overlay, events, gone.spans), _asks(p, events, gone), None
    try:
        # an event's copy only moves when a child last heard from its parent: the timeouts of heartbeats
        # alone make a first round close to the last
        quiet = timed_events.quiet_timeouts(overlay, start, heartbeats(p)) if p.resubscribe else None
        subs = asks(timed_events.NO_TIMEOUTS if quiet is None else quiet)
        holders = timed_events.holders(start.timed, events.topics) if p.resubscribe else None
        for r in range(1, ROUNDS_MAX + 1):
            routes = pd.concat([asked, subs[asked.columns]], ignore_index=True)
            some = len(subs) > 0   # without SUBSCRIBEs, the run of the lookups and events alone
            got = _pastry(p, at, run, overlay, gone, routes, t0, warm, len(asked) if some else None,
                          holders if some else None, keep=True)
            if warm is not None:
                bsp.release(warm)
            warm = got.events
            scribe = _events(p, at, run, overlay, start, gone, events, got, lookups, subs)
            again = asks(scribe.timeouts)
            if again.equals(subs) and (holders is None or scribe.holders.equals(holders)):
                return replace(got, events=None), scribe, subs   # its events are released below
            why = ("the same SUBSCRIBEs, grafted elsewhere" if again.equals(subs) else
                   f"{len(again):,} SUBSCRIBEs where it routed {len(subs):,}, the first other at "
                   f"t = {_first_other(again, subs) / 1000.0:.3f} s")
            run.log(f"{at.label}: round {r} asks for {why}; another round")
            subs, holders = again, scribe.holders
        raise RuntimeError(f"{at.label}: the SUBSCRIBEs still changed after {ROUNDS_MAX} rounds")
    finally:
        if warm is not None:
            bsp.release(warm)
        start.release()


def _first_other(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """The earliest issue time of a SUBSCRIBE in one of the frames and not in the other (inf: none)."""
    rows = pd.concat([a, b]).drop_duplicates(keep=False)
    return float(rows.t_issue.min()) if len(rows) else math.inf


def _asks(p: ChurnParams, events: timed_events.Events,
          gone: Departures) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The SUBSCRIBEs a round's heartbeat timeouts ask for (`timed_events.subscribes`; none without
    resubscribe)."""
    until = 1000.0 * p.duration_s

    def asks(timeouts: pd.DataFrame) -> pd.DataFrame:
        subs = timed_events.subscribes(events, timeouts, gone.spans, until)
        return subs if p.resubscribe else subs.iloc[:0]
    return asks


def _pastry(p: ChurnParams, at: Point, run: Run, overlay, gone: Departures, routes: pd.DataFrame,
            t0: float, warm=None, subscribes: int | None = None, holders: pd.DataFrame | None = None,
            keep: bool = False) -> timed.TimedRun:
    """One timed run of the lookups, events and SUBSCRIBEs `routes` (those from id `subscribes` on, stopping
    where `holders` hold their topics), from `warm` (`timed.simulate`), its events kept with `keep`."""
    got = timed.simulate(overlay, gone.crashes, routes, timers(p, at), 1000.0 * p.duration_s, seed=p.seed,
                         bin_ms=1000.0 * p.bin_s, leaves=gone.leaves, recoveries=gone.returns,
                         newcomers=gone.newcomers, subscribes=subscribes, holders=holders, warm=warm,
                         keep=keep)
    if got.joined is not None:
        run.log(f"{at.label}: {len(got.joined):,} newcomers built their state, {len(got.joins_lost):,} "
                f"JOINs tried again")
    run.log(f"{at.label}: simulated in {got.passes} passes ({time.time() - t0:.1f}s): "
            f"{len(got.detections):,} detections, {len(got.repairs):,} leaf sets repaired, "
            f"{len(got.table_repairs):,} table entries refilled")
    return got


def _events(p: ChurnParams, at: Point, run: Run, overlay, start: timed_events.Start, gone: Departures,
            events: timed_events.Events, got: timed.TimedRun, lookups: int,
            subs: pd.DataFrame) -> timed_events.Outcomes:
    """What the events and heartbeats did on the trees the SUBSCRIBEs `subs` grew; the copies themselves
    kept with `check` only."""
    t0 = time.time()
    done = timed_events.ends(got, lookups, len(events.published))
    paths = timed_events.hops(subs, got, lookups + len(events.published))
    out = timed_events.outcomes(overlay, start, events, done, gone.spans, heartbeats(p), paths, keep=p.check,
                                with_holders=p.resubscribe)
    n = _reached(out)
    run.log(f"{at.label}: {n['events']:,} events issued reached {n['reached']:,} of the {n['expected']:,} "
            f"deliveries to subscribers up at their issue; {int(out.heartbeats.sum()):,} heartbeats, "
            f"{len(out.timeouts):,} parents declared dead by a child, {len(subs):,} SUBSCRIBEs "
            f"({time.time() - t0:.1f}s)")
    return out


def _reached(scribe: timed_events.Outcomes | None) -> dict[str, int]:
    """The events issued, and the deliveries expected and made (empty: no topics)."""
    if scribe is None:
        return {}
    rows = scribe.per_event
    return {"events": len(rows), "expected": int(rows.expected.sum()), "reached": int(rows.reached.sum()),
            "heartbeats": int(scribe.heartbeats.sum()), "heartbeat_timeouts": len(scribe.timeouts)}


def _check(p: ChurnParams, at: Point, run: Run, ring: Ring, gone: Departures, routed: pd.DataFrame,
           got: timed.TimedRun, events: timed_events.Events | None = None,
           scribe: timed_events.Outcomes | None = None, subs: pd.DataFrame | None = None) -> None:
    """Run the sequential reference on the same inputs; raise if anything differs."""
    t0 = time.time()
    until = 1000.0 * p.duration_s
    sim = reference_pastry(ring, timers(p, at), p.seed, gone)
    if events is None or scribe is None:
        differ = _differences(got, reference_result(sim, gone, routed, until), 1000.0 * p.bin_s)
    else:
        ref, mine, asked = _reference_rounds(p, ring, gone, routed, events, sim)
        differ = [] if asked.equals(subs) else ["SUBSCRIBEs"]
        differ += _differences(got, ref, 1000.0 * p.bin_s) if not differ else []
        timeouts = scribe.timeouts.drop(columns="t_gone")
        differ += [name for name, same in (("event deliveries", scribe.copies.equals(mine.copies)),
                                           ("heartbeats per bin", np.array_equal(scribe.heartbeats,
                                                                                 mine.heartbeats)),
                                           ("heartbeat timeouts", timeouts.equals(mine.timeouts)))
                   if not same]
    if differ:
        raise RuntimeError(f"{at.label}: the sequential reference differs from the Spark run in: "
                           f"{', '.join(differ)}")
    what = "lookups, detections, repairs" + (", events, heartbeats, SUBSCRIBEs" if events is not None else "")
    run.log(f"{at.label}: the sequential reference gives the same {what} and messages "
            f"({time.time() - t0:.1f}s)")


def _reference_rounds(p: ChurnParams, ring: Ring, gone: Departures, routed: pd.DataFrame,
                      events: timed_events.Events,
                      sim) -> tuple[object, timed_events.Reference, pd.DataFrame]:
    """The reference's own rounds of SUBSCRIBEs (as `_simulated`'s): its last Pastry run, its Scribe, and the
    SUBSCRIBEs it routed."""
    until, spans = 1000.0 * p.duration_s, list(gone.spans.itertuples(index=False, name=None))
    start = {x: sim.node_state(x)[:3] for x in range(ring.n)}   # before any run: the converged states
    asks = _asks(p, events, gone)
    subs = asks(timed_events.NO_TIMEOUTS)
    silent = replace(heartbeats(p), period_ms=math.inf, timeout_ms=math.inf)   # the start's holdings alone
    mine = timed_events.reference_outcomes(ring, start, events, None, 0, spans, silent)
    for _ in range(ROUNDS_MAX):
        routes = pd.concat([routed, subs[routed.columns]], ignore_index=True)
        topic, first, held = subs.topic.to_numpy(np.int64), len(routed), mine.holds

        def holds(lid: int, v: int, t: float, hop: int) -> bool:
            """Whether SUBSCRIBE lid's hop `hop`, at v at t, stops there."""
            return held(int(topic[lid - first]), v, t, lid - first, hop)
        ref = reference_result(sim, gone, routes, until, subscribes=first if len(subs) else None,
                               holds=holds if len(subs) else None)
        last = mine
        mine = timed_events.reference_outcomes(ring, start, events, ref, first - len(events.published), spans,
                                               heartbeats(p), subs)
        again = asks(mine.timeouts)
        if again.equals(subs) and mine.holdings == last.holdings:
            return ref, mine, subs
        subs = again
    raise RuntimeError(f"the reference's SUBSCRIBEs still changed after {ROUNDS_MAX} rounds")


def reference_differences(ring: Ring, tm: timed.Timers, seed: int, gone: Departures, lookups: pd.DataFrame,
                          until: float, width: float, got: timed.TimedRun) -> list[str]:
    """Run the sequential reference on a Spark run's inputs; what differs from the run (empty: nothing).

    `width` is the run's bin of messages (any width when the run counted them in one bin).
    """
    return _differences(got, reference_run(ring, tm, seed, gone, lookups, until), width)


def reference_run(ring: Ring, tm: timed.Timers, seed: int, gone: Departures, lookups: pd.DataFrame,
                  until: float, newcomers: set[int] | None = None):
    """The sequential reference's run on a Spark run's inputs: the ring's links, the seed's keep-alive
    phases, the departures and returns, the lookups, the newcomers."""
    return reference_result(reference_pastry(ring, tm, seed, gone), gone, lookups, until, newcomers)


def reference_pastry(ring: Ring, tm: timed.Timers, seed: int, gone: Departures):
    """The sequential reference on a Spark run's ring (its links), timers, keep-alive phases (the seed's) and
    nodes absent from the start, before it runs."""
    from scribe_spark.reference.timed_pastry import TimedParams, TimedPastry

    def link(u: int, v: int) -> float:
        return float(ring.prox.dist([u], [v])[0])
    phase = timed.keepalive_phase(np.arange(ring.n), seed, tm.keepalive_ms)
    params = TimedParams(keepalive_ms=tm.keepalive_ms, failure_timeout_ms=tm.failure_timeout_ms,
                         rto_ms=tm.rto_ms, proc_ms=tm.proc_ms, lookup_timeout_ms=tm.lookup_timeout_ms,
                         table_repair=tm.table_repair)
    return TimedPastry(ring, link, params, phase, gone.absent)


def reference_result(sim, gone: Departures, lookups: pd.DataFrame, until: float,
                     newcomers: set[int] | None = None, **subscribes):
    """The reference `sim`'s run of the departures and returns, the lookups and the newcomers (and the
    SUBSCRIBEs among the lookups, `subscribes`: `TimedPastry.run`'s)."""
    keys = (lookups[c].to_numpy(np.uint64).tolist() for c in ("key_hi", "key_lo"))
    asked = list(zip(lookups.t_issue.tolist(), lookups.src.tolist(), *keys))
    joining = set(gone.newcomers.tolist()) | (newcomers or set())
    return sim.run(gone.crashes, asked, until, gone.leaves, gone.returns, joining, **subscribes)


def _differences(got: timed.TimedRun, ref, width: float) -> list[str]:
    """What differs between the Spark run and the reference's result (empty: nothing)."""
    want = pd.DataFrame(ref.lookups, columns=["outcome", "dest", "hops", "timeouts", "latency_ms"])
    differ = [c for c in ("outcome", "dest", "hops", "timeouts")
              if got.lookups[c].tolist() != want[c].tolist()]
    if not np.array_equal(got.lookups.latency_ms.to_numpy(float), want.latency_ms.to_numpy(float),
                          equal_nan=True):
        differ.append("latency")
    pairs = {"detections": (zip(got.detections.failed, got.detections.detector, got.detections.t),
                            ((y, x, t) for y, x, _c, t in ref.detections)),
             "repair requests": (zip(*(got.repair_starts[c] for c in ("node", "failed", "asked", "t"))),
                                 ref.repair_starts),
             "repairs": (zip(got.repairs.node, got.repairs.t), ref.repairs),
             "table requests": (zip(*(got.table_asks[c] for c in ("node", "slot", "asked", "t"))),
                                ref.table_asks),
             "table repairs": (zip(*(got.table_repairs[c] for c in ("node", "slot", "entry", "t"))),
                               ref.table_repairs)}
    differ += [name for name, (a, b) in pairs.items() if sorted(a) != sorted(b)]
    if got.joined is not None or ref.joined:
        for name, mine, theirs in (("joins", got.joined, ref.joined), ("joins tried again", got.joins_lost,
                                                                        ref.joins_lost)):
            if mine is None or sorted(zip(mine.node, mine.t)) != sorted(theirs):
                differ.append(name)
    if got.messages != ref.messages:
        differ.append("message counts")
    # the reference's sends are binned here by hand, apart from the engine's `timed.Bins`, so that a wrong
    # rule there shows
    n = len(got.maintenance)
    for kind in (*timed.MAINTENANCE, *(k for k in (*timed.RECOVERY, *timed.JOINING) if k in got.maintenance)):
        at = np.minimum(np.asarray(ref.sent_at.get(kind, []), np.float64) // width, n - 1).astype(int)
        if got.maintenance[kind].tolist() != np.bincount(at, minlength=n).tolist():
            differ.append(f"{kind} messages per bin")
    return differ


def timeline(p: ChurnParams, ring: Ring, gone: Departures, lookups: pd.DataFrame,
             got: timed.TimedRun, scribe: timed_events.Outcomes | None = None) -> pd.DataFrame:
    """One row per bin: members, the lookups issued in it by outcome, the messages sent in it (heartbeats
    among them), and the events published in it and how they fared (`scribe`; None: no topics)."""
    width, until = 1000.0 * p.bin_s, 1000.0 * p.duration_s
    cut = timed.Bins(until, width)
    starts = got.maintenance.t_ms.to_numpy(np.float64)
    ends = np.minimum(starts + width, until)
    alive_s, members = _alive(ring.n, gone, starts, ends)
    rows = pd.DataFrame({"time_s": starts / 1000.0, "members": members})
    went = gone.within
    for name, times in (("crashes", went.down[~went.graceful]), ("leaves", went.down[went.graceful]),
                        ("returns", gone.back), ("arrivals", gone.arrivals)):
        rows[name] = cut.count(times)
    rows = rows.join(_lookup_bins(ring, lookups, got, cut, p.hop_ms))
    for name, kinds in KINDS.items():
        sent = _sent(got.maintenance, kinds).sum(axis=1).to_numpy(np.float64)
        rows[f"{name}_msgs_per_node_s"] = timed_events.ratio(sent, alive_s)   # no node alive: no rate
    n = len(starts)
    (beats, subscribes), size = _scribe_msgs(scribe, p, n)
    rows["heartbeat_msgs_per_node_s"] = timed_events.ratio(beats, alive_s)
    rows["subscribe_msgs_per_node_s"] = timed_events.ratio(subscribes, alive_s)
    rows["maintenance_msgs_per_node_s"] = (sum(rows[f"{name}_msgs_per_node_s"] for name in KINDS)
                                           + rows.heartbeat_msgs_per_node_s + rows.subscribe_msgs_per_node_s)
    rows["maintenance_bytes_per_node_s"] = timed_events.ratio(_bytes(got.maintenance, p) + size, alive_s)
    events = timed_events.none(n) if scribe is None else timed_events.bins(scribe.per_event, cut)
    return rows.join(events)


def _scribe_msgs(scribe: timed_events.Outcomes | None, p: ChurnParams,
                 n: int) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Scribe's maintenance per bin: (heartbeats, SUBSCRIBE hops and acknowledgements) and their bytes."""
    if scribe is None:
        return (np.zeros(n, np.int64), np.zeros(n, np.int64)), np.zeros(n, np.float64)
    hops = np.zeros(n, np.int64) if scribe.subscribe_msgs is None else scribe.subscribe_msgs
    acks = np.zeros(n, np.int64) if scribe.acks is None else scribe.acks
    size = (scribe.heartbeats * message_bytes("heartbeat", p.leaf_set) + hops * message_bytes("subscribe", 0)
            + acks * message_bytes("subscribe_ack", 0)).astype(np.float64)
    return (scribe.heartbeats, hops + acks), size


def _sent(maintenance: pd.DataFrame, kinds: tuple[str, ...]) -> pd.DataFrame:
    """The per-bin counts of these kinds of message (a run without returns or joins counts none of theirs)."""
    missing = [k for k in kinds if k not in maintenance and k in OPTIONAL]
    return maintenance.assign(**{k: 0 for k in missing})[list(kinds)]


def message_bytes(kind: str, leaf_set: int, row: int = 16) -> int:
    """A maintenance message's size in bytes: HEADER_BYTES and what its kind carries (`row`: the entries
    of a routing-table row, 2^b)."""
    extra = {"leaf_reply": 1 + leaf_set * HANDLE_BYTES, "rejoin_reply": 1 + leaf_set * HANDLE_BYTES,
             "table_request": 2, "table_reply": 2 + HANDLE_BYTES, "join": HANDLE_BYTES,
             "join_reply": 1 + (leaf_set + row) * HANDLE_BYTES, "heartbeat": TOPIC_BYTES,
             "subscribe": TOPIC_BYTES + HANDLE_BYTES, "subscribe_ack": TOPIC_BYTES}
    return HEADER_BYTES + extra.get(kind, 0)


def _bytes(maintenance: pd.DataFrame, p: ChurnParams) -> np.ndarray:
    """Maintenance bytes sent per bin."""
    kinds = (*timed.MAINTENANCE, *OPTIONAL)
    return sum(count.to_numpy(np.float64) * message_bytes(kind, p.leaf_set, 1 << p.b)
               for kind, count in _sent(maintenance, kinds).items())


def _alive(n: int, gone: Departures, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per bin [start, end): the node-seconds lived in it, and the nodes alive at its end."""
    t = np.sort(np.maximum(gone.spans.down.to_numpy(np.float64), 0.0))   # absent from the start: gone at 0
    before = np.r_[0.0, np.cumsum(t)]   # sums of the first k departure times
    i, j = np.searchsorted(t, starts, "right"), np.searchsorted(t, ends, "left")
    lived = (before[j] - before[i]) - (j - i) * starts + (n - j) * (ends - starts)
    members = n - np.searchsorted(t, ends, "right")
    u = np.sort(gone.spans.up.to_numpy(np.float64))
    u = u[np.isfinite(u)]
    if len(u):   # and the time lived after coming back: from max(start, up) to the end of the bin
        after = np.r_[0.0, np.cumsum(u)]
        i, j = np.searchsorted(u, starts, "right"), np.searchsorted(u, ends, "left")
        lived = lived + i * (ends - starts) + (j - i) * ends - (after[j] - after[i])
        members = members + np.searchsorted(u, ends, "right")
    return lived / 1000.0, members


def sweep_row(p: ChurnParams, ring: Ring, gone: Departures, lookups: pd.DataFrame, got: timed.TimedRun,
              rep: pd.DataFrame, scribe: timed_events.Outcomes | None = None) -> dict:
    """A sweep point from `warmup_s` to the end: the departures in that time (and how many of them a return
    followed), the lookups issued in it, its maintenance per node and second of node life, its crashes'
    delays (NaN rates if no node lives in it)."""
    until, first = 1000.0 * p.duration_s, round(p.warmup_s / p.bin_s)   # the first bin measured (validate)
    cut, whole = timed.Bins(until, 1000.0 * p.bin_s), timed.Bins(until, None)
    bins = got.maintenance.iloc[first:]
    since = float(bins.t_ms.iloc[0])   # its start, as timeline.csv has it
    late = cut.of(lookups.t_issue.to_numpy(np.float64)) >= first   # by bin of issue, as the timeline
    window = _lookup_bins(ring, lookups[late], replace(got, lookups=got.lookups[late]), whole,
                          p.hop_ms).iloc[0]
    alive_s = _lived(ring.n, gone, until, since)
    (beats, subscribes), scribe_size = _scribe_msgs(scribe, p, len(got.maintenance))
    sent = (float(_sent(bins, (*timed.MAINTENANCE, *OPTIONAL)).to_numpy().sum()) + int(beats[first:].sum())
            + int(subscribes[first:].sum()))
    size = float(_bytes(bins, p).sum()) + float(scribe_size[first:].sum())
    spans = gone.within   # in the order of rep's rows
    went = cut.of(spans.down.to_numpy(np.float64)) >= first
    rep, crashed = rep[went], rep[went & ~rep.graceful.to_numpy(bool)]
    return {"departures": len(rep), "returns": int((went & np.isfinite(spans.up.to_numpy())).sum()),
            "lookups": int(window.lookups), **{c: window[c] for c in WINDOW},
            "maintenance_msgs_per_node_s": sent / alive_s if alive_s > 0 else math.nan,
            "maintenance_bytes_per_node_s": size / alive_s if alive_s > 0 else math.nan,
            "crash_detected_after_s_mean": crashed.detected_after_s.mean(),
            "crash_repaired_after_s_mean": crashed.leaf_sets_repaired_after_s.mean(),
            **_events_window(None if scribe is None else scribe.per_event, cut, first)}


def _events_window(per_event: pd.DataFrame | None, cut: timed.Bins, first: int) -> dict:
    """The events published from bin `first` of `cut` on, as one bin (`timed_events.bins`)."""
    if per_event is None:
        row = timed_events.none(1)
    else:
        late = cut.of(per_event.t_issue.to_numpy(np.float64)) >= first
        row = timed_events.bins(per_event[late], timed.Bins(cut.until, None))
    return {c: (int if c == "publications" else float)(row[c].iat[0]) for c in row.columns}


def _lived(n: int, gone: Departures, until: float, since: float = 0.0) -> float:
    """The node-seconds lived from `since` to `until` (ms): each node until it first goes (or the end), then
    from each return to its next going (or the end)."""
    s = gone.spans
    first = s.drop_duplicates("node")
    end = np.full(n, np.inf)
    end[first.node.to_numpy(np.int64)] = first.down.to_numpy(np.float64)
    lived = np.maximum(np.minimum(end, until) - since, 0.0).sum() / 1000.0
    back = np.isfinite(s.up.to_numpy())
    if back.any():
        nxt = s.groupby("node").down.shift(-1).fillna(np.inf).to_numpy(np.float64)
        up = np.maximum(s.up.to_numpy(np.float64)[back], since)
        lived += np.maximum(np.minimum(nxt[back], until) - up, 0.0).sum() / 1000.0
    return float(lived)


def _lookup_bins(ring: Ring, lookups: pd.DataFrame, got: timed.TimedRun, cut: timed.Bins,
                 hop_ms: float) -> pd.DataFrame:
    """Per bin of `cut` by issue time: lookups issued, shares by outcome, latency, delay penalty, hops,
    timeouts."""
    done = got.lookups.assign(src=lookups.src.to_numpy(np.int64), bin=cut.of(lookups.t_issue.to_numpy()))
    done = done[done.outcome != "not_issued"]
    delivered = done[done.outcome.isin(("correct", "wrong"))]
    moved = delivered[delivered.dest != delivered.src]
    direct = ring.prox.dist(moved.src.to_numpy(np.int64), moved.dest.to_numpy(np.int64)) + hop_ms
    moved = moved.assign(rdp=moved.latency_ms.to_numpy(float) / direct)
    by, lat = done.groupby("bin"), delivered.groupby("bin").latency_ms
    out = pd.DataFrame({
        "lookups": by.size(),
        **{f"lookup_{name}": by.outcome.agg(lambda o, k=kind: float((o == k).mean()))
           for name, kind in (("success", "correct"), ("wrong", "wrong"), ("lost", "lost"))},
        "lookup_latency_ms_mean": lat.mean(), "lookup_latency_ms_p50": lat.median(),
        "lookup_latency_ms_p99": lat.quantile(0.99), "rdp_mean": moved.groupby("bin").rdp.mean(),
        "hops_mean": delivered.groupby("bin").hops.mean(), "timeouts_per_lookup": by.timeouts.mean()})
    out = out.reindex(np.arange(cut.n))
    out["lookups"] = out.lookups.fillna(0).astype(np.int64)
    return out


def repairs(gone: Departures, got: timed.TimedRun,
            scribe: timed_events.Outcomes | None = None) -> pd.DataFrame:
    """One row per departure within the run: who noticed it and when, and when the leaf sets that held it
    were whole; and, with topics, its children in the trees and when they noticed (`_orphans`)."""
    left = gone.within
    goings = left[["node", "down"]].rename(columns={"node": "failed"})

    def going(frame: pd.DataFrame) -> pd.DataFrame:
        """Each row with the departure it is about: its failed node's last going at or before its time."""
        return pd.merge_asof(frame.astype({"failed": np.int64}).sort_values("t"), goings, left_on="t",
                             right_on="down", by="failed")
    seen = going(got.detections).groupby(["failed", "down"]).t.agg(["size", "min"])
    # the leaf-set holders that declared it, each repaired by the first reply it merges after that
    held = going(got.repair_starts).drop_duplicates(["failed", "down", "node"])
    fixed = got.repairs.rename(columns={"t": "t_fixed"}).sort_values("t_fixed")
    held = pd.merge_asof(held, fixed, left_on="t", right_on="t_fixed", by="node", direction="forward",
                         allow_exact_matches=False)   # a merge at the declaration's time came before it
    leaf = held.groupby(["failed", "down"]).agg(n=("node", "size"), last=("t", "max"),
                                                fixed=("t_fixed", lambda v: v.max(skipna=False)))
    key = pd.MultiIndex.from_arrays([left.node, left.down], names=["failed", "down"])
    t0 = left.down.to_numpy(np.float64)
    out = pd.DataFrame({"node": left.node.to_numpy(np.int64), "left_s": t0 / 1000.0,
                        "graceful": left.graceful.to_numpy(bool)})
    out["detectors"] = seen["size"].reindex(key, fill_value=0).to_numpy()
    out["leaf_detectors"] = leaf.n.reindex(key, fill_value=0).to_numpy()
    out["detected_after_s"] = (seen["min"].reindex(key).to_numpy() - t0) / 1000.0
    out["leaf_detected_after_s"] = (leaf["last"].reindex(key).to_numpy() - t0) / 1000.0
    out["leaf_sets_repaired_after_s"] = (leaf.fixed.reindex(key).to_numpy() - t0) / 1000.0
    out["back_s"] = np.where(np.isfinite(left.up), left.up, np.nan) / 1000.0
    return _orphans(out, left, scribe)


def _orphans(out: pd.DataFrame, left: pd.DataFrame, scribe: timed_events.Outcomes | None) -> pd.DataFrame:
    """`repairs`' rows with the tree edges the departed node was the parent of when it went, how many of
    those children declared it dead before the end (one gone first, or too late, does not) and the time
    from the departure to the last of those declarations, and how many some node took again for the topic
    (a re-SUBSCRIBE grafted) and the time to the last of those."""
    if scribe is None:
        return out.assign(orphans=0, orphans_noticed=0, orphans_noticed_after_s=np.nan, orphans_reconnected=0,
                          orphans_reconnected_after_s=np.nan)
    key = pd.MultiIndex.from_arrays([left.node.to_numpy(np.int64), left.down.to_numpy(np.float64)])
    down = left.down.to_numpy(np.float64)

    def per_going(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """How many rows each departure has (by parent and t_gone), and the latest t among them."""
        by = rows.groupby(["parent", "t_gone"]).t
        return (by.size().reindex(key, fill_value=0).to_numpy(np.int64),
                by.max().reindex(key).to_numpy(np.float64))
    children = scribe.orphaned.set_index(["parent", "t_gone"]).children.reindex(key, fill_value=0)
    told, noticed = per_going(scribe.timeouts)
    back, joined = per_going(scribe.reconnected)
    return out.assign(orphans=children.to_numpy(np.int64), orphans_noticed=told,
                      orphans_noticed_after_s=(noticed - down) / 1000.0, orphans_reconnected=back,
                      orphans_reconnected_after_s=(joined - down) / 1000.0)


def report(outcome: Outcome, p: ChurnParams, run: Run) -> None:
    """Plot each point's lookups, latency, maintenance and delays, and the sweep if any; summarise."""
    t, rep, sweep = (outcome.tables[name] for name in ("timeline", "repairs", "sweep"))
    one = len(sweep) == 1
    at = f", mean session {sweep.mean_session_s.iat[0]:g} s, keep-alive {p.keepalive_s[0]:g} s"
    title = f"{p.nodes} nodes" + (at if one else "")
    series = [("lookups.png", "share of the lookups issued",
               ["lookup_success", "lookup_wrong", "lookup_lost"] if one else ["lookup_success"]),
              ("latency.png", "lookup latency (ms)", ["lookup_latency_ms_mean", "lookup_latency_ms_p50",
                                                      "lookup_latency_ms_p99"] if one else
               ["lookup_latency_ms_mean"]),
              ("maintenance.png", "messages per node per second",
               [f"{name}_msgs_per_node_s" for name in (*KINDS, *(["heartbeat"] if p.topics else []),
                                                        "maintenance")] if one else
               ["maintenance_msgs_per_node_s"])]
    if p.topics:
        series.append(("events.png", "share of the deliveries owed", ["event_delivery_ratio"]))
    for png, ylabel, cols in series:
        with plots.figure(run.path(png), title, "time (s)", ylabel) as ax:
            for key, rows in t.groupby(KEYS, sort=False):
                for col in cols:
                    ax.plot(rows.time_s, rows[col], label=_label(col, key, one))
    with plots.figure(run.path("repairs.png"), title, "after the departure (s)", "share") as ax:
        for key, rows in rep.groupby(KEYS, sort=False):
            for how, part in (("crashes", rows[~rows.graceful]), ("leaves", rows[rows.graceful])):
                for col in (DELAYS if one else DELAYS[2:]) if len(part) else ():
                    plots.cdf(ax, part[col].dropna(), label=f"{how}: {_label(col, key, one)}")
    if not one:
        _sweep_plots(sweep, p, run)
    _summary(outcome, p, run)


def _label(col: str, key: tuple, one: bool) -> str:
    """A series' legend: the column in words, and the point when there are several."""
    words = col.removesuffix("_s").removesuffix("_msgs_per_node").replace("_", " ")
    return words if one else f"{words}, session {key[0]:g} s, keep-alive {key[1]:g} s"


def _sweep_plots(sweep: pd.DataFrame, p: ChurnParams, run: Run) -> None:
    """Lookup failures, latency and maintenance against the swept knob, one line per value of the other."""
    x, by = ("keepalive_s", "mean_session_s") if len(p.keepalive_s) > 1 else ("mean_session_s", "keepalive_s")
    failed = sweep.assign(lookup_failed=sweep.lookup_wrong + sweep.lookup_lost)
    for png, col, ylabel in (("sweep_failures.png", "lookup_failed", "share of lookups wrong or lost"),
                             ("sweep_latency.png", "lookup_latency_ms_p99", "99th percentile latency (ms)"),
                             ("sweep_maintenance.png", "maintenance_msgs_per_node_s",
                              "maintenance messages per node per second")):
        with plots.figure(run.path(png), f"{p.nodes} nodes, {p.duration_s:g} s", x, ylabel) as ax:
            for value, rows in failed.groupby(by, sort=False):
                ax.plot(rows[x], rows[col], "-o", ms=3, label=f"{by} = {value:g}")
            if x == "mean_session_s":   # the same points against the median session, which the law fixes
                ratio = SessionLaw.of(p, 1.0).median
                top = ax.secondary_xaxis("top", functions=(lambda m: m * ratio, lambda m: m / ratio))
                top.set_xlabel(f"median session (s): {ratio:.3g} x mean ({p.session})")


def _stats(v: pd.Series) -> list[float]:
    """Count, mean, median and maximum (nan when empty, with no warning)."""
    return [v.count(), v.mean(), v.median(), v.max()]


def _delays(rep: pd.DataFrame) -> pd.DataFrame:
    """Count, mean, median and maximum of each delay of repairs.csv, for crashes and for leaves, per point."""
    out = []
    for key, part in rep.groupby(KEYS, sort=False):
        for how, rows in (("crash", part[~part.graceful]), ("leave", part[part.graceful])):
            stats = {c: _stats(rows[c].dropna()) for c in DELAYS}
            out.append(pd.DataFrame(stats).assign(statistic=["count", "mean", "median", "max"], departure=how,
                                                  **dict(zip(KEYS, key))))
    columns = [*KEYS, "departure", "statistic", *DELAYS]
    return pd.concat(out)[columns] if out else pd.DataFrame(columns=columns)   # no departures: no rows


def _point_line(n: dict) -> str:
    """A sweep point's line of the summary: its departures, passes and messages."""
    sent = ", ".join(f"{k} {v:,}" for k, v in sorted(n["messages"].items()))
    events = (f"; {n['events']:,} events made {n['reached']:,} of the {n['expected']:,} deliveries owed to "
              f"the subscribers up at their publication; {n['heartbeats']:,} heartbeats, "
              f"{n['heartbeat_timeouts']:,} heartbeat timeouts" if "events" in n else "")
    return (f"\n- {n['mean_session_s']:g} s sessions, keep-alive {n['keepalive_s']:g} s: "
            f"{n['crashes']} crash, {n['leaves']} leave{_back(n)}; {n['passes']} passes; messages {sent}"
            f"{events}")


def _back(n: dict) -> str:
    """A point's returns in its summary line, if any, and its nodes down at the start, if any."""
    away = f", {n['absent']} down at the start" if n.get("absent") else ""
    new = f", {n['arrivals']} join" if "arrivals" in n else ""
    return (f", {n['returns']} come back" if n.get("returns") else "") + new + away


def _returning(p: ChurnParams) -> str:
    """Who comes back or joins, in words."""
    if p.session == "trace":
        return ("who is up when is the trace's: a node with a session under way at 0 is a member, a node "
                "first seen later joins by Pastry's join, in time, and a node's later sessions are returns "
                "with the state it had")
    if p.arrivals == "steady":
        back = (f"after a share {p.recover_share:g} of the departures the node comes back after a downtime "
                f"of mean {p.mean_downtime_s:g} s ({_law(p)}), for a new session; " if p.recover_share
                else "nobody recovers; ")
        return (back + "newcomers join by Pastry's join, in time, as a Poisson process at the rate nodes "
                "leave for good (nodes x (1 - recover_share) / mean session per second), then live "
                "sessions as the others")
    if p.recover_share == 0:
        return "nobody joins or recovers"
    steady = ("; the run starts in the steady state: each node down with chance mean downtime / (mean "
              "session + mean downtime), for what remains of a downtime under way, and in no other node's "
              "state"
              if p.start == "steady" else "")
    return (f"after a share {p.recover_share:g} of the departures the node comes back after a downtime of "
            f"mean {p.mean_downtime_s:g} s ({_law(p)}), for a new session; nobody joins{steady}")


def _topics(p: ChurnParams) -> str:
    """The Scribe workload, in words (nothing without topics)."""
    if not p.topics:
        return ""
    trees = ("repaired by re-SUBSCRIBEs in time" if p.resubscribe else "not repaired")
    return (f"; {p.topics} Scribe topics of {p.subscribers} subscribers each, {p.publications_per_topic_s:g} "
            f"events per topic per second, sent down the trees built at the start ({trees})")


def _law(p: ChurnParams) -> str:
    """The downtime law and its shape, in words."""
    if p.downtime == "weibull":
        return f"Weibull, k = {p.downtime_weibull_shape:g}"
    if p.downtime == "pareto":
        return f"Pareto, alpha = {p.downtime_pareto_shape:g}"
    return p.downtime


def _window(p: ChurnParams) -> str:
    """The time sweep.csv measures, in words."""
    return f"per point, from {p.warmup_s:g} s to the end" if p.warmup_s else "whole run per point"


def _summary(outcome: Outcome, p: ChurnParams, run: Run) -> None:
    """Write summary.md: the setup, each point, the sweep, the delays' statistics and the timeline."""
    t, rep, sweep, notes = (outcome.tables["timeline"], outcome.tables["repairs"], outcome.tables["sweep"],
                            outcome.notes)
    shape = {"weibull": f", shape {p.weibull_shape:g}",
             "pareto": f", shape {p.pareto_shape:g}", "trace": f" ({p.trace})"}.get(p.session, "")
    events = ", events' deliveries, heartbeats, heartbeat timeouts" if p.topics else ""
    checked = (f"The sequential reference simulation gave the same lookups, detections, repairs{events} and "
               "message counts at every point." if notes["checked"] else
               "Not checked against the sequential reference (check = false).")
    points = "".join(_point_line(n) for n in notes["points"])
    run.path("summary.md").write_text(
        f"# churn\n\n{p.nodes} nodes ({p.proximity} model, b={p.b}, |L|={p.leaf_set}) for "
        f"{p.duration_s:g} simulated seconds; {p.session} sessions{shape}, a share {p.leave_share:g} of the "
        f"departures graceful leaves, the others crashes; {_returning(p)}. Failure timeout "
        f"{p.failure_timeout_s:g} s, retransmission timeout {p.rto_ms:g} ms, {p.hop_ms:g} ms per hop; "
        f"{p.lookups_per_node_s:g} lookups per node per second, lost after {p.lookup_timeout_s:g} s"
        f"{_topics(p)}; seed {p.seed}. Routing-table entries that lookups find dead: "
        f"{'refilled by asking their row' if p.table_repair == 'lazy' else 'left empty'}. Every point "
        "draws the same uniform numbers (sessions scaled by their mean, the same "
        f"lookups). {checked}\n\nPoints:{points}\n\n"
        "Lookups are binned by issue time; success = delivered to the live node numerically closest to the "
        "key at delivery. Lookups still in flight at the end count in no share. Messages are binned by "
        f"sending time; per node and second of node life.\n\n## Sweep ({_window(p)})\n\n"
        + plots.markdown_table(sweep, ".4f")
        + "\n\n## Departures: detection and leaf-set repair (s after the departure)\n\n"
        + plots.markdown_table(_delays(rep), ".3f")
        + "\n\n## Timeline\n\n" + plots.markdown_table(t, ".4f") + "\n")
