"""Topic popularity laws by name (TNO workloads): the math alone, below parameters and workloads.

Two families, by name (`MODELS`):

- by shape, the TNO paper's parameters: the topic of rank r (1 = most popular) is drawn with
  probability proportional to r^-(1 + shape), a discrete Pareto law; `geographic` has shape
  0.901, `spray_and_diffuse` 0.349, and `pareto:<shape>` any other shape > 0;
- calibrated to words: Zipf over rank with the exponent that makes the top `share` of topics
  draw 80% of the picks; `skewed` (top 0.5%) and `spread` (top 40%), the paper's descriptions
  in words, which the shapes above fit only loosely.
"""
from __future__ import annotations

import hashlib

import numpy as np
from scipy.optimize import brentq

# name -> (family, parameter); the order fixes each model's random stream (`model_index`)
MODELS = {"skewed": ("top80", 0.005), "spread": ("top80", 0.40),
          "geographic": ("shape", 0.901), "spray_and_diffuse": ("shape", 0.349)}


def parse_model(name: str) -> tuple[str, float]:
    """Return (family, parameter) of a model name; raise ValueError with the reason if it is not one."""
    if name in MODELS:
        return MODELS[name]
    if name.startswith("pareto:"):
        try:
            shape = float(name.removeprefix("pareto:"))
        except ValueError:
            raise ValueError(f"'{name}': the shape after 'pareto:' must be a number") from None
        if not shape > 0 or not np.isfinite(shape):
            raise ValueError(f"'{name}': the shape must be a finite number > 0")
        return "shape", shape
    raise ValueError(f"'{name}': models are {', '.join(MODELS)} or pareto:<shape>")


def model_index(name: str) -> int:
    """Return a stable number for a model name (its place in MODELS, else from its text) for seeding."""
    if name in MODELS:
        return list(MODELS).index(name)
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:4], "big")


def zipf_exponent(n_topics: int, top_share: float, mass: float = 0.8) -> float:
    """Return s such that the top ceil(top_share * n) ranks hold `mass` of Zipf(s) over n ranks."""
    k = max(1, int(np.ceil(top_share * n_topics)))
    r = np.arange(1, n_topics + 1, dtype=np.float64)

    def excess(s: float) -> float:
        w = r ** -s
        return w[:k].sum() / w.sum() - mass
    if excess(0.0) >= 0:
        return 0.0
    return float(brentq(excess, 0.0, 50.0, xtol=1e-10))


def exponent(n_topics: int, model: str) -> float:
    """Return the exponent s of the model's law r^-s over n_topics ranks."""
    family, value = parse_model(model)
    return 1.0 + value if family == "shape" else zipf_exponent(n_topics, value)


def popularity(n_topics: int, model: str) -> np.ndarray:
    """Return publication/pick probabilities of topics by rank (rank 0 most popular)."""
    w = np.arange(1, n_topics + 1, dtype=np.float64) ** -exponent(n_topics, model)
    return w / w.sum()


def describe(n_topics: int, model: str) -> dict:
    """Return the model's law and how concentrated it is: shares drawn by the top 0.5% and 40% of topics."""
    p = popularity(n_topics, model)
    family, value = parse_model(model)
    cum = np.cumsum(p)
    top = {f"top_{share:g}_draws": float(cum[max(1, int(np.ceil(share * n_topics))) - 1])
           for share in (0.005, 0.40)}
    law = f"Pareto shape {value:g}" if family == "shape" else f"Zipf calibrated: top {value:.1%} draw 80%"
    return {"popularity": model, "law": law, "exponent": exponent(n_topics, model), **top,
            "topics_drawing_80pct": int(np.searchsorted(cum, 0.8) + 1)}
