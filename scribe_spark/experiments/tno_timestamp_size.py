"""Experiment tno_timestamp_size (T1): timestamp size |SG_T| vs subscriptions per client."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import report as plots
from scribe_spark.config import TnoSizeParams
from scribe_spark.experiments.outputs import Outcome
from scribe_spark.experiments.run import Run
from scribe_spark.laws import describe, model_index, popularity
from scribe_spark.spark.arrow import local_frame
from scribe_spark.spark.session import spark_session
from scribe_spark.streams import stream
from scribe_spark.tno import groups
from scribe_spark.workloads.popularity import draw_subscriptions


def _weighted(values: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    mean = float(np.average(values, weights=weights))
    return mean, float(np.sqrt(np.average((values - mean) ** 2, weights=weights)))


def _measure(spark, p: TnoSizeParams, run: Run, model: str, probs: np.ndarray, k: int) -> dict:
    """Draw k topics per client, size every sequencing group; return one row."""
    t0 = time.time()
    rng = stream(p.seed, None, k, model_index(model))
    sub, top = draw_subscriptions(p.clients, k, probs, rng)
    df = local_frame(spark, pd.DataFrame({groups.SUBSCRIBER: sub.astype(np.int32),
                                          groups.TOPIC: top.astype(np.int32)}))
    sizes = groups.sequencing_group_sizes(df, causal=p.causal).toPandas()
    size = np.zeros(p.topics)
    size[sizes.topic.to_numpy()] = sizes["size"].to_numpy()
    subscribed = size > 0   # a topic nobody subscribes to has no group (size 0) and no notifications
    row = {"popularity": model, "topics_per_client": k, "subscriptions": len(sub),
           "topics_subscribed": int(subscribed.sum())}
    for over, keep in (("subscribed", subscribed), ("all", np.ones(p.topics, dtype=bool))):
        v = size[keep]
        mean_w, std_w = _weighted(v, probs[keep])
        row.update({f"mean_size_{over}": v.mean(), f"std_size_{over}": v.std(),
                    f"mean_size_weighted_{over}": mean_w, f"std_size_weighted_{over}": std_w})
    run.log(f"{model}, {k} topics/client ({len(sub):,} subscriptions): mean |SG| "
            f"{row['mean_size_subscribed']:.1f} over {row['topics_subscribed']} subscribed topics, "
            f"{row['mean_size_all']:.1f} over all "
            f"(weighted {row['mean_size_weighted_subscribed']:.1f}) ({time.time() - t0:.1f}s)")
    return row


def simulate(p: TnoSizeParams, run: Run) -> Outcome:
    """Measure timestamp sizes for every popularity model and subscriptions-per-client value."""
    spark = spark_session(run.name)
    rows, laws = [], []
    for model in p.popularity:
        probs = popularity(p.topics, model)
        law = describe(p.topics, model)
        laws.append(law)
        run.log(f"{model}: {law['law']}, exponent {law['exponent']:.4f}; the top 0.5% of topics draw "
                f"{law['top_0.005_draws']:.1%}, the top 40% draw {law['top_0.4_draws']:.1%}")
        for k in p.topics_per_client:
            rows.append(run.point(f"{model} topics_per_client={k}",
                                  lambda: _measure(spark, p, run, model, probs, k)))
    return Outcome({"timestamp_size": pd.DataFrame(rows), "popularity": pd.DataFrame(laws)})


def report(outcome: Outcome, p: TnoSizeParams, run: Run) -> None:
    """Plot timestamp size against subscriptions, per topic and weighted by publications; summarise."""
    table = outcome.tables["timestamp_size"]
    for weighted, suffix in ((False, ""), (True, "_weighted")):
        title = ("Timestamp size" + (" (weighted by publications)" if weighted else " (per topic)")
                 + f"\n{p.clients:,} clients, {p.topics:,} topics")
        with plots.figure(run.path(f"timestamp_size{suffix}.png"), title, "subscriptions",
                          "timestamp size |SG_T| (entries)") as ax:
            for model in p.popularity:
                t = table[table.popularity == model]
                mean, std = t[f"mean_size{suffix}_subscribed"], t[f"std_size{suffix}_subscribed"]
                line = ax.errorbar(t.subscriptions, mean, yerr=[np.minimum(std, mean), std],   # no size < 0
                                   marker="o", capsize=3,
                                   label=f"{model}: topics with subscribers, mean ± std")
                ax.plot(t.subscriptions, t[f"mean_size{suffix}_all"], linestyle="--", marker=".",
                        color=line[0].get_color(), label=f"{model}: all topics (0 without subscribers), mean")
            plots.log_x(ax, table.subscriptions)
    variant = "causal (one shared subscription)" if p.causal else "TNO (two shared subscriptions)"
    run.path("summary.md").write_text(
        f"# tno_timestamp_size\n\n{p.clients:,} clients, {p.topics:,} topics, sequencing groups of the "
        f"{variant} variant, seed {p.seed}. Topic of rank r is picked with probability proportional to "
        "r^-exponent: by shape (the TNO paper's parameters: exponent = 1 + shape, geographic 0.901, "
        "spray_and_diffuse 0.349) or Zipf calibrated so that the top 0.5% (skewed) or 40% (spread) of topics "
        "draw 80% of the picks (the paper's words). Each client's topics are distinct (weighted sampling "
        "without replacement), so at high topics-per-client the realised picks are flatter than the law.\n\n"
        + plots.markdown_table(outcome.tables["popularity"], ".4f") + "\n\n"
        "Columns: `_subscribed` = over the topics that have subscribers (`topics_subscribed` of them); "
        "`_all` = over all topics, a topic without subscribers counting as size 0; `_weighted` = each topic "
        "weighted by its publication probability (its popularity).\n\n"
        + plots.markdown_table(table, ".2f") + "\n")
