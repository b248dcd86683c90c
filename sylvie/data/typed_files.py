"""``source: files`` for a typed graph: a node table per node type and an edge list per relation, in any format of a
homogeneous graph's files (``table_files``). Node ids are looked up within their own type; only the target type
carries labels and the split; a type without feature columns gets a learnt embedding. Edges are directed as given;
``reverse_relations`` adds reverses.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from sylvie.data.edge_files import read_edge_rows
from sylvie.data.graph import Graph, typed_edges
from sylvie.data.node_table import NodeTable, read_node_table
from sylvie.data.own_graph import canonical_edges, random_split, warn_classes, warn_edges
from sylvie.errors import SylvieError
from sylvie.graph_types import GraphTypes, Relation


def typed_types(name: str, options) -> GraphTypes:
    """The types a typed ``files`` dataset names, checked (an unknown type in a relation, no target, ...)."""
    where = f"datasets.{name}"
    if not options.target:
        raise SylvieError(f"{where}: node_tables needs target, the node type that carries the labels and split "
                          f"(one of {', '.join(options.node_tables)})")
    relations = tuple(Relation(r["src"], r["name"], r["dst"]) for r in options.relations or ())
    types = GraphTypes(tuple(options.node_tables), relations, options.target)
    types.check(f"{where}: relations")
    return types


def load_typed_files(name: str, options) -> Graph:
    types = typed_types(name, options)
    tables: dict[str, NodeTable] = {}
    for t, path in options.node_tables.items():
        tables[t] = read_node_table(dataclasses.replace(options, node_table=path), f"node_tables.{t}", t, types.target)
    counts = tuple(tables[t].num_nodes for t in types.node_types)
    offsets = dict(zip(types.node_types, np.concatenate([[0], np.cumsum(counts)]).tolist(), strict=False))
    src, dst = [], []
    for r, (relation, spec) in enumerate(zip(types.relations, options.relations, strict=True)):
        s, d = tables[relation.src], tables[relation.dst]
        rows = read_edge_rows(dataclasses.replace(options, edges=spec["edges"]), s.keys, s.num_nodes,
                              dst=(d.keys, d.num_nodes, relation.dst), what=f"relations[{r}].edges",
                              src_type=relation.src)
        if relation.src == relation.dst:  # repeats and self-loops dropped
            a, b, done = canonical_edges(rows.src, rows.dst, s.num_nodes, directed=True)
            warn_edges(spec["edges"], rows.src.shape[0], done["self_loops_removed"], relation.name)
        else:  # repeats dropped
            warn_edges(spec["edges"], rows.src.shape[0], 0, relation.name)
            keys = np.unique(rows.src * d.num_nodes + rows.dst)
            a, b = keys // d.num_nodes, keys % d.num_nodes
        src.append(a + offsets[relation.src])
        dst.append(b + offsets[relation.dst])
    types, src, dst, relation = typed_edges(types, src, dst, options.reverse_relations)
    target = tables[types.target]
    n = sum(counts)
    first = offsets[types.target]
    if not (target.labels >= 0).any():
        raise SylvieError(f"{options.node_tables[types.target]}: node_tables.{types.target}: no node has a label "
                          f"(column '{options.label_column}'); the target type needs labelled nodes")
    masks = target.masks or random_split(target.labels, options.train_fraction, options.val_fraction, options.seed)
    labels = np.full(n, -1, np.int64)
    labels[first:first + target.num_nodes] = target.labels
    full = {}
    for split, m in masks.items():
        full[split] = np.zeros(n, dtype=bool)
        full[split][first:first + target.num_nodes] = m
    num_classes = len(target.class_names) if target.class_names is not None else int(target.labels.max()) + 1
    warn_classes(f"{options.node_tables[types.target]}: column '{options.label_column}'", target.labels, num_classes,
                 masks["train"], target.class_names)
    extra = {"class_names": target.class_names} if target.class_names is not None else {}
    if types.homogeneous:  # one type, one relation: the homogeneous graph it is, features and all
        return Graph(name=name, src=src, dst=dst, features=target.features, labels=labels,
                     train_mask=full["train"], val_mask=full["val"], test_mask=full["test"], num_classes=num_classes,
                     info={"node_tables": {t: str(p) for t, p in options.node_tables.items()}, **extra},
                     node_keys=target.keys)
    return Graph(
        name=name, src=src, dst=dst, features=np.empty((n, 0), np.float32),
        labels=labels, train_mask=full["train"], val_mask=full["val"], test_mask=full["test"],
        num_classes=num_classes,
        info={"node_tables": {t: str(p) for t, p in options.node_tables.items()},
              "relations": [{**r, "edges": str(r["edges"])} for r in options.relations],
              "reverse_relations": options.reverse_relations, **extra},
        node_keys=target.keys, types=types, type_counts=counts, relation=relation,
        type_features=tuple(None if tables[t].features.shape[1] == 0 else tables[t].features
                            for t in types.node_types))
