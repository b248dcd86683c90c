"""``structure: igbh`` (the ``igbh`` preset): a typed citation graph shaped like IGBH-small, scaled by ``nodes``.

IGBH (Illinois Graph Benchmark, heterogeneous; Khatua et al., KDD 2023, arXiv 2302.13522) is what MLPerf Training's
GNN benchmark trains R-GAT on (IGBH-full there); IGBH-small (the second of its five sizes) has the four node types
and relations every size has (large and full add journal and conference). Four node types, named as IGB names them,
in IGBH-small's counts (paper 1,000,000, author 1,926,066, institute 14,751, fos 190,449: 3,131,266 nodes), and four
relations in its edge counts per node ((paper, cites, paper) 12,070,502, (paper, written_by, author) 4,553,516,
(author, affiliated_to, institute) 1,630,476, (paper, topic, fos) 7,234,122: 25,488,616 edges), each relation's
reverse added (rev-<name>) unless ``reverse_relations`` is off, as MLPerf's reference loader adds rev_<name> at
every size (it makes cites undirected instead of reversing it; IGB's own loader for small adds none). Those counts
are the ones DGL's IGBH loader asserts on the files it downloads (dmlc/dgl examples/graphbolt/rgcn/download.py,
``num_nodes`` and ``num_edges``); graphlearn-for-pytorch's examples/igbh/dataset.py (MLPerf's reference) has the
same paper and author counts. Every type carries ``features`` features (IGB gives 1024 on each of the four, float32:
Sentence-BERT embeddings; the DGL loader asserts (n, 1024) for every type): the centroid of the node's class plus
noise (``sylvie.data.synthetic.class_features``), papers' the class of their label (another for a ``label_noise``
share), the other types' their home class. Papers carry the labels: ``classes`` of them, 19 by the preset, IGB's
loader's default (``--num_classes`` 19 in IGB's dataloader and in graphlearn-for-pytorch's commands; the other label
set has 2,983 topics, which MLPerf's reference trains on at IGBH-full), because 19 coarse fields keep many papers
per class at the sizes a test or a laptop runs, while 2,983 classes need 2,983 papers at least (about 9,350 nodes)
and leave a handful each (set ``classes: 2983`` for MLPerf's label count). Class sizes are skewed ((c + 1)^-0.7, as
the mag preset's venues): IGB's per-class counts are not published in numbers we found. The split is IGB's loader's
(``IGBHeteroDGLDataset``): a random permutation of all papers, the first 60% train, the next 20% validate, the rest
test (``train_fraction``, ``val_fraction``).

Every node has a log-normal degree propensity (log-std ``degree_sigma``; IGB publishes no degree distribution) and a
class; an edge's source is drawn by propensity, its destination within the source's class or anywhere, so that a
share ``relation_homophily[name]`` (``homophily`` for a relation it does not name) of the relation's edges join two
nodes of one class, in expectation (the edges drawn anywhere that land in the class by chance counted; a class with
no node of the destination type draws anywhere; a repeated edge, dropped, is more often one within a class, so a
small graph's shares land a little under: 0.005 to 0.02 at 30,000 nodes). IGBH's homophily per relation is not
published where we looked (IGB's repository and leaderboard, what we could search of its paper,
graphlearn-for-pytorch, MLPerf's reference, DGL's loader), so the preset's values are our assumptions, not
measurements: cites 0.75 (19 classes are broad fields: a citation mostly stays in its field), written_by 0.8 (an
author writes mostly in one field), topic 0.9 (a fos node is a finer field inside one broad field) and affiliated_to
0.4 (an institute spans many fields: its home field says little about its authors'). ``benchmarks/igbh_like.py``
prints the preset beside IGBH-small's published statistics.
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
