"""``source: files`` for a typed graph: a node table per node type and an edge list per relation, in any format of a
homogeneous graph's files (``table_files``). Each table and edge list may name its columns its own way (a node
table's ``node_key`` and ``feature_columns``, a relation's ``edge_columns``), the dataset's knobs of those names
standing in where it does not. Node ids are looked up within their own type; only the target type carries labels and
the split; a type without feature columns gets a learnt embedding. A relation's edges are directed as given, and
``reverse_relations`` adds its reverse; a relation within one node type declared ``directed: false`` holds both
directions itself, and gets no reverse.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from sylvie.data.edge_files import read_edge_rows
from sylvie.data.graph import Graph, typed_edges
from sylvie.data.link_split import in_sorted
from sylvie.data.node_table import NodeTable, read_node_table
from sylvie.data.own_graph import canonical_edges, random_split, warn_classes, warn_edges
from sylvie.errors import SylvieError
from sylvie.graph_types import REVERSE_PREFIX, GraphTypes, Relation

log = logging.getLogger(__name__)

# a relation within one node type taken as directed whose edges have their reverse edge this rarely is said to be
# most likely one given once per pair, either way round (a citation list), with how to declare it undirected
ONE_WAY_SHARE = 0.05


def table_path(spec: str | dict) -> str:
    """The file or folder of a ``node_tables`` entry (a path, or ``{path, node_key, feature_columns}``)."""
    return spec["path"] if isinstance(spec, dict) else spec


def table_options(options, node_type: str):
    """The dataset's options as node type ``node_type``'s table reads them: its path as ``node_table``, and its
    own ``node_key`` and ``feature_columns`` where its entry gives them."""
    spec = options.node_tables[node_type]
    own = {k: spec[k] for k in ("node_key", "feature_columns") if isinstance(spec, dict) and k in spec}
    return dataclasses.replace(options, node_table=table_path(spec), **own)


def relation_options(options, index: int):
    """The dataset's options as relation ``index``'s edge list reads them: its file as ``edges``, and its own
    ``edge_columns`` where it gives them."""
    spec = options.relations[index]
    return dataclasses.replace(options, edges=spec["edges"],
                               edge_columns=list(spec.get("edge_columns", options.edge_columns)))


def undirected_relations(options) -> frozenset[int]:
    """The indices of the relations declared ``directed: false``."""
    return frozenset(i for i, r in enumerate(options.relations or ()) if r.get("directed", True) is False)


def typed_types(name: str, options) -> GraphTypes:
    """The types a typed ``files`` dataset names, checked (an unknown type in a relation, no target, an undirected
    relation between two types, ...)."""
    where = f"datasets.{name}"
    if not options.target:
        raise SylvieError(f"{where}: node_tables needs target, the node type that carries the labels and split "
                          f"(one of {', '.join(options.node_tables)})")
    relations = tuple(Relation(r["src"], r["name"], r["dst"]) for r in options.relations or ())
    types = GraphTypes(tuple(options.node_tables), relations, options.target)
    types.check(f"{where}: relations")
    names = {r.name for r in relations}
    for i, r in enumerate(relations):
        given = r.name.removeprefix(REVERSE_PREFIX)
        if options.reverse_relations and r.name.startswith(REVERSE_PREFIX) and given in names:
            raise SylvieError(f"{where}.relations[{i}] ({r.src}:{r.name}:{r.dst}): named as reverse_relations names "
                              f"the reverse of relation {given!r}, which it adds itself; rename it, or set "
                              f"reverse_relations: false and give every reverse yourself")
    for i in sorted(undirected_relations(options)):
        r = relations[i]
        if r.src != r.dst:
            other = (f"the reverse relation (rev-{r.name}, which reverse_relations adds) already carries the "
                     f"other direction: drop directed" if options.reverse_relations else
                     f"the other direction is a relation of its own: drop directed, and set reverse_relations: "
                     f"true (rev-{r.name}) or give that relation yourself")
            raise SylvieError(f"{where}.relations[{i}] ({r.src}:{r.name}:{r.dst}): directed false joins nodes of one "
                              f"type both ways; between {r.src} and {r.dst}, {other}")
    return types


def load_typed_files(name: str, options) -> Graph:
    types = typed_types(name, options)
    tables: dict[str, NodeTable] = {t: read_node_table(table_options(options, t), f"node_tables.{t}", t, types.target)
                                    for t in options.node_tables}
    counts = tuple(tables[t].num_nodes for t in types.node_types)
    offsets = dict(zip(types.node_types, np.concatenate([[0], np.cumsum(counts)]).tolist(), strict=False))
    undirected = undirected_relations(options)
    src, dst = [], []
    for r, (relation, spec) in enumerate(zip(types.relations, options.relations, strict=True)):
        s, d = tables[relation.src], tables[relation.dst]
        rows = read_edge_rows(relation_options(options, r), s.keys, s.num_nodes,
                              dst=(d.keys, d.num_nodes, relation.dst), what=f"relations[{r}].edges",
                              src_type=relation.src)
        if relation.src == relation.dst:  # repeats and self-loops dropped; undirected: both directions, once
            a, b, done = canonical_edges(rows.src, rows.dst, s.num_nodes, directed=r not in undirected)
            warn_edges(spec["edges"], rows.src.shape[0], done["self_loops_removed"], relation.name)
            if r not in undirected and "directed" not in spec:
                _warn_one_way(spec["edges"], r, relation, a, b, s.num_nodes, options.reverse_relations)
        else:  # repeats dropped
            warn_edges(spec["edges"], rows.src.shape[0], 0, relation.name)
            keys = np.unique(rows.src * d.num_nodes + rows.dst)
            a, b = keys // d.num_nodes, keys % d.num_nodes
        src.append(a + offsets[relation.src])
        dst.append(b + offsets[relation.dst])
    types, src, dst, relation = typed_edges(types, src, dst, options.reverse_relations, undirected)
    target = tables[types.target]
    n = sum(counts)
    first = offsets[types.target]
    target_path = table_path(options.node_tables[types.target])
    if not (target.labels >= 0).any():
        raise SylvieError(f"{target_path}: node_tables.{types.target}: no node has a label "
                          f"(column '{options.label_column}'); the target type needs labelled nodes")
    masks = target.masks or random_split(target.labels, options.train_fraction, options.val_fraction, options.seed)
    labels = np.full(n, -1, np.int64)
    labels[first:first + target.num_nodes] = target.labels
    full = {}
    for split, m in masks.items():
        full[split] = np.zeros(n, dtype=bool)
        full[split][first:first + target.num_nodes] = m
    num_classes = len(target.class_names) if target.class_names is not None else int(target.labels.max()) + 1
    warn_classes(f"{target_path}: column '{options.label_column}'", target.labels, num_classes,
                 masks["train"], target.class_names)
    extra = {"class_names": target.class_names} if target.class_names is not None else {}
    if types.homogeneous:  # one type, one relation: the homogeneous graph it is, features and all
        return Graph(name=name, src=src, dst=dst, features=target.features, labels=labels,
                     train_mask=full["train"], val_mask=full["val"], test_mask=full["test"], num_classes=num_classes,
                     info={"node_tables": {t: str(table_path(p)) for t, p in options.node_tables.items()}, **extra},
                     node_keys=target.keys)
    return Graph(
        name=name, src=src, dst=dst, features=np.empty((n, 0), np.float32),
        labels=labels, train_mask=full["train"], val_mask=full["val"], test_mask=full["test"],
        num_classes=num_classes,
        info={"node_tables": {t: str(table_path(p)) for t, p in options.node_tables.items()},
              "relations": [{**r, "edges": str(r["edges"])} for r in options.relations],
              "reverse_relations": options.reverse_relations, **extra},
        node_keys=target.keys, types=types, type_counts=counts, relation=relation,
        type_features=tuple(None if tables[t].features.shape[1] == 0 else tables[t].features
                            for t in types.node_types))


def _warn_one_way(edges: str, index: int, relation: Relation, src: np.ndarray, dst: np.ndarray, n: int,
                  reverse: bool) -> None:
    """A warning line where a relation within one node type, taken as directed (``directed`` not given), has its
    reverse edge for almost none of its edges: most likely each pair given once, in whatever order the export
    produced, which as a directed relation sends a node's neighbours through two weights by that order alone (with
    ``reverse``: the relation's and its reverse's)."""
    m = src.shape[0]
    if m == 0:
        return
    share = float(np.count_nonzero(in_sorted(dst * n + src, np.sort(src * n + dst)))) / m
    if share < ONE_WAY_SHARE:
        split = (f"its reverse, rev-{relation.name}, a relation of its own" if reverse else
                 "no reverse: a node hears only the nodes its edges come from")
        log.warning(f"{edges}: relations[{index}] ({relation.src}:{relation.name}:{relation.dst}): {share:.1%} of its "
                    f"{m:,} edges have their reverse edge, and it is taken as directed (src -> dst as given; {split}). "
                    f"If each pair is listed once in no particular order (an undirected relation), declare it "
                    f"directed: false (one relation holding both directions; docs/datasets.md says how that weighs "
                    f"against two relations of the same edges); if the direction means something (who cites whom), "
                    f"declare directed: true to silence this line")
