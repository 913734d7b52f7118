"""The papers' figures that `./run.sh reproduce` puts beside ours: setups, metric names, readers, plots.

A figure names the job that measures it, the paper's setup next to the run's (every difference
named), its metrics and how to read them from the job's tables, and a plot. A metric is written
`name`, `name[variant]`, `name@x` or `name[variant]@x`: `variant` picks one series (a popularity
model, a routing mode, a second join phase, ...) and `x` a point on the figure's x axis (a
number such as the overlay size, or a category such as a phase). These strings are what a
published-values file names in its `metric` column.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

Params = dict            # a job's resolved parameters, as read back from its params.toml
Row = tuple[str, str, str, str]   # (aspect, the paper's, ours, the difference or "")

PASTRY = "Pastry (Rowstron & Druschel, Middleware 2001)"
SCRIBE = "Scribe (Castro, Druschel, Kermarrec & Rowstron, IEEE JSAC 2002; Rowstron et al., NGC 2001)"
TNO = "TNO (Baldoni, Bonomi, Platania & Querzoni, \"Efficient Notification Ordering for Geo-Distributed " \
      "Pub/Sub Systems\")"


@dataclass(frozen=True)
class Metric:
    """One measured quantity of a figure: its name, what it is, and its variant and x dimensions."""

    name: str
    about: str
    variant: str | None = None   # a dimension of Figure.dims: the series
    x: str | None = None         # a dimension of Figure.dims (a category) or the x axis's name (a number)


@dataclass(frozen=True)
class Figure:
    """A paper's figure or table, the job that measures it, and how the report reads and plots it."""

    name: str
    paper: str
    title: str
    job: str
    what: str
    metrics: tuple[Metric, ...]
    setup: Callable[[Params], list[Row]]
    values: Callable[[Path, Params], list[tuple]]          # (metric, variant, x, value) rows
    plot: Callable[..., None]                              # plot(ax, folder, params, ours, published)
    xlabel: str = ""
    ylabel: str = ""
    dims: Callable[[Params], dict[str, list[str]]] = field(default=lambda p: {})
    notes: str = ""

    def metric(self, name: str) -> Metric | None:
        return next((m for m in self.metrics if m.name == name), None)


# ------------------------------------------------------------------ metric keys

KEY = re.compile(r"^(?P<name>[A-Za-z0-9_]+)(?:\[(?P<variant>[^\]]+)\])?(?:@(?P<x>.+))?$")


def key(metric: str, variant: str = "", x=None) -> str:
    """The written form of one metric value: name[variant]@x."""
    return metric + (f"[{variant}]" if variant else "") + ("" if x is None or x == "" else f"@{fmt_x(x)}")


def fmt_x(x) -> str:
    """An x value as a metric key writes it (integers without a decimal point)."""
    if isinstance(x, (int, np.integer)) or (isinstance(x, float) and x.is_integer()):
        return str(int(x))
    return f"{x:g}" if isinstance(x, float) else str(x)


