"""``structure: mag`` (the ``mag`` preset): a typed citation graph shaped like ogbn-mag, scaled by ``nodes``.

Four node types and four relations in ogbn-mag's proportions, each relation's reverse added (as R-GCN and R-GAT
recipes do). Papers carry features, venue labels (skewed sizes) and a year-like split; the other types have no
features (a model learns embeddings). Authors, institutions and fields have a home venue, so a paper's venue is learnt
from its neighbours. ``benchmarks/mag_like.py`` compares the preset with ogbn-mag.
"""
from __future__ import annotations

import numpy as np

from sylvie.data.graph import Graph
from sylvie.data.synthetic import class_features, split_masks
from sylvie.data.typed_synthetic import class_graph, feature_classes, relation_homophily_of, scaled, target_graph
from sylvie.errors import SylvieError
from sylvie.graph_types import Relation

MAG_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
MAG_EDGES = {Relation("author", "writes", "paper"): 7_145_660,
             Relation("paper", "cites", "paper"): 5_416_271,
             Relation("paper", "has_topic", "field_of_study"): 7_505_078,
             Relation("author", "affiliated_with", "institution"): 1_043_998}
MAG_TOTAL = sum(MAG_NODES.values())  # 1,939,743


def generate_mag(*, nodes: int, features: int, classes: int, homophily: float, feature_noise: float,
                 label_noise: float, train_fraction: float, val_fraction: float, seed: int, degree_sigma: float = 1.0,
                 reverse_relations: bool = True, relation_homophily: dict | None = None,
                 name: str = "synthetic") -> Graph:
    scale = nodes / MAG_TOTAL
    counts = scaled(MAG_NODES, scale)
    if counts["paper"] < classes or features < 1 or not (0 <= homophily <= 1) or not (0 <= label_noise <= 1) \
            or train_fraction + val_fraction > 1 or degree_sigma < 0:
        raise SylvieError(f"synthetic (structure mag): need at least one paper per class ({counts['paper']:,} papers "
                          f"for {classes} classes: raise nodes or lower classes), features >= 1, homophily and "
                          f"label_noise in [0, 1], train_fraction + val_fraction <= 1, degree_sigma >= 0")
    per_relation = relation_homophily_of(MAG_EDGES, homophily, relation_homophily, "structure mag")
    rng = np.random.default_rng(seed)
    g = class_graph(rng, counts, scaled(MAG_EDGES, scale), "paper", classes, per_relation, degree_sigma,
                    reverse_relations)  # papers the target

    papers = counts["paper"]
    seen = feature_classes(rng, g.homes["paper"], classes, label_noise)  # what the features follow
    centroids = rng.standard_normal((classes, features)).astype(np.float32)
    feats = class_features(rng, centroids, seen, feature_noise)
    masks = split_masks(rng, papers, train_fraction, val_fraction, score=-rng.random(papers))
    params = {"nodes": nodes, "features": features, "classes": classes, "homophily": homophily,
              "feature_noise": feature_noise, "label_noise": label_noise, "train_fraction": train_fraction,
              "val_fraction": val_fraction, "seed": seed, "degree_sigma": degree_sigma,
              "reverse_relations": reverse_relations, "relation_homophily": dict(relation_homophily or {})}
    return target_graph(g, counts, classes, masks, (feats,) + (None,) * (len(counts) - 1),
                        {"generator": "mag-like", "params": params}, name)
