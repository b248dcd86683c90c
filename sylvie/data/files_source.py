"""``source: files``: a graph given as an edge list and a node table in Parquet, Arrow/Feather, CSV/TSV or .npy
files (``table_files``), read in chunks into the canonical graph every other source produces."""
from __future__ import annotations

import pyarrow as pa

from sylvie.data.edge_files import read_edge_rows
from sylvie.data.graph import Graph
from sylvie.data.input_files import files_of
from sylvie.data.link_files import given, read_edge_split, with_link_pairs
from sylvie.data.node_table import TABLE_KINDS, read_node_table
from sylvie.data.own_graph import own_graph
from sylvie.data.table_files import chunks, headers, num_rows
from sylvie.data.typed_files import load_typed_files, table_path


def load_files(name: str, options) -> Graph:
    """The canonical graph of dataset ``name`` from the files its options name (a typed graph's: ``typed_files``)."""
    if options.node_tables:
        return load_typed_files(name, options)
    nodes = read_node_table(options)
    edges = read_edge_rows(options, nodes.keys, nodes.num_nodes)
    keys = nodes.keys
    if keys is not None and edges.added is not None:
        keys = pa.concat_arrays([keys, edges.added.cast(keys.type)])
    split = read_edge_split(options, keys, nodes.num_nodes + edges.num_added, edges) if given(options) else None
    src, dst = (edges.src, edges.dst) if split is None else (split.train_src, split.train_dst)
    graph = own_graph(name, src=src, dst=dst, features=nodes.features, labels=nodes.labels,
                      class_names=nodes.class_names, masks=nodes.masks, num_added=edges.num_added, options=options,
                      node_keys=keys, info={"edges": str(options.edges), "node_table": str(options.node_table)})
    return graph if split is None else with_link_pairs(graph, split, options, f"dataset '{name}'")


def input_paths(options) -> dict[str, str]:
    """The files and folders the dataset is read from, by the key that gives each (``edges``,
    ``node_tables.paper``, ``relations[0].edges``)."""
    if options.node_tables:
        return {**{f"node_tables.{t}": table_path(p) for t, p in options.node_tables.items()},
                **{f"relations[{i}].edges": r["edges"] for i, r in enumerate(options.relations or ())}}
    return {k: getattr(options, k) for k in ("edges", "node_table", "features_file", "val_edges", "test_edges")
            if getattr(options, k)}


def count_nodes(options) -> int:
    """The node table's rows (from Parquet's or Arrow's metadata; a CSV is counted), before the graph is built; a
    typed graph's, of every type's table."""
    if options.node_tables:
        return sum(_count_rows(table_path(p), f"node_tables.{t}") for t, p in options.node_tables.items())
    return _count_rows(options.node_table, "node_table")


def _count_rows(table, what: str) -> int:
    files, kind = files_of(table, what, TABLE_KINDS)
    known = num_rows(files, kind)
    if known is not None:
        return known
    names_of = headers(files, kind, what)
    first = names_of[0][:1]
    return sum(c.batch.num_rows for c in chunks(files, kind, first, what, {first[0]: pa.large_string()}, names_of))
