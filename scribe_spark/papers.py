"""The papers' figures that `./run.sh reproduce` puts beside ours: setups, metric names, readers, plots.

A figure names the job that measures it, the paper's setup next to the run's (every difference
named), its metrics and how to read them from the job's tables, and a plot that draws every one
of its metrics. A metric is written `name`, `name[variant]`, `name@x` or `name[variant]@x`:
`variant` picks one series (a popularity model, a routing mode, a second join phase, ...) and
`x` a point on the figure's x axis (a number such as the overlay size, or a category such as a
phase). These strings are what a published-values file names in its `metric` column. The
paper's side of each setup is the paper's setup as docs/model.md describes it; where that says
nothing, the table says so.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from scribe_spark.experiments.outputs import OUTPUTS
from scribe_spark.reference.routing_tables import QUALITY
from scribe_spark.tno.sequencer import precedence_rank

Params = dict                     # a job's resolved parameters, as read back from its params.toml
Row = tuple[str, str, str, str]  # (aspect, the paper's, ours, verdict: "", "differs: …", "may differ: …", NA)
NA = "n/a"                        # the paper's setup states nothing to compare with

PASTRY = "Pastry (Rowstron & Druschel, Middleware 2001)"
SCRIBE = "Scribe (Castro, Druschel, Kermarrec & Rowstron, IEEE JSAC 2002; Rowstron et al., NGC 2001)"
TNO = ("TNO (Baldoni, Bonomi, Platania & Querzoni, \"Efficient Notification Ordering for Geo-Distributed "
       "Pub/Sub Systems\")")


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
    values: Callable[[Path, Params, pd.DataFrame], list[tuple]]   # (metric, variant, x, value) rows
    plot: Callable[..., None]                                       # (ax, folder, params, ours, published)
    xlabel: str = ""
    ylabel: str = ""
    dims: Callable[[Params], dict[str, list[str]]] = field(default=lambda p: {})
    notes: str = ""
    # lines the report adds from the published values (an inference, never a default)
    inference: Callable[[Path, Params, pd.DataFrame], list[str]] | None = None

    def metric(self, name: str) -> Metric | None:
        """The metric of this figure called `name`, if any."""
        return next((m for m in self.metrics if m.name == name), None)


# ------------------------------------------------------------------ metric keys

KEY = re.compile(r"^(?P<name>[A-Za-z0-9_]+)(?:\[(?P<variant>[^\]]+)\])?(?:@(?P<x>.+))?$")


def key(metric: str, variant: str = "", x: object = None) -> str:
    """The written form of one metric value: name[variant]@x."""
    return metric + (f"[{variant}]" if variant else "") + ("" if x is None or x == "" else f"@{fmt_x(x)}")


def fmt_x(x: object) -> str:
    """An x value as a metric key writes it (integers without a decimal point)."""
    if isinstance(x, (int, np.integer)) or (isinstance(x, float) and x.is_integer()):
        return str(int(x))
    return f"{x:g}" if isinstance(x, float) else str(x)


def norm_x(x: object) -> float | str:
    """An x value as it is compared: numbers as floats, categories as strings."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return "" if x is None else str(x)


# ------------------------------------------------------------------ setup rows

def _differs(cond: bool, why: str) -> str:
    return f"differs: {why}" if cond else ""


def _seed(p: Params) -> Row:
    return ("seed", "not stated", f"{p['seed']} (results are deterministic for a seed)", NA)


def _pastry(p: Params) -> Row:
    return ("b, |L|, |M|", "4, 16, 32", f"{p['b']}, {p['leaf_set']}, {p['neighborhood']}",
            _differs((p["b"], p["leaf_set"], p["neighborhood"]) != (4, 16, 32), "other Pastry parameters"))


def _network(p: Params, paper: str | None) -> Row:
    """The proximity model: the plane where the paper's setup names it (P1, P2), not stated elsewhere."""
    ours = f"`{p['proximity']}` model"
    if paper is None:
        return ("network", "not stated in the paper's setup", ours, NA)
    return ("network", paper, ours, _differs(p["proximity"] != "plane", "another proximity model"))


def _state(p: Params) -> Row:
    return ("node state", "not stated in the paper's setup",
            "converged: every routing-table entry is the proximity-best valid node (random mode: a "
            "random valid one)",
            "may differ: an overlay grown by joins holds the proximity-best node in fewer entries "
            "(figure pastry_join_quality)")


def _p12_setup(p: Params, sizes: Row) -> list[Row]:
    return [sizes, _pastry(p), _network(p, "nodes at random points of a Euclidean plane (P2; P1 "
                                           "and P2 are the same runs)"),
            ("lookups", "200,000 between random node pairs", f"{p['lookups']:,} per size and mode",
             _differs(p["lookups"] != 200_000, "fewer lookups (more sampling noise)")),
            _state(p), _seed(p)]


