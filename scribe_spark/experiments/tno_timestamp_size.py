"""Experiment tno_timestamp_size (SPEC T1): timestamp size |SG_T| vs subscriptions per client."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from scribe_spark import report
from scribe_spark.cli import Run
from scribe_spark.config import TnoSizeParams
from scribe_spark.session import spark_session
from scribe_spark.tno import groups
from scribe_spark.workloads.popularity import POPULARITY, draw_subscriptions, popularity, zipf_exponent


def _weighted(values: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    mean = float(np.average(values, weights=weights))
    return mean, float(np.sqrt(np.average((values - mean) ** 2, weights=weights)))


def _measure(spark, p: TnoSizeParams, run: Run, model: str, probs: np.ndarray, k: int) -> dict:
    """Draw k topics per client, size every sequencing group; return one row."""
    t0 = time.time()
    rng = np.random.default_rng([p.seed, k, list(POPULARITY).index(model)])
    sub, top = draw_subscriptions(p.clients, k, probs, rng)
    df = spark.createDataFrame(pd.DataFrame({groups.SUBSCRIBER: sub.astype(np.int32),
                                             groups.TOPIC: top.astype(np.int32)}))
    sizes = groups.sequencing_group_sizes(df, causal=p.causal).toPandas()
    size = np.zeros(p.topics)
    size[sizes.topic.to_numpy()] = sizes["size"].to_numpy()
    subscribed = size > 0   # a topic nobody subscribes to has no group and no events
    v, w = size[subscribed], probs[subscribed]
    mean_w, std_w = _weighted(v, w)
    run.log(f"{model}, {k} topics/client ({len(sub):,} subscriptions): mean |SG| {v.mean():.1f} "
            f"(weighted {mean_w:.1f}) ({time.time() - t0:.1f}s)")
    return {"popularity": model, "topics_per_client": k, "subscriptions": len(sub),
            "mean_size": v.mean(), "std_size": v.std(), "mean_size_weighted": mean_w,
            "std_size_weighted": std_w, "topics_subscribed": int(subscribed.sum())}


def run(p: TnoSizeParams, run: Run) -> None:
    """Measure timestamp sizes for every popularity model and subscriptions-per-client value."""
    spark = spark_session(run.name)
    rows = []
    for model in p.popularity:
        probs = popularity(p.topics, model)
        run.log(f"{model}: Zipf exponent {zipf_exponent(p.topics, POPULARITY[model]):.4f} "
                f"(top {POPULARITY[model]:.1%} of topics draw 80% of picks)")
        for k in p.topics_per_client:
            rows.append(run.point(f"{model} topics_per_client={k}",
                                  lambda: _measure(spark, p, run, model, probs, k)))
    table = pd.DataFrame(rows)
    report.write_csv(table, run.path("timestamp_size.csv"))
    for weighted, suffix in ((False, ""), (True, "_weighted")):
        title = "Timestamp size" + (" (weighted by publications)" if weighted else " (per topic)")
        with report.figure(run.path(f"timestamp_size{suffix}.png"), title, "subscriptions",
                           "timestamp size |SG_T| (entries)") as ax:
            for model in p.popularity:
                t = table[table.popularity == model]
                ax.errorbar(t.subscriptions, t[f"mean_size{suffix}"], yerr=t[f"std_size{suffix}"], marker="o",
                            capsize=3, label=f"{model}: mean ± std")
            ax.set_xscale("log")
    variant = "causal (one shared subscription)" if p.causal else "TNO (two shared subscriptions)"
    run.path("summary.md").write_text(
        f"# tno_timestamp_size\n\n{p.clients:,} clients, {p.topics:,} topics, sequencing groups of the "
        f"{variant} variant, seed {p.seed}. Popularity is Zipf over topic rank, calibrated so that the top "
        "0.5% (skewed) or 40% (spread) of topics draw 80% of the picks; each client's topics are distinct "
        "(weighted sampling without replacement), so at high topics-per-client the realised picks are "
        "flatter than the Zipf law. Weighted statistics weight each topic by its publication probability (= "
        "its popularity).\n\n" + report.markdown_table(table, ".2f") + "\n")
