"""``structure: igbh`` (the ``igbh`` preset): a typed citation graph shaped like IGBH-small (MLPerf's R-GAT dataset
family), scaled by ``nodes``.

IGBH-small's four node types and relations in its counts per node, reverses added as MLPerf's loader adds them;
features on every type; 19 paper classes and IGB's 60/20/20 split. IGBH publishes no homophily per relation, so the
preset's are assumptions. ``benchmarks/igbh_like.py`` compares the two.
"""
from __future__ import annotations

import numpy as np

from sylvie.data.graph import Graph
from sylvie.data.synthetic import class_features, split_masks
from sylvie.data.typed_synthetic import (
    ClassGraph,
    class_graph,
    feature_classes,
    relation_homophily_of,
    scaled,
    target_graph,
)
from sylvie.errors import SylvieError
from sylvie.graph_types import Relation
from sylvie.memory_budget import check_fits

IGBH_NODES = {"paper": 1_000_000, "author": 1_926_066, "institute": 14_751, "fos": 190_449}
IGBH_EDGES = {Relation("paper", "cites", "paper"): 12_070_502,
              Relation("paper", "written_by", "author"): 4_553_516,
              Relation("author", "affiliated_to", "institute"): 1_630_476,
              Relation("paper", "topic", "fos"): 7_234_122}
IGBH_TOTAL = sum(IGBH_NODES.values())  # 3,131,266
IGBH_FEATURES = 1024  # every type's width
IGBH_SPLIT = (0.6, 0.2)  # IGB's loader: train, validation shares of the papers (the rest test)


def generate_igbh(*, nodes: int, features: int, classes: int, homophily: float, feature_noise: float,
                  label_noise: float, train_fraction: float, val_fraction: float, seed: int, degree_sigma: float = 1.0,
                  reverse_relations: bool = True, relation_homophily: dict | None = None,
                  name: str = "synthetic") -> Graph:
    where = "structure igbh"
    scale = nodes / IGBH_TOTAL
    counts, edges = scaled(IGBH_NODES, scale), scaled(IGBH_EDGES, scale)
    if counts["paper"] < classes:
        raise SylvieError(f"synthetic ({where}): nodes={nodes:,} makes {counts['paper']:,} papers, fewer than "
                          f"classes={classes}; need at least one paper per class: raise nodes or lower classes")
    if features < 1 or degree_sigma < 0 or feature_noise < 0:
        raise SylvieError(f"synthetic ({where}): need features >= 1, degree_sigma >= 0 and feature_noise >= 0 (got "
                          f"features={features}, degree_sigma={degree_sigma}, feature_noise={feature_noise})")
    if not (0 <= homophily <= 1) or not (0 <= label_noise <= 1) or train_fraction + val_fraction > 1:
        raise SylvieError(f"synthetic ({where}): homophily and label_noise must be in [0, 1] and train_fraction + "
                          f"val_fraction <= 1 (got homophily={homophily}, label_noise={label_noise}, "
                          f"train_fraction={train_fraction}, val_fraction={val_fraction})")
    relation_homophily_of(IGBH_EDGES, homophily, relation_homophily, where)  # a bad name refused before any work
    stored = sum(edges.values()) * (2 if reverse_relations else 1)
    check_fits(sum(counts.values()) * features * 4 + stored * 18,
               f"synthetic ({where}): {sum(counts.values()):,} nodes x {features:,} features (every type) and "
               f"{stored:,} edges", "lower nodes or features")
    rng = np.random.default_rng(seed)
    g = igbh_structure(rng, nodes=nodes, classes=classes, homophily=homophily, degree_sigma=degree_sigma,
                       reverse_relations=reverse_relations, relation_homophily=relation_homophily)

    papers = counts["paper"]
    seen = feature_classes(rng, g.homes["paper"], classes, label_noise)  # the class a paper's features follow
    centroids = rng.standard_normal((classes, features)).astype(np.float32)  # one space for every type
    feats = tuple(class_features(rng, centroids, seen if t == "paper" else g.homes[t], feature_noise)
                  for t in counts)  # one array a type, nothing else of its size held
    masks = split_masks(rng, papers, train_fraction, val_fraction)  # a random permutation, as IGB's loader
    params = {"nodes": nodes, "features": features, "classes": classes, "homophily": homophily,
              "feature_noise": feature_noise, "label_noise": label_noise, "train_fraction": train_fraction,
              "val_fraction": val_fraction, "seed": seed, "degree_sigma": degree_sigma,
              "reverse_relations": reverse_relations, "relation_homophily": dict(relation_homophily or {})}
    return target_graph(g, counts, classes, masks, feats, {"generator": "igbh-like", "params": params}, name)


def igbh_structure(rng, *, nodes: int, classes: int, homophily: float, degree_sigma: float, reverse_relations: bool,
                   relation_homophily: dict | None) -> ClassGraph:
    """The preset's node types, every node's class and the edges: what ``generate_igbh`` draws first from its
    generator (``np.random.default_rng(seed)`` here gives the graph of that seed, with the classes of the types
    other than papers, which the graph does not keep)."""
    scale = nodes / IGBH_TOTAL
    per_relation = relation_homophily_of(IGBH_EDGES, homophily, relation_homophily, "structure igbh")
    return class_graph(rng, scaled(IGBH_NODES, scale), scaled(IGBH_EDGES, scale), "paper", classes, per_relation,
                       degree_sigma, reverse_relations, homophily_is_share=True)


def node_classes(graph: Graph) -> np.ndarray:
    """Every node's class (a paper's label; another type's home class, which the graph does not keep), drawn again
    from the generator's parameters the graph records (``info["params"]``); its edges are checked to be the ones
    drawn (a SylvieError where the graph is not this generator's as recorded)."""
    params = graph.info.get("params", {})
    if graph.info.get("generator") != "igbh-like":
        raise SylvieError(f"{graph.name}: not a graph of the igbh preset (generator {graph.info.get('generator')})")
    structure = igbh_structure(np.random.default_rng(params["seed"]),
                               **{k: params[k] for k in ("nodes", "classes", "homophily", "degree_sigma",
                                                         "reverse_relations", "relation_homophily")})
    if not (np.array_equal(structure.src, graph.src) and np.array_equal(structure.dst, graph.dst)):
        raise SylvieError(f"{graph.name}: its edges are not the ones its recorded parameters draw")
    return np.concatenate([structure.homes[t] for t in graph.types.node_types])