def _hops_setup(p: Params) -> list[Row]:
    sizes = list(p["nodes"])
    return _p12_setup(p, ("overlay sizes", "1,000 … 100,000 nodes", ", ".join(f"{n:,}" for n in sizes),
                          _differs(max(sizes) < 100_000 or min(sizes) > 1000, "another range of sizes")))


def _hist_setup(p: Params) -> list[Row]:
    n = max(p["nodes"])
    return _p12_setup(p, ("overlay size", "the largest N of P1 (100,000)", f"{n:,}, the largest of the run",
                          _differs(n != 100_000, "another overlay size")))


def _distance_setup(p: Params) -> list[Row]:
    return _hops_setup(p) + [("definition", "route distance / distance of the one direct hop source → "
                              "destination, with and without proximity neighbor selection",
                              "the same: `proximity` and `random` modes", "")]


def _failures_setup(p: Params) -> list[Row]:
    lazy = p["table_repair"] == "lazy"
    return [("overlay", "5,000 nodes", f"{p['nodes']:,} nodes", _differs(p["nodes"] != 5000, "another size")),
            ("failures", "10% of the nodes fail silently", f"{p['fail_fraction']:.0%}",
             _differs(p["fail_fraction"] != 0.1, "another share of failures")),
            ("lookups", "200,000 before the failures, after them without repair, after repair",
             f"{p['lookups']:,} random keys from random surviving nodes, the same in every phase",
             _differs(p["lookups"] != 200_000, "fewer lookups")),
            _pastry(p), _network(p, None),
            ("repair", "leaf sets eagerly; routing-table entries lazily (ask a node in the same row, then "
             "rows further down)", "leaf sets eagerly; routing tables "
             + ("lazily, when a route meets a dead entry" if lazy else "eagerly, every dead entry first"),
             _differs(not lazy, "every dead entry repaired before routing")),
            ("repair cost", "repair messages per failed node",
             "messages and remote procedure calls (a request and its reply) per failed node: leaf-set repair "
             "plus routing-table repair" + (" of the first pass over the lookups" if lazy else ""),
             "may differ: a dead contact asked during repair is skipped at no cost here"),
            _state(p), _seed(p)]


def _joins_setup(p: Params) -> list[Row]:
    return [("overlay", "not stated in the paper's setup", f"{p['nodes']:,} nodes", NA),
            _pastry(p), _network(p, None),
            ("how nodes join", "a new node routes a join message to its own id through a nearby node",
             f"the same; {p['initial']:,} nodes start converged, the others join in batches of "
             f"{p['batch']:,} concurrent joins", "may differ: concurrent batches from a converged core"),
            ("second phase", "the new node asks the nodes in its tables for their state and keeps closer "
             "candidates: first the row-i entries of each of its row-i nodes, then whole routing tables",
             f"phases measured: {', '.join(p['improve'])}; the requests for every row go out at once, to the "
             "nodes the route gave; the neighborhood set is not asked",
             "may differ: one reading of the paper's text; a row-by-row exchange could use rows improved "
             "before it"),
            ("optimal", "empty, proximity-optimal and sub-optimal entries per row",
             "optimal = the converged construction's entry (the proximity-best valid node); per node = "
             "totals / nodes, over the slots the converged construction fills", ""),
            _seed(p)]


def _scribe_setup(p: Params, small: bool) -> list[Row]:
    t = p["topology"]
    routers = t["transit_domains"] * t["routers_per_transit"] * (1 + t["stubs_per_transit_router"]
                                                                  * t["routers_per_stub"])
    if small:
        topics = ("topics", "many topics of few subscribers (the paper's example: 11 each)",
                  f"{p['topics']:,} topics of {p['group_size']} subscribers" if p["group_size"] else
                  "sizes by rank", _differs(not p["group_size"], "topic sizes by rank"))
    else:
        want = p["topics"] == 1500 and p["size_exponent"] == 1.25 and not p["group_size"]
        topics = ("topics", "1,500 topics; rank r has floor(N r^-1.25 + 0.5) random distinct subscribers",
                  f"{p['topics']:,} topics; " + (f"{p['group_size']} subscribers each" if p["group_size"] else
                                                 f"rank r has floor(N r^-{p['size_exponent']:g} + 0.5)"),
                  _differs(not want, "another topic workload"))
    return [("overlay", "100,000 Scribe nodes", f"{p['nodes']:,} nodes",
             _differs(p["nodes"] != 100_000, "another size")),
            ("network", "transit-stub, 5,050 routers; nodes on random stub routers by 1 ms LAN links",
             f"transit-stub, {routers:,} routers; 1 ms LAN links",
             _differs(routers != 5050, "another graph")),
            ("link delays", "by link type (the paper gives no values)",
             f"transit {t['delay_transit_transit']:g}, inter-transit {t['delay_inter_transit']:g}, "
             f"transit-stub {t['delay_transit_stub']:g}, stub {t['delay_stub_stub']:g} ms", NA),
            topics,
            ("topic naming",
             "topicId = SHA-1 of name ‖ creator (alternative: the creator's id, then the hash)",
             f"`{p['topic_root']}`", ""),
            ("delay measured", "delay to the members via Scribe against via IP unicast",
             "from the topic's root down the tree (the publisher's route to the root is in delay.csv apart)",
             "may differ: the paper does not say where the delay starts"),
            _pastry(p), _state(p), _seed(p)]


