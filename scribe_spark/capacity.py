"""Machine-size check made before Spark starts: refuse a run whose state cannot fit in this machine.

The estimates are lower bounds of what a run must hold at once (ids, node state, router
delays, subscriptions), so a refused run could never have finished here; a run that
passes may still need more (Spark's own overhead comes on top).
"""
from __future__ import annotations

import math
import os
from typing import Any

from scribe_spark.config import (
    ChurnParams,
    ConfigError,
    OverlayParams,
    PastryFailuresParams,
    PastryHopsParams,
    PastryJoinsParams,
    TnoOrderingParams,
    TnoSequencerParams,
    TnoSizeParams,
    TopologyParams,
)


def machine_bytes() -> int:
    """Return this machine's physical memory in bytes."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def node_bytes(nodes: int, b: int, leaf_set: int, neighborhood: int) -> int:
    """Lower bound of the bytes `nodes` Pastry nodes need: ids, ring order and their state entries."""
    rows = max(1, math.ceil(math.log(max(nodes, 2), 2 ** b)))
    entries = leaf_set + neighborhood + rows * (2 ** b - 1)
    return nodes * (64 + 8 * entries)


def router_bytes(topology: TopologyParams) -> int:
    """Lower bound of the bytes of the transit-stub all-pairs delays and next hops (computed in float64)."""
    return topology.routers ** 2 * 20


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def needs(p: Any) -> list[tuple[str, int, str]]:
    """Return (key, bytes, what) for the parts of a run that grow with its parameters."""
    out = []
    if isinstance(p, OverlayParams):
        nodes = p.peak_nodes()
        out.append(("nodes", node_bytes(nodes, p.b, p.leaf_set, p.neighborhood),
                    f"{nodes:,} nodes' ids and Pastry state"))
        if p.proximity == "transit-stub":
            out.append(("topology", router_bytes(p.topology),
                        f"all-pairs delays of {p.topology.routers:,} routers"))
    if isinstance(p, (PastryHopsParams, PastryFailuresParams, PastryJoinsParams, ChurnParams)):
        out.append(("lookups", p.lookups * 48, f"{p.lookups:,} lookups"))
    if isinstance(p, (TnoSizeParams, TnoOrderingParams, TnoSequencerParams)):
        k = max(p.topics_per_client) if isinstance(p.topics_per_client, tuple) else p.topics_per_client
        out.append(("clients", p.clients * k * 16, f"{p.clients * k:,} subscriptions"))
    if isinstance(p, TnoSequencerParams):
        events = max(p.rates) * p.duration_s
        out.append(("rates", int(events * 512), f"{events:,.0f} simulated events"))
    if isinstance(p, TnoOrderingParams):
        out.append(("events", p.events * 512, f"{p.events:,} simulated events"))
    return out


def check(p: Any, limit: int | None = None) -> None:
    """Raise ConfigError naming the key when a run cannot fit in `limit` bytes (default: this machine)."""
    limit = machine_bytes() if limit is None else limit
    for key, size, what in needs(p):
        if size > limit:
            raise ConfigError(f"key '{key}': {what} need at least {_human(size)}, more than this machine's "
                              f"{_human(limit)} of memory; lower '{key}'")
    parts = needs(p)
    total = sum(size for _, size, _ in parts)
    if total > limit:
        key = max(parts, key=lambda part: part[1])[0]
        raise ConfigError(f"key '{key}': this run needs at least {_human(total)} in all, more than this "
                          f"machine's {_human(limit)} of memory; lower '{key}', its largest part")