def norm_x(x):
    """An x value as it is compared: numbers as floats, categories as strings."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return "" if x is None else str(x)


# ------------------------------------------------------------------ shared pieces

def _n(v) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}" if isinstance(v, float) else str(v)


def _row(aspect: str, paper: str, ours: str, differs: bool, why: str = "") -> Row:
    return (aspect, paper, ours, why if differs else "")


def _pastry_rows(p: Params) -> list[Row]:
    return [_row("b, |L|, |M|", "4, 16, 32", f"{p['b']}, {p['leaf_set']}, {p['neighborhood']}",
                 (p["b"], p["leaf_set"], p["neighborhood"]) != (4, 16, 32), "other Pastry parameters")]


def _plane(p: Params) -> Row:
    return _row("network", "nodes at random points of a Euclidean plane", f"`{p['proximity']}` model",
                p["proximity"] != "plane", "another proximity model")


def _converged() -> Row:
    return _row("node state", "kept by the paper's join and maintenance protocols",
                "converged: each routing-table entry is the proximity-best candidate (figure "
                "pastry_join_quality shows how far joins get from it)", True,
                "an upper bound on locality; overlays grown by joins hold the best node in fewer entries")


def _seed(p: Params) -> Row:
    return ("seed", "—", f"{p['seed']} (results are deterministic for a seed)", "")


def _csv(folder: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(folder / name)


_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
           "tab:olive", "tab:cyan", "tab:gray")
_MARKERS = ("X", "P", "D", "*", "v", "^")


def colors(variants) -> dict[str, str]:
    """One color per series, shared by our lines and the published points of the same series."""
    return {v: _COLORS[i % len(_COLORS)] for i, v in enumerate(dict.fromkeys(variants))}


def mark(ax, pub: pd.DataFrame, xy: Callable[[pd.Series], tuple | None], color: Callable[[str], str]) -> None:
    """Mark published values: one marker shape per source, colored like our series of the same variant."""
    shapes = {s: _MARKERS[i % len(_MARKERS)] for i, s in enumerate(dict.fromkeys(pub.source))}
    labelled = set()
    for _, r in pub.iterrows():
        at = xy(r)
        if at is None:
            continue
        label = None if r.source in labelled else f"published: {r.source}"
        labelled.add(r.source)
        ax.scatter([at[0]], [at[1]], marker=shapes[r.source], s=70, color=color(r.variant),
                   edgecolors="black", linewidths=0.8, zorder=5, label=label)


def _lines(ax, ours: pd.DataFrame, metric: str, pub: pd.DataFrame, style: str = "-", label_fmt="{v}",
           logx: bool = False) -> dict[str, str]:
    """Our series of one metric as lines over x (one per variant); published points of it marked."""
    rows = ours[ours.metric == metric]
    col = colors(rows.variant)
    for v, g in rows.groupby("variant", sort=False):
        g = g.sort_values("x")
        ax.plot(g.x.astype(float), g.value, style, marker="o", ms=3, color=col[v],
                label=label_fmt.format(v=v or metric, m=metric))
    mine = pub[pub.metric == metric]
    mark(ax, mine, lambda r: (float(r.x), r.value) if r.x != "" else None, lambda v: col.get(v, "black"))
    if logx:
        ax.set_xscale("log")
    return col


# ------------------------------------------------------------------ Pastry

def _hops_values(folder: Path, p: Params) -> list[tuple]:
    h = _csv(folder, "hops.csv")
    return ([("mean_hops", "", n, v) for n, v in zip(h.nodes, h.mean_hops)]
            + [("max_hops", "", n, v) for n, v in zip(h.nodes, h.max_hops)]
            + [("log_2b_n", "", n, v) for n, v in zip(h.nodes, h.log_2b_n)])


def _hops_setup(p: Params) -> list[Row]:
    sizes = list(p["nodes"])
    return [_row("overlay sizes", "1,000 … 100,000 nodes", ", ".join(f"{n:,}" for n in sizes),
                 max(sizes) < 100_000 or min(sizes) > 1000, "a smaller range of sizes"),
            *_pastry_rows(p), _plane(p),
            _row("lookups", "200,000 between random node pairs, per size",
                 f"{p['lookups']:,} per size and mode",
                 p["lookups"] != 200_000, "fewer lookups (more sampling noise)"),
            _converged(), _seed(p)]


def _hops_plot(ax, folder, p, ours, pub) -> None:
    ref = ours[ours.metric == "log_2b_n"].sort_values("x")
    ax.plot(ref.x, ref.value, ":", color="gray", label="log_2^b N")
    _lines(ax, ours, "mean_hops", pub, label_fmt="mean hops (ours)", logx=True)
    mark(ax, pub[pub.metric == "max_hops"], lambda r: (float(r.x), r.value), lambda v: "black")


def _hist_values(folder: Path, p: Params) -> list[tuple]:
    d = _csv(folder, "hop_distribution.csv")
    d = d[d.nodes == d.nodes.max()]
    return [("fraction", "", h, f) for h, f in zip(d.hops, d.fraction)]


def _hist_setup(p: Params) -> list[Row]:
    n = max(p["nodes"])
    return [_row("overlay size", "100,000 nodes", f"{n:,} (the largest of the run)", n != 100_000,
                 "another overlay size"), *_hops_setup(p)[1:]]


def _hist_plot(ax, folder, p, ours, pub) -> None:
    rows = ours[ours.metric == "fraction"]
    ax.bar(rows.x.astype(float), rows.value, color="tab:blue", alpha=0.7, label="ours")
    mark(ax, pub, lambda r: (float(r.x), r.value), lambda v: "black")


def _distance_values(folder: Path, p: Params) -> list[tuple]:
    d = _csv(folder, "distance.csv")
    return [("relative_distance", m, n, v) for n, m, v in zip(d.nodes, d["mode"], d.mean_relative_distance)]


def _distance_setup(p: Params) -> list[Row]:
    return [*_hops_setup(p)[:3],
            ("definition", "route distance / distance of the one direct hop source → destination, with "
             "and without proximity neighbor selection", "the same: `proximity` and `random` modes", ""),
            *_hops_setup(p)[3:]]


def _failures_values(folder: Path, p: Params) -> list[tuple]:
    f = _csv(folder, "failures.csv").set_index("phase")
    out = [(m, "", ph, f.at[ph, m]) for m in ("mean_hops", "correct_fraction", "timeouts_per_lookup")
           for ph in f.index]
    after = f.loc["after_repair"]
    out += [("repair_rpcs_per_failed_node", "", "", after.repair_rpcs_per_failed_node),
            ("repair_messages_per_failed_node", "", "", after.repair_messages_per_failed_node)]
    r = _csv(folder, "repair.csv").iloc[0]
    table = r.table_rpcs_per_failed_node
    if (folder / "lazy_passes.csv").exists():   # lazy: the first pass over the lookups is the repair counted
        table = _csv(folder, "lazy_passes.csv").set_index("pass").at[1, "table_rpcs_per_failed_node"]
    out += [("leaf_set_rpcs_per_failed_node", "", "", r.leaf_rpcs_per_failed_node),
            ("routing_table_rpcs_per_failed_node", "", "", table)]
    return out


def _failures_setup(p: Params) -> list[Row]:
    return [_row("overlay", "5,000 nodes", f"{p['nodes']:,} nodes", p["nodes"] != 5000, "another size"),
            _row("failures", "10% of the nodes fail silently", f"{p['fail_fraction']:.0%}",
                 p["fail_fraction"] != 0.1, "another share of failures"),
            _row("lookups", "200,000 before, after the failures (no repair), after repair",
                 f"{p['lookups']:,} random keys from random surviving nodes, the same in every phase",
                 p["lookups"] != 200_000, "fewer lookups"),
            *_pastry_rows(p), _plane(p),
            _row("repair", "leaf sets eagerly, routing-table entries lazily when a route meets them",
                 f"leaf sets eagerly; routing tables `{p['table_repair']}`", p["table_repair"] != "lazy",
                 "every dead entry repaired before routing (eager)"),
            ("repair cost", "remote procedure calls (a request and its reply) per failed node",
             "RPCs per failed node: leaf-set repair plus the routing-table repair of the first pass over "
             "the lookups; a dead contact asked during repair is skipped at no cost",
             "asking a dead contact costs nothing here (a timeout in a real overlay)"),
            _converged(), _seed(p)]


def _failures_plot(ax, folder, p, ours, pub) -> None:
    rows = ours[ours.metric == "mean_hops"]
    phases = list(rows.x)
    ax.bar(range(len(rows)), rows.value, color="tab:blue", alpha=0.7, label="mean hops (ours)")
    ax.set_xticks(range(len(rows)), phases)
    mark(ax, pub[pub.metric == "mean_hops"], lambda r: (phases.index(r.x), r.value), lambda v: "black")


_KINDS = ("optimal", "suboptimal", "empty")


def _joins_values(folder: Path, p: Params) -> list[tuple]:
    q = _csv(folder, "join_quality.csv")
    j = _csv(folder, "joins.csv")
    out = [(f"{k}_per_node", r.improve, r.row, getattr(r, k) / p["nodes"]) for r in q.itertuples()
           for k in _KINDS]
    for r in j.itertuples():
        out += [("proximity_best_share", r.improve, "", r.proximity_best_share),
                ("mean_hops", r.improve, "", r.mean_hops),
                ("exchange_messages_per_newcomer", r.improve, "",
                 r.row_exchange_per_newcomer + r.table_exchange_per_newcomer)]
    return out


def _joins_setup(p: Params) -> list[Row]:
    return [_row("overlay", "5,000 nodes", f"{p['nodes']:,} nodes", p["nodes"] != 5000, "another size"),
            *_pastry_rows(p), _plane(p),
            ("how nodes join", "one Pastry join per newcomer (the SPEC does not say how many at once)",
             f"{p['initial']:,} nodes start converged, the others join in batches of {p['batch']:,} "
             "concurrent joins", "concurrent batches from a converged core"),
            ("second phase", "the newcomer asks the nodes in its tables for their state: first the row-i "
             "entries of its row-i nodes, then whole routing tables",
             f"phases measured: {', '.join(p['improve'])}; every row is asked at once, from the tables the "
             "route gave; the neighborhood set is not asked",
             "simpler than the paper's row-after-row exchange: a lower bound on its quality"),
            ("optimal", "the entry is the closest node (by proximity) among the valid ones",
             "the entry is the converged construction's, the proximity-best valid node; per node = "
             "totals / nodes, over the slots the converged construction fills", ""),
            _seed(p)]


def _joins_plot(ax, folder, p, ours, pub) -> None:
    col = colors(p["improve"])
    for kind, style in zip(_KINDS, ("-", "--", ":")):
        rows = ours[ours.metric == f"{kind}_per_node"]
        for v, g in rows.groupby("variant", sort=False):
            ax.plot(g.x.astype(float), g.value, style, marker="o", ms=3, color=col[v], label=f"{kind}, {v}")
    mark(ax, pub[pub.metric.str.endswith("_per_node")], lambda r: (float(r.x), r.value),
         lambda v: col.get(v, "black"))
    ax.set_xticks(sorted(ours[ours.metric == "optimal_per_node"].x.astype(int).unique()))


def _joins_dims(p: Params) -> dict[str, list[str]]:
    return {"phase": list(p["improve"])}


def _modes(p: Params) -> dict[str, list[str]]:
    return {"mode": ["proximity", "random"]}


def _phases(p: Params) -> dict[str, list[str]]:
    return {"phase": ["before", "after_failure", "after_repair"]}


# ------------------------------------------------------------------ Scribe

def _scribe_rows(p: Params, small: bool) -> list[Row]:
    sizes = (f"{p['topics']:,} topics of {p['group_size']} subscribers" if p["group_size"]
             else f"{p['topics']:,} topics, rank r has floor(N r^-{p['size_exponent']:g} + 0.5) subscribers")
    paper_sizes = ("many topics of 11 subscribers each (the SPEC gives the size, not the count)" if small
                   else "1,500 topics, rank r has floor(N r^-1.25 + 0.5) subscribers")
    want = (p["group_size"] == 11) if small else (p["topics"] == 1500 and p["size_exponent"] == 1.25
                                                  and not p["group_size"])
    t = p["topology"]
    routers = t["transit_domains"] * t["routers_per_transit"] * (1 + t["stubs_per_transit_router"]
                                                                  * t["routers_per_stub"])
    return [_row("overlay", "100,000 Scribe nodes", f"{p['nodes']:,} nodes", p["nodes"] != 100_000,
                 "another size"),
            _row("network", "transit-stub, 5,050 routers; nodes on random stub routers by LAN links",
                 f"transit-stub, {routers:,} routers; 1 ms LAN links", routers != 5050,
                 "another router graph"),
            ("link delays", "the paper's transit-stub model (the SPEC gives no values)",
             f"transit {t['delay_transit_transit']:g}, inter-transit {t['delay_inter_transit']:g}, "
             f"transit-stub {t['delay_transit_stub']:g}, stub {t['delay_stub_stub']:g} ms",
             "our choice of delays"),
            _row("topics", paper_sizes, sizes + ("" if small else "; subscribers are random distinct nodes"),
                 not want, "another topic workload"),
            _row("topic naming", "topicId = hash of name and creator (or the creator's id then the hash)",
                 f"`{p['topic_root']}`", False),
            *_pastry_rows(p), _converged(), _seed(p)]


def _delay_values(folder: Path, p: Params) -> list[tuple]:
    d = _csv(folder, "delay.csv").dropna(subset=["rmd", "rad"])
    out = []
    for m in ("rmd", "rad"):
        v = np.sort(d[m].to_numpy())
        out += [(f"{m}_median", "", "", float(np.median(v))), (f"{m}_mean", "", "", float(v.mean())),
                (f"{m}_max", "", "", float(v.max()))]
        for x in (1.0, 1.25, 1.5, 2.0, 2.5, 3.0):
            out.append((f"{m}_fraction_below", "", x, float(np.searchsorted(v, x, side="right") / len(v))))
    return out


def _delay_plot(ax, folder, p, ours, pub) -> None:
    d = _csv(folder, "delay.csv").dropna(subset=["rmd", "rad"])
    col = {"rmd": "tab:blue", "rad": "tab:orange"}
    for m, label in (("rmd", "RMD (max delay)"), ("rad", "RAD (mean delay)")):
        v = np.sort(d[m].to_numpy())
        ax.step(v, np.arange(1, len(v) + 1) / max(len(v), 1), where="post", color=col[m],
                label=f"{label}, ours")

    def at(r):
        m = r.metric[:3]
        if r.metric.endswith("_fraction_below"):
            return float(r.x), r.value
        if r.metric.endswith("_median"):
            return r.value, 0.5
        ax.axvline(r.value, color=col[m], ls=":", lw=1)
        return r.value, 1.0 if r.metric.endswith("_max") else 0.05
    mark(ax, pub.assign(variant=pub.metric.str[:3]), at, lambda v: col.get(v, "black"))


def _stress_values(folder: Path, p: Params) -> list[tuple]:
    s = _csv(folder, "node_stress.csv").set_index("metric")
    out = []
    for what in ("children_entries", "topics_forwarded"):
        out += [(f"{what}_mean_all", "", "", s.at[what, "mean_all_nodes"]),
                (f"{what}_mean_nonzero", "", "", s.at[what, "mean_nonzero"]),
                (f"{what}_max", "", "", float(s.at[what, "max"]))]
    return out


def _stress_plot(ax, folder, p, ours, pub) -> None:
    d = _csv(folder, "node_stress_distribution.csv")
    d = d[(d.metric == "children_entries") & (d.value > 0)]
    ax.loglog(d.value, d.nodes, "o", ms=3, label="children-table entries (ours)")
    for _, r in pub[pub.metric.str.startswith("children_entries")].iterrows():
        ax.axvline(r.value, color="black", ls=":", lw=1)
    mark(ax, pub[pub.metric.str.startswith("children_entries")], lambda r: (r.value, d.nodes.max()),
         lambda v: "black")


def _link_values(folder: Path, p: Params) -> list[tuple]:
    s = _csv(folder, "link_stress.csv")
    return [(m, r.scheme, "", float(getattr(r, m))) for r in s.itertuples()
            for m in ("mean", "max", "links_used", "total_copies")]


def _link_plot(ax, folder, p, ours, pub) -> None:
    schemes = ["scribe", "ip_multicast"]
    col = colors(schemes)
    for i, m in enumerate(("mean", "max")):
        rows = ours[ours.metric == m].set_index("variant")
        xs = [i * 3 + j for j in range(len(schemes))]
        ax.bar(xs, [rows.at[s, "value"] for s in schemes], color=[col[s] for s in schemes], alpha=0.7,
               label=[f"{s} (ours)" for s in schemes] if i == 0 else None)
    ax.set_xticks([0.5, 3.5], ["mean copies per used link", "max copies on a link"])
    ax.set_yscale("log")
    mark(ax, pub[pub.metric.isin(["mean", "max"])],
         lambda r: ((0 if r.metric == "mean" else 3) + schemes.index(r.variant), r.value),
         lambda v: col.get(v, "black"))


def _schemes(p: Params) -> dict[str, list[str]]:
    return {"scheme": ["scribe", "ip_multicast"]}


def _small_values(folder: Path, p: Params) -> list[tuple]:
    return (_stress_values(folder, p) + [(f"link_stress_{m}", v, x, val) for m, v, x, val in
                                         _link_values(folder, p) if m in ("mean", "max")]
            + [r for r in _delay_values(folder, p) if not r[0].endswith("_fraction_below")])


def _small_plot(ax, folder, p, ours, pub) -> None:
    renamed = ours.assign(metric=ours.metric.str.replace("link_stress_", "", regex=False))
    _link_plot(ax, folder, p, renamed[renamed.metric.isin(["mean", "max"])],
               pub[pub.metric.str.startswith("link_stress_")].assign(
                   metric=lambda d: d.metric.str.replace("link_stress_", "", regex=False)))


# ------------------------------------------------------------------ TNO

def _t1_values(folder: Path, p: Params) -> list[tuple]:
    t = _csv(folder, "timestamp_size.csv")
    cols = ("mean_size_subscribed", "mean_size_all", "mean_size_weighted_subscribed",
            "mean_size_weighted_all", "std_size_subscribed", "std_size_all")
    return [(c, r.popularity, r.subscriptions, getattr(r, c)) for r in t.itertuples() for c in cols]


def _t1_setup(p: Params) -> list[Row]:
    k = list(p["topics_per_client"])
    subs = [p["clients"] * x for x in k]
    return [_row("clients, topics", "10,000 clients, 1,000 topics",
                 f"{p['clients']:,} clients, {p['topics']:,} topics",
                 (p["clients"], p["topics"]) != (10_000, 1000), "another size"),
            _row("subscriptions", "10k … 2,000k in all (10 … 200 distinct topics per client)",
                 f"{min(subs):,} … {max(subs):,} ({', '.join(map(str, k))} distinct topics per client)",
                 max(subs) < 2_000_000, "a shorter sweep"),
            _row("popularity", "power law over topics with shape 0.901 (geographic) or 0.349 "
                 "(spray-and-diffuse): rank r drawn with probability ∝ r^-(1 + shape)",
                 ", ".join(f"`{m}`" for m in _list(p["popularity"])),
                 set(_list(p["popularity"])) != {"geographic", "spray_and_diffuse"},
                 "other popularity models"),
            ("drawing", "per subscription by popularity",
             "each client's topics distinct (weighted sampling without replacement), which flattens the "
             "realised popularity when a client picks many", "sampling without replacement"),
            _row("groups", "SG_T: T and every T' that at least two subscriptions hold with T",
                 "causal variant (at least one)" if p["causal"] else "the same", p["causal"],
                 "causal groups"),
            ("placement", "all TMs on one server", "timestamp size does not depend on placement", ""),
            _seed(p)]


def _t1_plot(ax, folder, p, ours, pub) -> None:
    col = _lines(ax, ours, "mean_size_subscribed", pub, "-", "{v}: over subscribed topics", logx=True)
    rows = ours[ours.metric == "mean_size_all"]
    for v, g in rows.groupby("variant", sort=False):
        ax.plot(g.x.astype(float), g.value, "--", color=col[v], label=f"{v}: over all topics")
    mark(ax, pub[pub.metric != "mean_size_subscribed"], lambda r: (float(r.x), r.value),
         lambda v: col.get(v, "black"))


def _list(v) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def _models(p: Params) -> dict[str, list[str]]:
    return {"model": _list(p["popularity"])}


def _t2_variants(p: Params) -> dict[str, list[str]]:
    return {"model/chains": [f"{m}/{c}" for m in _list(p["popularity"]) for c in p["chains"]],
            "server": [str(s + 1) for s in range(p["servers"])]}


def _t2_values(sweep: str, x: str) -> Callable[[Path, Params], list[tuple]]:
    def values(folder: Path, p: Params) -> list[tuple]:
        t = _csv(folder, "sequencer.csv")
        t = t[t.sweep == sweep]
        return [(m, f"{r.popularity}/{r.chains}", getattr(r, x), getattr(r, m)) for r in t.itertuples()
                for m in ("mean_latency_ms", "p99_latency_ms", "throughput_per_s")]
    return values


def _bw_values(folder: Path, p: Params) -> list[tuple]:
    b = _csv(folder, "bandwidth.csv")
    return [("outgoing_percent", f"{r.popularity}/{r.chains}", str(r.server + 1), r.outgoing_percent)
            for r in b.itertuples()]


def _t2_setup(p: Params) -> list[Row]:
    geo = p["deployment"] == "geo"
    where = " in equal blocks per site" if geo else f" in {p['regions']} random regions"
    return [_row("deployment", "5 servers in 5 sites; TMs of topics 1–200 on server 1, 201–400 on server 2, "
                 "…; 1,000 clients, 200 per site", f"`{p['deployment']}`: {p['servers']} servers, "
                 f"{p['topics']:,} topics, {p['clients']:,} clients" + where,
                 not geo or (p["servers"], p["topics"], p["clients"]) != (5, 1000, 1000),
                 "another deployment or size"),
            ("links", "short 10 ± 2 ms inside a site, long 100 ± 10 ms between sites",
             "the same, FIFO per link", ""),
            _row("popularity", "per site: each site's popular topics on its own server; shapes 0.901 "
                 "(geographic) and 0.349 (spray-and-diffuse)",
                 ", ".join(f"`{m}`" for m in _list(p["popularity"]))
                 + (", per site" if geo else ", one law over topic ids"),
                 not geo or set(_list(p["popularity"])) != {"geographic", "spray_and_diffuse"},
                 "other popularity"),
            _row("precedence", "by topic id", f"`{p['precedence']}`", p["precedence"] != "topic_id",
                 "another precedence order"),
            ("chains", "an event visits the TMs of its sequencing group (`literal`)",
             f"rules measured: {', '.join(p['chains'])}; `etree` (our default) relays through the "
             "elimination tree; `literal` is the paper's",
             "literal chains can deadlock subscribers (README); the "
             "sequencer alone completes under every rule"),
            ("service time", "not given in the SPEC",
             f"{p['service_ms']:g} ms per timestamp stage, relays free",
             "our choice"),
            _row("rates", "500 … 10,000 events/s", ", ".join(f"{r:g}" for r in p["rates"]) + " events/s, "
                 f"{p['duration_s']:g} s each", max(p["rates"]) < 10_000, "a lower top rate"),
            _row("subscription sweep", "10k … 2,000k subscriptions at 5,000 requests/s",
                 f"{min(p['subscription_sweep']) * p['clients']:,} … "
                 f"{max(p['subscription_sweep']) * p['clients']:,} at {p['subscription_rate']:g}/s, "
                 "first chain rule only", True,
                 "2,000k needs more clients than 1,000 × 1,000 topics allow, and long chains simulate slowly "
                 "in one process (README, tno_sequencer)"),
            ("topics per client", "10 in the rate sweep", f"{p['topics_per_client']}", "" if
             p["topics_per_client"] == 10 else "another value"),
            _seed(p)]


def _t2_plot(metric: str, logx: bool = False) -> Callable:
    def plot(ax, folder, p, ours, pub) -> None:
        _lines(ax, ours, metric, pub, logx=logx)
    return plot


def _bw_plot(ax, folder, p, ours, pub) -> None:
    variants = list(dict.fromkeys(ours.variant))
    col = colors(variants)
    width = 0.8 / max(1, len(variants))
    servers = sorted(ours.x.unique(), key=int)
    for i, v in enumerate(variants):
        g = ours[ours.variant == v].set_index("x")
        xs = np.arange(len(servers)) + (i - (len(variants) - 1) / 2) * width
        ax.bar(xs, [g.at[s, "value"] for s in servers], width * 0.9, color=col[v], label=v)
    ax.set_xticks(range(len(servers)), servers)
    ax.set_ylim(0, 1.45 * max(1.0, ours.value.max(), pub.value.max() if len(pub) else 0))
    def at(r) -> tuple:
        shift = (variants.index(r.variant) - (len(variants) - 1) / 2) * width if r.variant in variants else 0
        return servers.index(r.x) + shift, r.value
    mark(ax, pub, at, lambda v: col.get(v, "black"))


_T2_VARIANT = "model/chains"
_THROUGHPUT = "timestamps per second (second half of the run)"
_STRESS = tuple(Metric(f"{w}_{s}", f"{w.replace('_', ' ')} per node: {s.replace('_', ' ')}")
                for w in ("children_entries", "topics_forwarded")
                for s in ("mean_all", "mean_nonzero", "max"))

# ------------------------------------------------------------------ the catalog

FIGURES: tuple[Figure, ...] = (
    Figure("pastry_hops", PASTRY, "Average route length vs overlay size (P1)", "pastry_hops",
           "Mean hops of random lookups against N, next to log_2^b N.",
           (Metric("mean_hops", "mean hops of the lookups", x="nodes"),
            Metric("max_hops", "longest route", x="nodes"),
            Metric("log_2b_n", "the reference curve log_2^b N (computed, not measured)", x="nodes")),
           _hops_setup, _hops_values, _hops_plot, "overlay nodes N", "hops",
           notes="Route length depends on the routing rule, b and N, hardly on locality: at 5,000 nodes an "
                 "overlay grown by joins routes 0.04 hops longer than the converged one (BENCHMARKS.md, "
                 "\"Pastry joins\")."),
    Figure("pastry_hop_distribution", PASTRY, "Distribution of route lengths at the largest N (P1)",
           "pastry_hops", "Share of the lookups that took each number of hops.",
           (Metric("fraction", "share of lookups with this many hops", x="hops"),),
           _hist_setup, _hist_values, _hist_plot, "hops", "share of lookups"),
    Figure("pastry_relative_distance", PASTRY, "Route distance relative to the direct hop (P2)",
           "pastry_hops",
           "Mean of route distance / direct distance, with proximity neighbor selection and without.",
           (Metric("relative_distance", "mean route distance / direct distance", variant="mode", x="nodes"),),
           _distance_setup, _distance_values, _t2_plot("relative_distance", logx=True), "overlay nodes N",
           "relative distance", _modes,
           notes="Our proximity mode holds the proximity-best node in every routing-table entry; an overlay "
                 "kept by joins holds it in fewer (figure pastry_join_quality), so we expect our proximity "
                 "curve to lie at or below one measured on join-built overlays."),
    Figure("pastry_failures", PASTRY, "Routing under node failures, and repair cost (P3)", "pastry_failures",
           "Mean hops and correct lookups before the failures, after them without repair, after repair; "
           "repair cost in RPCs per failed node.",
           (Metric("mean_hops", "mean hops (timeouts are not hops)", x="phase"),
            Metric("correct_fraction", "share of lookups delivered at the closest live node", x="phase"),
            Metric("timeouts_per_lookup", "dead nodes met per lookup", x="phase"),
            Metric("repair_rpcs_per_failed_node", "leaf-set + routing-table repair RPCs per failed node"),
            Metric("leaf_set_rpcs_per_failed_node", "leaf-set repair RPCs per failed node"),
            Metric("routing_table_rpcs_per_failed_node", "routing-table repair RPCs per failed node "
                   "(lazy: the first pass over the lookups)"),
            Metric("repair_messages_per_failed_node", "repair messages per failed node (an RPC is 2)")),
           _failures_setup, _failures_values, _failures_plot, "phase", "mean hops", _phases,
           notes="A dead contact asked during repair is skipped at no cost here, so our repair RPCs are a "
                 "lower bound of what the same repair costs when each such question times out."),
    Figure("pastry_join_quality", PASTRY, "Routing-table quality after joins, per row", "pastry_joins",
           "Per routing-table row, entries per node that are proximity-optimal, sub-optimal and empty, after "
           "the join route alone and after each second join phase.",
           (Metric("optimal_per_node", "proximity-optimal entries per node in this row", "phase", "row"),
            Metric("suboptimal_per_node", "valid but not proximity-optimal entries per node", "phase", "row"),
            Metric("empty_per_node", "empty entries per node (slots some node could fill)", "phase", "row"),
            Metric("proximity_best_share", "share of the slots some node can fill that hold the optimal node",
                   "phase"),
            Metric("mean_hops", "mean hops of random lookups on the grown overlay", "phase"),
            Metric("exchange_messages_per_newcomer",
                   "second-phase messages per newcomer (request + reply = 2)",
                   "phase")),
           _joins_setup, _joins_values, _joins_plot, "routing-table row", "entries per node", _joins_dims),
    Figure("scribe_delay_penalty", SCRIBE, "Delay penalty of Scribe against IP unicast (S1)",
           "scribe_multicast",
           "Per topic, RMD = max delay to members via Scribe / via IP unicast and RAD = mean / mean, from "
           "the root; their distributions over topics.",
           tuple(Metric(f"{m}_{s}", f"{s} over topics of {m.upper()}") for m in ("rmd", "rad")
                 for s in ("median", "mean", "max"))
           + tuple(Metric(f"{m}_fraction_below", f"share of topics with {m.upper()} ≤ x", x="penalty")
                   for m in ("rmd", "rad")),
           lambda p: _scribe_rows(p, False), _delay_values, _delay_plot, "delay penalty (Scribe / IP)",
           "cumulative share of topics"),
    Figure("scribe_node_stress", SCRIBE, "Node stress (S1)", "scribe_multicast",
           "Children-table entries and topics forwarded per node: mean over all nodes, over nodes with any, "
           "and max.",
           _STRESS,
           lambda p: _scribe_rows(p, False), _stress_values, _stress_plot, "children-table entries",
           "nodes"),
    Figure("scribe_link_stress", SCRIBE, "Link stress, Scribe against IP multicast (S1)", "scribe_multicast",
           "Copies of one event per topic on each router link: mean over used links and max.",
           tuple(Metric(m, f"{m.replace('_', ' ')} (copies per used link for mean and max)", variant="scheme")
                 for m in ("mean", "max", "links_used", "total_copies")),
           lambda p: _scribe_rows(p, False), _link_values, _link_plot, "", "copies", _schemes),
    Figure("scribe_small_groups", SCRIBE, "Many small groups: node and link stress, delay (S2)",
           "scribe_small_groups",
           "The S1 metrics for many topics of a few subscribers each.",
           _STRESS + (Metric("link_stress_mean", "mean copies per used link", variant="scheme"),
              Metric("link_stress_max", "max copies on a link", variant="scheme"))
           + tuple(Metric(f"{m}_{s}", f"{s} over topics of {m.upper()}") for m in ("rmd", "rad")
                   for s in ("median", "mean", "max")),
           lambda p: _scribe_rows(p, True), _small_values, _small_plot, "", "copies", _schemes),
    Figure("tno_timestamp_size", TNO, "Timestamp size against subscriptions (T1)", "tno_timestamp_size",
           "Mean |SG_T| against the total number of subscriptions, per popularity model.",
           (Metric("mean_size_subscribed", "mean |SG_T| over the topics that have subscribers", "model",
                   "subscriptions"),
            Metric("mean_size_all", "mean |SG_T| over all topics (0 for a topic nobody subscribes to)",
                   "model",
                   "subscriptions"),
            Metric("mean_size_weighted_subscribed", "the same weighted by publication probability, over "
                   "subscribed topics", "model", "subscriptions"),
            Metric("mean_size_weighted_all", "weighted, over all topics", "model", "subscriptions"),
            Metric("std_size_subscribed", "standard deviation over subscribed topics", "model",
                   "subscriptions"),
            Metric("std_size_all", "standard deviation over all topics", "model", "subscriptions")),
           _t1_setup, _t1_values, _t1_plot, "subscriptions", "mean timestamp size |SG_T|", _models),
    Figure("tno_latency_vs_rate", TNO, "Timestamp latency against the event rate (T2)", "tno_sequencer",
           "End-to-end latency (request sent until the timestamp is back) against events per second.",
           (Metric("mean_latency_ms", "mean latency, ms", _T2_VARIANT, "rate"),
            Metric("p99_latency_ms", "99th percentile latency, ms", _T2_VARIANT, "rate"),
            Metric("throughput_per_s", _THROUGHPUT, _T2_VARIANT, "rate")),
           _t2_setup, _t2_values("rate", "rate_per_s"), _t2_plot("mean_latency_ms"), "events per second",
           "mean latency (ms)", _t2_variants),
    Figure("tno_throughput_vs_rate", TNO, "Throughput against the event rate (T2)", "tno_sequencer",
           "Timestamps per second against the offered event rate.",
           (Metric("throughput_per_s", _THROUGHPUT, _T2_VARIANT, "rate"),),
           _t2_setup, _t2_values("rate", "rate_per_s"), _t2_plot("throughput_per_s"), "events per second",
           "timestamps per second", _t2_variants),
    Figure("tno_latency_vs_subscriptions", TNO, "Latency against total subscriptions at 5,000/s (T2)",
           "tno_sequencer", "Mean end-to-end latency against the total number of subscriptions.",
           (Metric("mean_latency_ms", "mean latency, ms", _T2_VARIANT, "subscriptions"),
            Metric("p99_latency_ms", "99th percentile latency, ms", _T2_VARIANT, "subscriptions")),
           _t2_setup, _t2_values("subscriptions", "subscriptions"), _t2_plot("mean_latency_ms", logx=True),
           "subscriptions", "mean latency (ms)", _t2_variants),
    Figure("tno_throughput_vs_subscriptions", TNO, "Throughput against total subscriptions at 5,000/s (T2)",
           "tno_sequencer", "Timestamps per second against the total number of subscriptions.",
           (Metric("throughput_per_s", "timestamps per second", _T2_VARIANT, "subscriptions"),),
           _t2_setup, _t2_values("subscriptions", "subscriptions"), _t2_plot("throughput_per_s", logx=True),
           "subscriptions", "timestamps per second", _t2_variants),
    Figure("tno_outgoing_bandwidth", TNO, "Percentage of outgoing bandwidth per server (T2)", "tno_sequencer",
           "Per server at the highest rate: bytes of timestamps forwarded to other servers / bytes of all "
           "timestamps it handled × 100. Servers are numbered 1… as in the paper.",
           (Metric("outgoing_percent", "percentage of outgoing bandwidth", _T2_VARIANT, "server"),),
           _t2_setup, _bw_values, _bw_plot, "server", "outgoing bandwidth (%)", _t2_variants,
           notes="Chains climb the precedence order, so a server's percentage depends on where its topics "
                 "sit in that order: the server of the highest-ranked topics forwards nothing."),
)

BY_NAME = {f.name: f for f in FIGURES}
JOBS = tuple(dict.fromkeys(f.job for f in FIGURES))   # the jobs `reproduce` runs, in order