def _t1_setup(p: Params) -> list[Row]:
    k = list(p["topics_per_client"])
    subs = [p["clients"] * x for x in k]
    models = _list(p["popularity"])
    return [("clients, topics", "10,000 clients, 1,000 topics", f"{p['clients']:,} clients, {p['topics']:,} "
             "topics", _differs((p["clients"], p["topics"]) != (10_000, 1000), "another size")),
            ("subscriptions", "10k … 2,000k in all: 10 … 200 distinct topics per client",
             f"{min(subs):,} … {max(subs):,}: {', '.join(map(str, k))} distinct topics per client; drawn by "
             "weighted sampling without replacement (the paper does not say how)",
             _differs(max(subs) < 2_000_000 or min(subs) > 10_000, "another range")),
            ("popularity", "power law over topics, shape 0.901 (geographic) or 0.349 (spray-and-diffuse): "
             "rank r drawn with probability ∝ r^-(1 + shape)", ", ".join(f"`{m}`" for m in models),
             _differs(set(models) != {"geographic", "spray_and_diffuse"}, "other popularity models")),
            ("groups", "SG_T: T and every T' that at least two subscriptions hold with T",
             "causal variant (at least one)" if p["causal"] else "the same",
             _differs(p["causal"], "causal groups")),
            ("placement", "all TMs on one server", "timestamp size does not depend on placement", ""),
            _seed(p)]


def _direction(p: Params) -> Row:
    """The chain direction the run's precedence gives, read from the sequencer's own ranking."""
    rank = precedence_rank(p["topics"], p["precedence"])
    first = max(rank, key=rank.get) + 1   # topics numbered from 1, as in the paper
    ours = (f"`{p['precedence']}`: topic {first:,} ranks highest, so chains move towards "
            + ("lower" if first == 1 else "higher") + " topic ids")
    return ("precedence", "by topic id, topic 1 highest: a chain moves towards lower ids (TM_T2 -> TM_T1)",
            ours, _differs(first != 1, "chains move the other way"))


def _t2_setup(p: Params) -> list[Row]:
    geo = p["deployment"] == "geo"
    models = _list(p["popularity"])
    where = " in equal blocks per site" if geo else f" in {p['regions']} random regions"
    sweep = [k * p["clients"] for k in p["subscription_sweep"]]
    return [("deployment", "5 servers in 5 sites; TMs of topics 1–200 on server 1, 201–400 on server 2, …; "
             "1,000 clients, 200 per site", f"`{p['deployment']}`: {p['servers']} servers, {p['topics']:,} "
             f"topics, {p['clients']:,} clients{where}",
             _differs(not geo or (p["servers"], p["topics"], p["clients"]) != (5, 1000, 1000),
                      "another deployment or size")),
            ("links", "short 10 ± 2 ms inside a site, long 100 ± 10 ms between sites",
             "the same, FIFO per link" + ("" if geo else "; sites are random regions"),
             _differs(not geo, "regions at random")),
            ("popularity", "per site, shape 0.901 (geographic) or 0.349 (spray-and-diffuse); each server "
             "hosts the TMs of its site's most popular topics", ", ".join(f"`{m}`" for m in models)
             + (", per site" if geo else ", one law over topic ids"),
             _differs(not geo or set(models) != {"geographic", "spray_and_diffuse"}, "other popularity")),
            _direction(p),
            ("chains", "the timestamp visits the TMs of the event's sequencing group (`literal`)",
             f"rules measured: {', '.join(p['chains'])} (`etree`, our default, also relays through the "
             "elimination tree)", _differs("literal" not in p["chains"], "the paper's rule is not measured")),
            ("servers", "one 4-core Xeon E3-1270v2 with 16 GB per site; service times not stated",
             f"{p['server_cores']} cores per server shared by its TMs; {p['service_ms']:g} ms per timestamp "
             f"stage, {p['message_ms']:g} ms per network message, relays free; a FIFO queue per server",
             _differs(p["server_cores"] != 4, "another number of cores")),
            ("rates", "up to 10,000 events/s", ", ".join(f"{r:g}" for r in p["rates"]) + f" events/s, "
             f"{p['duration_s']:g} s each", _differs(max(p["rates"]) < 10_000, "a lower top rate")),
            ("subscription sweep", "total subscriptions at 5,000 requests/s (the paper gives no range)",
             f"{min(sweep):,} … {max(sweep):,} at {p['subscription_rate']:g}/s, the first chain rule only",
             _differs(p["subscription_rate"] != 5000, "another rate")),
            ("topics per client", "10 in the rate sweep", f"{p['topics_per_client']}",
             _differs(p["topics_per_client"] != 10, "another value")),
            _seed(p)]


# ------------------------------------------------------------------ reading the job tables

def _csv(folder: Path, name: str) -> pd.DataFrame:
    """A finished run's table `name`, read through the declaration of its experiment (the folder's name)."""
    return OUTPUTS[folder.name][name].read(folder)


def _list(v) -> list[str]:
    return [v] if isinstance(v, str) else list(v)


def _hops_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    h = _csv(folder, "hops")
    return [(m, "", n, v) for m in ("mean_hops", "max_hops", "log_2b_n") for n, v in zip(h.nodes, h[m])]


def _hist_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    d = _csv(folder, "hop_distribution")
    d = d[d.nodes == d.nodes.max()]
    return [("fraction", "", h, f) for h, f in zip(d.hops, d.fraction)]


def _distance_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    d = _csv(folder, "distance")
    return [("relative_distance", m, n, v) for n, m, v in zip(d.nodes, d["mode"], d.mean_relative_distance)]


def _failures_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    f = _csv(folder, "failures").set_index("phase")
    out = [(m, "", ph, f.at[ph, m]) for m in ("mean_hops", "correct_fraction", "timeouts_per_lookup")
           for ph in f.index]
    after = f.loc["after_repair"]
    r = _csv(folder, "repair").iloc[0]
    table = r.table_rpcs_per_failed_node
    # lazy repair: the repair counted is the first pass over the lookups
    if (folder / OUTPUTS[folder.name]["lazy_passes"].file).exists():
        table = _csv(folder, "lazy_passes").set_index("pass").at[1, "table_rpcs_per_failed_node"]
    return out + [("repair_messages_per_failed_node", "", "", after.repair_messages_per_failed_node),
                  ("repair_rpcs_per_failed_node", "", "", after.repair_rpcs_per_failed_node),
                  ("leaf_set_rpcs_per_failed_node", "", "", r.leaf_rpcs_per_failed_node),
                  ("routing_table_rpcs_per_failed_node", "", "", table)]


def _quality_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    q = _csv(folder, "join_quality")
    return [(f"{k}_per_node", r.improve, r.row, getattr(r, k) / p["nodes"]) for r in q.itertuples()
            for k in QUALITY]


def _join_cost_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    q = _csv(folder, "join_quality").groupby("improve", sort=False)[list(QUALITY)].sum()
    j = _csv(folder, "joins").set_index("improve")
    out = [("optimal_share", ph, "", q.at[ph, "optimal"] / q.loc[ph].sum()) for ph in j.index]
    out += [("mean_hops", ph, "", j.at[ph, "mean_hops"]) for ph in j.index]
    return out + [("exchange_messages_per_newcomer", ph, "",
                   j.at[ph, "row_exchange_per_newcomer"] + j.at[ph, "table_exchange_per_newcomer"])
                  for ph in j.index]


PENALTY_GRID = (1.0, 1.25, 1.5, 2.0, 2.5, 3.0)   # where the report reads the share of topics below a penalty


def _penalties(folder: Path) -> pd.DataFrame:
    return _csv(folder, "delay").dropna(subset=["rmd", "rad"])


def _delay_stats(folder: Path) -> list[tuple]:
    d = _penalties(folder)
    return [(f"{m}_{s}", "", "", float(getattr(d[m], s)())) for m in ("rmd", "rad")
            for s in ("median", "mean", "max")]


def _delay_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    """RMD/RAD statistics, and the share of topics at or below each penalty of the grid or published."""
    d = _penalties(folder)
    out = _delay_stats(folder)
    for m in ("rmd", "rad"):
        v = np.sort(d[m].to_numpy())
        xs = sorted(set(PENALTY_GRID) | {float(x) for x in pub.x[pub.metric == f"{m}_fraction_below"]})
        out += [(f"{m}_fraction_below", "", x, float(np.searchsorted(v, x, side="right") / len(v)))
                for x in xs]
    return out


_STRESS = tuple((w, s) for w in ("children_entries", "topics_forwarded")
                for s in ("mean_all", "mean_nonzero", "max"))
_STRESS_NAMES = tuple(f"{w}_{s}" for w, s in _STRESS)
_STRESS_COLUMN = {"mean_all": "mean_all_nodes", "mean_nonzero": "mean_nonzero", "max": "max"}


def _stress_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    s = _csv(folder, "node_stress").set_index("metric")
    return [(f"{w}_{st}", "", "", float(s.at[w, _STRESS_COLUMN[st]])) for w, st in _STRESS]


def _link_values(folder: Path, p: Params, pub: pd.DataFrame, prefix: str = "") -> list[tuple]:
    s = _csv(folder, "link_stress")
    return [(prefix + m, r.scheme, "", float(getattr(r, m))) for m in ("mean", "max") for r in s.itertuples()]


def _small_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    return (_stress_values(folder, p, pub) + _link_values(folder, p, pub, "link_stress_")
            + _delay_stats(folder))


_T1 = ("mean_size_subscribed", "mean_size_all", "std_size_subscribed", "std_size_all")
_T1_WEIGHTED = tuple(c.replace("_size_", "_size_weighted_") for c in _T1)


def _t1_values(columns: tuple[str, ...]) -> Callable:
    def values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
        t = _csv(folder, "timestamp_size")
        return [(c, r.popularity, r.subscriptions, getattr(r, c)) for c in columns for r in t.itertuples()]
    return values


_T2_VARIANT = "model/chains"


def _t2_variants(p: Params) -> dict[str, list[str]]:
    return {_T2_VARIANT: [f"{m}/{c}" for m in _list(p["popularity"]) for c in p["chains"]],
            "server": [str(s + 1) for s in range(p["servers"])]}


def _t2_values(sweep: str, x: str, metrics: tuple[str, ...]) -> Callable:
    def values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
        t = _csv(folder, "sequencer")
        t = t[t.sweep == sweep]
        return [(m, f"{r.popularity}/{r.chains}", getattr(r, x), getattr(r, m)) for m in metrics
                for r in t.itertuples()]
    return values


def _peak_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    """Throughput at each offered rate, and each series' peak (capacity.csv)."""
    c = _csv(folder, "capacity")
    return (_t2_values("rate", "rate_per_s", ("throughput_per_s",))(folder, p, pub)
            + [("peak_per_s", f"{r.popularity}/{r.chains}", None, r.simulated_peak_per_s)
               for r in c.itertuples()])


def _service_inferred(folder: Path, p: Params, pub: pd.DataFrame) -> list[str]:
    """What service time a published peak implies under our model: an inference, never a default.

    The peak is taken as the rate at which the run's bottleneck saturates: 1000 / (service x its
    stages + message_ms x its messages) per event, solved for the service time; the bottleneck (and
    with it the stages and messages) is assumed to be the one this run predicts.
    """
    c = _csv(folder, "capacity").assign(variant=lambda t: t.popularity + "/" + t.chains).set_index("variant")
    lines = []
    for r in pub[pub.metric == "peak_per_s"].itertuples():
        if r.variant not in c.index or not r.value > 0:
            continue
        b = c.loc[r.variant]
        left = 1000.0 / r.value - b.message_ms * b.bottleneck_messages_per_event   # ms per event for stages
        service = left / b.bottleneck_stages_per_event if b.bottleneck_stages_per_event > 0 else float("nan")
        implied = (f"a service time of {service:.4g} ms per timestamp stage" if service > 0 else
                   "no positive service time (the message costs alone saturate earlier)")
        lines.append(f"- Inferred, not measured: the published peak of {r.value:g}/s for `{r.variant}` "
                     f"({r.source}) implies {implied} under our model ({b.bottleneck} saturating first, "
                     f"{b.server_cores} cores, {b.message_ms:g} ms per message); this run used "
                     f"{b.service_ms:g} ms.")
    return lines


def _bw_values(folder: Path, p: Params, pub: pd.DataFrame) -> list[tuple]:
    b = _csv(folder, "bandwidth")
    return [("outgoing_percent", f"{r.popularity}/{r.chains}", str(r.server), r.outgoing_percent)
            for r in b.itertuples()]


# ------------------------------------------------------------------ plots

_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
           "tab:olive", "tab:cyan", "tab:gray")
_MARKERS = ("X", "P", "D", "*", "v", "^")
_STYLES = ("-", "--", ":", "-.")


def colors(variants) -> dict[str, str]:
    """One color per series, shared by our lines and the published points of the same series."""
    return {v: _COLORS[i % len(_COLORS)] for i, v in enumerate(dict.fromkeys(variants))}


def mark(ax, pub: pd.DataFrame, xy: Callable[[pd.Series], tuple], color: Callable[[str], str]) -> None:
    """Mark published values: one marker shape per source, colored like our series of the same variant."""
    shapes = {s: _MARKERS[i % len(_MARKERS)] for i, s in enumerate(dict.fromkeys(pub.source))}
    labelled = set()
    for _, r in pub.iterrows():
        x, y = xy(r)
        ax.scatter([x], [y], marker=shapes[r.source], s=70, color=color(r.variant), edgecolors="black",
                   linewidths=0.8, zorder=5, label=None if r.source in labelled else f"published: {r.source}")
        labelled.add(r.source)


def _series(metrics: tuple[str, ...], logx: bool = False) -> Callable:
    """A plot of one line per metric (line style) and variant (color) over a numeric x."""
    def plot(ax, folder, p, ours, pub) -> None:
        col = colors(ours.variant)
        for metric, style in zip(metrics, _STYLES):
            for v, g in ours[ours.metric == metric].groupby("variant", sort=False):
                g = g.sort_values("x")
                ax.plot(g.x.astype(float), g.value, style, marker="o", ms=3, color=col[v],
                        label=f"{metric}, {v}" if v else metric)
        drawn = ours[ours.metric.isin(metrics)].x.astype(float)
        right = float(drawn.max()) if len(drawn) else 0.0

        def xy(r) -> tuple[float, float]:   # a value of a whole series (a peak) is marked at its right end
            try:
                return float(r.x), r.value
            except (TypeError, ValueError):
                return right, r.value
        mark(ax, pub, xy, lambda v: col.get(v, "black"))
        if logx:
            ax.set_xscale("log")
    return plot


def _bars(ax, folder, p, ours, pub) -> None:
    """One bar per value of ours (log scale), the published value of the same name marked on it."""
    keys = list(ours.key) + [k for k in dict.fromkeys(pub.key) if k not in set(ours.key)]
    bars = ax.bar(range(len(ours)), ours.value.clip(lower=1e-3), color="tab:blue", alpha=0.7, label="ours")
    ax.bar_label(bars, [f"{v:.4g}" for v in ours.value], fontsize=6)   # a zero shows as a stub labelled 0
    ax.set_xticks(range(len(keys)), keys, rotation=60, ha="right", fontsize=7)
    ax.set_yscale("log")
    mark(ax, pub, lambda r: (keys.index(r.key), r.value), lambda v: "black")


def _hist_plot(ax, folder, p, ours, pub) -> None:
    ax.bar(ours.x.astype(float), ours.value, color="tab:blue", alpha=0.7, label="ours")
    mark(ax, pub, lambda r: (float(r.x), r.value), lambda v: "black")


def _delay_plot(ax, folder, p, ours, pub) -> None:
    """Our RMD and RAD distributions; published medians at 0.5, means at the bottom, maxima at the top."""
    from scribe_spark import report  # matplotlib: only where a plot is drawn, not where papers load
    d = _penalties(folder)
    col = {"rmd": "tab:blue", "rad": "tab:orange"}
    for m, label in (("rmd", "RMD (max delay)"), ("rad", "RAD (mean delay)")):
        report.cdf(ax, d[m].to_numpy(), color=col[m], label=f"{label}, ours")
    height = {"median": 0.5, "mean": 0.02, "max": 1.0}

    def at(r) -> tuple:
        stat = r.metric.split("_", 1)[1]
        return (float(r.x), r.value) if stat == "fraction_below" else (r.value, height[stat])
    mark(ax, pub.assign(variant=pub.metric.str[:3]), at, lambda v: col[v])


def _bw_plot(ax, folder, p, ours, pub) -> None:
    variants = list(dict.fromkeys(ours.variant))
    col = colors(variants)
    width = 0.8 / max(1, len(variants))
    servers = _t2_variants(p)["server"]
    for i, v in enumerate(variants):
        g = ours[ours.variant == v].set_index("x")
        xs = np.arange(len(servers)) + (i - (len(variants) - 1) / 2) * width
        ax.bar(xs, [g.value.get(s, 0.0) for s in servers], width * 0.9, color=col[v], label=v)
    ax.set_xticks(range(len(servers)), servers)
    top = max([1.0, *ours.value, *pub.value])
    ax.set_ylim(0, 1.45 * top)

    def at(r) -> tuple:
        shift = (variants.index(r.variant) - (len(variants) - 1) / 2) * width if r.variant in variants else 0
        return servers.index(r.x) + shift, r.value
    mark(ax, pub, at, lambda v: col.get(v, "black"))


# ------------------------------------------------------------------ the catalog

def _modes(p: Params) -> dict[str, list[str]]:
    return {"mode": ["proximity", "random"]}


def _phases(p: Params) -> dict[str, list[str]]:
    return {"phase": ["before", "after_failure", "after_repair"]}


def _join_phases(p: Params) -> dict[str, list[str]]:
    return {"phase": list(p["improve"])}


def _models(p: Params) -> dict[str, list[str]]:
    return {"model": _list(p["popularity"])}


def _schemes(p: Params) -> dict[str, list[str]]:
    return {"scheme": ["scribe", "ip_multicast"]}


def _t1_metrics(columns: tuple[str, ...], weighted: bool) -> tuple[Metric, ...]:
    how = ", weighted by publication probability" if weighted else ""
    about = {"mean_size_subscribed": "mean |SG_T| over the topics that have subscribers",
             "mean_size_all": "mean |SG_T| over all topics (0 for a topic nobody subscribes to)",
             "std_size_subscribed": "standard deviation of |SG_T| over the topics that have subscribers",
             "std_size_all": "standard deviation of |SG_T| over all topics"}
    return tuple(Metric(c, about[u] + how, "model", "subscriptions") for c, u in zip(columns, _T1))


_THROUGHPUT = "timestamps per second (second half of the run)"
_LATENCY = (("mean_latency_ms", "mean latency, ms (request sent until the timestamp is back)"),
            ("p99_latency_ms", "99th percentile latency, ms"))

FIGURES: tuple[Figure, ...] = (
    Figure("pastry_hops", PASTRY, "Average route length vs overlay size (P1)", "pastry_hops",
           "Mean and longest routes of random lookups against N, next to log_2^b N.",
           (Metric("mean_hops", "mean hops of the lookups", x="nodes"),
            Metric("max_hops", "longest route", x="nodes"),
            Metric("log_2b_n", "the reference curve log_2^b N (computed, not measured)", x="nodes")),
           _hops_setup, _hops_values, _series(("mean_hops", "max_hops", "log_2b_n"), logx=True),
           "overlay nodes N", "hops",
           notes="Route length depends on the routing rule, b and N, hardly on locality: at 5,000 nodes an "
                 "overlay grown by joins routes 0.04 hops longer than the converged one (the pastry_joins "
                 "experiment)."),
    Figure("pastry_hop_distribution", PASTRY, "Distribution of route lengths at the largest N (P1)",
           "pastry_hops", "Share of the lookups that took each number of hops.",
           (Metric("fraction", "share of lookups with this many hops", x="hops"),),
           _hist_setup, _hist_values, _hist_plot, "hops", "share of lookups"),
    Figure("pastry_relative_distance", PASTRY, "Route distance relative to the direct hop (P2)",
           "pastry_hops", "Mean of route distance / direct distance, with proximity neighbor selection and "
           "without.",
           (Metric("relative_distance", "mean route distance / direct distance", "mode", "nodes"),),
           _distance_setup, _distance_values, _series(("relative_distance",), logx=True), "overlay nodes N",
           "relative distance", _modes,
           notes="Our proximity mode holds the proximity-best node in every routing-table entry; an overlay "
                 "kept by joins holds it in fewer (figure pastry_join_quality), so we expect our proximity "
                 "curve to lie at or below one measured on join-built overlays."),
    Figure("pastry_failures", PASTRY, "Routing under node failures, and repair cost (P3)", "pastry_failures",
           "Mean hops, correct lookups and timeouts before the failures, after them without repair and after "
           "repair; repair cost per failed node.",
           (Metric("mean_hops", "mean hops (timeouts are not hops)", x="phase"),
            Metric("correct_fraction", "share of lookups delivered at the closest live node", x="phase"),
            Metric("timeouts_per_lookup", "dead nodes met per lookup", x="phase"),
            Metric("repair_messages_per_failed_node", "repair messages per failed node (an RPC is 2)"),
            Metric("repair_rpcs_per_failed_node", "leaf-set + routing-table repair RPCs per failed node"),
            Metric("leaf_set_rpcs_per_failed_node", "leaf-set repair RPCs per failed node"),
            Metric("routing_table_rpcs_per_failed_node", "routing-table repair RPCs per failed node "
                   "(lazy: the first pass over the lookups)")),
           _failures_setup, _failures_values, _bars, "", "value (log scale)", _phases,
           notes="A dead contact asked during repair is skipped at no cost here, so our repair cost is a "
                 "lower bound of what the same repair costs when each such question times out."),
    Figure("pastry_join_quality", PASTRY, "Routing-table quality after joins, per row", "pastry_joins",
           "Per routing-table row, entries per node that are proximity-optimal, sub-optimal and empty after "
           "the join route alone and after each second join phase.",
           tuple(Metric(f"{k}_per_node", f"{k.replace('sub', 'sub-')} entries per node in this row", "phase",
                        "row") for k in QUALITY),
           _joins_setup, _quality_values,
           _series(("optimal_per_node", "suboptimal_per_node", "empty_per_node")),
           "routing-table row",
           "entries per node", _join_phases),
    Figure("pastry_join_cost", PASTRY, "Routing-table quality after joins: totals and cost", "pastry_joins",
           "Per second join phase: the share of proximity-optimal entries, the mean hops of random lookups "
           "on the grown overlay, and the messages the second phase costs per newcomer.",
           (Metric("optimal_share", "proximity-optimal entries / slots the converged construction fills",
                   "phase"),
            Metric("mean_hops", "mean hops of random lookups on the grown overlay", "phase"),
            Metric("exchange_messages_per_newcomer",
                   "second-phase messages per newcomer (request + reply = 2)",
                   "phase")),
           _joins_setup, _join_cost_values, _bars, "", "value (log scale)", _join_phases),
    Figure("scribe_delay_penalty", SCRIBE, "Delay penalty of Scribe against IP unicast (S1)",
           "scribe_multicast",
           "Per topic, RMD = max delay to members via Scribe / via IP unicast and RAD = mean / mean; their "
           "distributions over topics. On the plot, published medians sit at height 0.5, means at the "
           "bottom, maxima at the top.",
           tuple(Metric(f"{m}_{s}", f"{s} over topics of {m.upper()}") for m in ("rmd", "rad")
                 for s in ("median", "mean", "max"))
           + tuple(Metric(f"{m}_fraction_below", f"share of topics with {m.upper()} ≤ x (any x)", x="penalty")
                   for m in ("rmd", "rad")),
           lambda p: _scribe_setup(p, False), _delay_values, _delay_plot, "delay penalty (Scribe / IP)",
           "cumulative share of topics"),
    Figure("scribe_node_stress", SCRIBE, "Node stress (S1)", "scribe_multicast",
           "Children-table entries and topics forwarded per node: mean over all nodes, over nodes with any, "
           "and max.",
           tuple(Metric(n, n.replace("_", " ")) for n in _STRESS_NAMES),
           lambda p: _scribe_setup(p, False), _stress_values, _bars, "", "value (log scale)"),
    Figure("scribe_link_stress", SCRIBE, "Link stress, Scribe against IP multicast (S1)", "scribe_multicast",
           "Copies of one event per topic on each router link: mean over the links used, and max.",
           (Metric("mean", "mean copies per used link", "scheme"),
            Metric("max", "most copies on a link", "scheme")),
           lambda p: _scribe_setup(p, False), _link_values, _bars, "", "copies (log scale)", _schemes),
    Figure("scribe_small_groups", SCRIBE, "Many small groups: node and link stress, delay (S2)",
           "scribe_small_groups", "The S1 metrics for many topics of a few subscribers each.",
           tuple(Metric(n, n.replace("_", " ")) for n in _STRESS_NAMES)
           + (Metric("link_stress_mean", "mean copies per used link", "scheme"),
              Metric("link_stress_max", "most copies on a link", "scheme"))
           + tuple(Metric(f"{m}_{s}", f"{s} over topics of {m.upper()}") for m in ("rmd", "rad")
                   for s in ("median", "mean", "max")),
           lambda p: _scribe_setup(p, True), _small_values, _bars, "", "value (log scale)", _schemes),
    Figure("tno_timestamp_size", TNO, "Timestamp size against subscriptions (T1)", "tno_timestamp_size",
           "Mean and standard deviation of |SG_T| against the total number of subscriptions, per popularity "
           "model, over the topics that have subscribers and over all topics.",
           _t1_metrics(_T1, False), _t1_setup, _t1_values(_T1), _series(_T1, logx=True), "subscriptions",
           "timestamp size |SG_T|", _models),
    Figure("tno_timestamp_size_weighted", TNO, "Timestamp size weighted by publications (T1)",
           "tno_timestamp_size", "As tno_timestamp_size, each topic weighted by its publication probability.",
           _t1_metrics(_T1_WEIGHTED, True), _t1_setup, _t1_values(_T1_WEIGHTED),
           _series(_T1_WEIGHTED, logx=True),
           "subscriptions", "weighted timestamp size", _models),
    Figure("tno_latency_vs_rate", TNO, "Timestamp latency against the event rate (T2)", "tno_sequencer",
           "End-to-end latency (request sent until the timestamp is back) against events per second.",
           tuple(Metric(m, about, _T2_VARIANT, "rate") for m, about in _LATENCY),
           _t2_setup, _t2_values("rate", "rate_per_s", ("mean_latency_ms", "p99_latency_ms")),
           _series(("mean_latency_ms", "p99_latency_ms")), "events per second", "latency (ms)", _t2_variants),
    Figure("tno_throughput_vs_rate", TNO, "Throughput against the event rate (T2)", "tno_sequencer",
           "Timestamps per second against the offered event rate.",
           (Metric("throughput_per_s", _THROUGHPUT, _T2_VARIANT, "rate"),
            Metric("peak_per_s", "the highest throughput of the rate sweep (the figure's peak)",
                   _T2_VARIANT)),
           _t2_setup, _peak_values, _series(("throughput_per_s",)),
           "events per second", "timestamps per second", _t2_variants, inference=_service_inferred),
    Figure("tno_latency_vs_subscriptions", TNO, "Latency against total subscriptions (T2)", "tno_sequencer",
           "End-to-end latency against the total number of subscriptions.",
           tuple(Metric(m, about, _T2_VARIANT, "subscriptions") for m, about in _LATENCY),
           _t2_setup, _t2_values("subscriptions", "subscriptions", ("mean_latency_ms", "p99_latency_ms")),
           _series(("mean_latency_ms", "p99_latency_ms"), logx=True), "subscriptions", "latency (ms)",
           _t2_variants),
    Figure("tno_throughput_vs_subscriptions", TNO, "Throughput against total subscriptions (T2)",
           "tno_sequencer", "Timestamps per second against the total number of subscriptions.",
           (Metric("throughput_per_s", _THROUGHPUT, _T2_VARIANT, "subscriptions"),),
           _t2_setup, _t2_values("subscriptions", "subscriptions", ("throughput_per_s",)),
           _series(("throughput_per_s",), logx=True), "subscriptions", "timestamps per second", _t2_variants),
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
