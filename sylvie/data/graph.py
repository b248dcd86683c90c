"""The canonical graph: what every dataset becomes after download, and all that partitioning reads.

A directory of Arrow files (``nodes.arrow``, ``edges.arrow``, a typed graph's ``features.<t>.arrow``) and
``meta.json`` (counts, fingerprint, checksum). A typed graph has type-contiguous node ids and each edge's relation; a
homogeneous graph is the case of one type and one relation. Written atomically and validated when written and read.
Layout: below.
"""
# On disk a canonical graph is a directory:
#
#     nodes.arrow   Arrow IPC file, one row per node: feat (fixed_size_list<float32>[D]), label (int64,
#                   -1 = unlabelled), one bool column per split (``SPLITS``: train, val, test)
#     edges.arrow   Arrow IPC file, one row per directed edge src -> dst (int64 node ids)
#     meta.json     name, counts, num_classes, source, fingerprint (sha256 of the arrays); class_names where the
#                   labels were given as names (class i is class_names[i]); checksum, of all its other fields
#                   (``sylvie.formats.checksum``; a meta.json written before it is read unchecked)
#     node_keys.arrow  only for a graph made from a user's files with their own node ids
#                   (``sylvie/formats/node_keys.py``; a typed graph's: of its target type's nodes)
#
# A typed graph (``sylvie.graph_types``: node types, relations, a target type) is the same directory with its node ids
# type-contiguous (``type_counts`` per type, in ``meta.json`` with the types), each edge's relation index in a
# ``relation`` column (int16) of ``edges.arrow``, and each node type's features in ``features.<t>.arrow`` (t: the
# type's index; no file for a type without features) rather than a ``feat`` column; labels and splits on the target
# type's nodes only. A homogeneous graph is the case of one type and one relation, written as before.
from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from sylvie.arrow_arrays import as_numpy
from sylvie.atomic import atomic_path, read_json
from sylvie.errors import SylvieError, one_line
from sylvie.formats.checksum import checked, with_checksum
from sylvie.formats.link_pairs import LinkPairs, read_link_pairs, write_link_pairs
from sylvie.formats.node_keys import write_node_keys
from sylvie.formats.splits import SPLITS
from sylvie.graph_types import HOMOGENEOUS, GraphTypes
from sylvie.output_dir import CANONICAL_GRAPH, identify

FORMAT_VERSION = 1


def check_features(features: np.ndarray, nodes: int, where: str) -> None:
    """A float32 matrix of a finite row a node, else a SylvieError naming ``where`` and the field."""
    if features.ndim != 2 or features.dtype != np.float32:
        raise SylvieError(f"{where}: field 'feat' must be a float32 matrix, got {features.dtype} with shape "
                          f"{features.shape}")
    if features.shape[0] != nodes:
        raise SylvieError(f"{where}: field 'feat' has {features.shape[0]} rows, expected {nodes} (one per node)")
    bad = ~np.isfinite(features).all(axis=1)
    if bad.any():
        raise SylvieError(f"{where}: field 'feat' has non-finite values (NaN or inf) in {int(bad.sum())} rows, "
                          f"first at node {int(np.flatnonzero(bad)[0])}; clean the features or drop those nodes")


@dataclass
class Graph:
    """A node-classification graph in canonical form (edges are directed src -> dst)."""

    name: str
    src: np.ndarray
    dst: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    num_classes: int
    info: dict = field(default_factory=dict)
    # (in-degree, out-degree) of every node once :func:`degrees` counted them (kept by dataclasses.replace of
    # anything but the edges)
    counted_degrees: tuple | None = field(default=None, repr=False, compare=False)
    # the user's id of every node (int64 or large_string, in node order), where the source gives ids of its own; a
    # typed graph's: of its target type's nodes (what evaluation predicts)
    node_keys: pa.Array | None = field(default=None, repr=False, compare=False)
    # A typed graph: its types, nodes per type (ids type-contiguous in types.node_types order), each edge's relation
    # index, and each type's features (None: a type without features); ``features`` then has no columns (N x 0).
    # A homogeneous graph: HOMOGENEOUS, no counts, no relation column, its features in ``features``.
    types: GraphTypes = HOMOGENEOUS
    type_counts: tuple[int, ...] = ()
    relation: np.ndarray | None = field(default=None, repr=False)
    type_features: tuple[np.ndarray | None, ...] = field(default=(), repr=False)
    # A link-prediction dataset's edge split (``sylvie.formats.link_pairs``): the edges above are its training edges
    link: LinkPairs | None = field(default=None, repr=False, compare=False)

    @property
    def num_nodes(self) -> int:
        return int(self.labels.shape[0])

    @property
    def typed(self) -> bool:
        return not self.types.homogeneous

    @property
    def node_counts(self) -> tuple[int, ...]:
        """Nodes of each type (a homogeneous graph: all of them)."""
        return tuple(self.type_counts) if self.typed else (self.num_nodes,)

    @property
    def type_offsets(self) -> np.ndarray:
        """The first node id of each type, then the number of nodes (int64)."""
        return np.concatenate([[0], np.cumsum(self.node_counts, dtype=np.int64)])

    def features_of(self, t: int) -> np.ndarray | None:
        """Node type ``t``'s features (a row per node of the type), None for a type without features."""
        return self.type_features[t] if self.typed else self.features

    @property
    def feature_widths(self) -> tuple[int | None, ...]:
        features = map(self.features_of, range(len(self.node_counts)))
        return tuple(None if f is None else int(f.shape[1]) for f in features)

    def edge_relations(self) -> np.ndarray:
        """Each edge's relation index (a homogeneous graph: all 0)."""
        return self.relation if self.relation is not None else np.zeros(self.num_edges, np.int16)

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    @property
    def masks(self) -> dict[str, np.ndarray]:
        """Split name -> its node mask, in the order of ``SPLITS``."""
        return dict(zip(SPLITS, (self.train_mask, self.val_mask, self.test_mask), strict=True))

    def validate(self, where: str) -> None:
        """Raise SylvieError naming ``where`` and the field if anything is inconsistent."""
        n = self.num_nodes
        if self.typed:
            self._validate_types(where)
        else:
            check_features(self.features, n, where)
        for name, arr in {"label": self.labels, **self.masks}.items():
            if arr.shape != (n,):
                raise SylvieError(f"{where}: field '{name}' has {arr.shape[0]} rows, expected {n} (one per node)")
        if self.src.shape != self.dst.shape:
            raise SylvieError(f"{where}: edge columns 'src' and 'dst' differ in length")
        if self.num_edges and (min(self.src.min(), self.dst.min()) < 0 or max(self.src.max(), self.dst.max()) >= n):
            raise SylvieError(f"{where}: edge endpoints must lie in [0, {n}); the edge list refers to missing nodes")
        if self.num_classes < 1:
            raise SylvieError(f"{where}: num_classes must be >= 1, got {self.num_classes}")
        labelled = self.train_mask | self.val_mask | self.test_mask
        out = labelled & ((self.labels < 0) | (self.labels >= self.num_classes))
        if out.any():
            i = int(np.flatnonzero(out)[0])
            raise SylvieError(f"{where}: field 'label' is out of range [0, {self.num_classes}) for {int(out.sum())} "
                              f"train/val/test nodes (node {i} has label {int(self.labels[i])}); fix the labels or "
                              f"num_classes")
        if not self.train_mask.any():
            raise SylvieError(f"{where}: field 'train' selects no node; a dataset needs training nodes")
        keyed = self.node_counts[self.types.target_index] if self.typed else n  # a typed graph's: its target's
        if self.node_keys is not None and len(self.node_keys) != keyed:
            raise SylvieError(f"{where}: {len(self.node_keys)} node ids for {keyed} nodes")

    def _validate_types(self, where: str) -> None:
        """A typed graph's counts, relation column, features and labels (on the target type only)."""
        types = self.types
        types.check(where)
        counts = self.node_counts
        if len(counts) != len(types.node_types) or sum(counts) != self.num_nodes or min(counts) < 0:
            raise SylvieError(f"{where}: type_counts {list(counts)} must give the nodes of each of the "
                              f"{len(types.node_types)} node types, {self.num_nodes} in all")
        rel = self.relation
        if rel is None or rel.shape != self.src.shape:
            raise SylvieError(f"{where}: a typed graph needs each edge's relation ('relation', one per edge)")
        if rel.shape[0] and (int(rel.min()) < 0 or int(rel.max()) >= len(types.relations)):
            raise SylvieError(f"{where}: field 'relation' must lie in [0, {len(types.relations)}) (one per relation)")
        offsets = self.type_offsets
        if self.num_edges:
            s_ends, d_ends = (np.array([types.type_index(getattr(r, end)) for r in types.relations])
                              for end in ("src", "dst"))
            for ids, ends, end in ((self.src, s_ends, "source"), (self.dst, d_ends, "destination")):
                t = ends[rel]
                bad = (ids < offsets[t]) | (ids >= offsets[t + 1])
                if bad.any():
                    e = int(np.flatnonzero(bad)[0])
                    relation = types.relations[int(rel[e])]
                    raise SylvieError(f"{where}: {int(bad.sum())} edges have a {end} outside their relation's node "
                                      f"type, first edge {e} of relation {relation} (node {int(ids[e])}); the "
                                      f"edges refer to nodes missing from the type's table")
        if len(self.type_features) != len(counts):
            raise SylvieError(f"{where}: {len(self.type_features)} feature matrices for {len(counts)} node types "
                              f"(None for a type without features)")
        for t, f in enumerate(self.type_features):
            if f is not None:
                check_features(f, counts[t], f"{where}: node type {types.node_types[t]!r}")
        target = types.target_index
        outside = np.ones(self.num_nodes, dtype=bool)
        outside[offsets[target]:offsets[target + 1]] = False
        for name, arr in {"label": self.labels >= 0, **self.masks}.items():
            if arr[outside].any():
                i = int(np.flatnonzero(arr & outside)[0])
                raise SylvieError(f"{where}: field '{name}' is set on node {i}, which is not of the target type "
                                  f"{types.target!r}; labels and splits belong to the target type only: make that "
                                  f"type the target or drop them")

    def fingerprint(self, edges_hash=None) -> str:
        """sha256 over the arrays' bytes (not the file encoding): identifies the content. ``edges_hash``: the hash of
        the edges taken before (:func:`hash_edges`), continued here; the edge columns are then not read (None)."""
        h = (edges_hash or hash_edges(self.src, self.dst)).copy()
        for arr in (self.features, self.labels, self.train_mask, self.val_mask, self.test_mask):
            h.update(np.ascontiguousarray(arr))  # the buffer itself: tobytes() would copy the largest array
        h.update(str(self.num_classes).encode())
        if self.typed:  # a homogeneous graph's fingerprint is what it was before typed graphs
            h.update(json.dumps([self.types.to_json(), list(self.node_counts), list(self.feature_widths)]).encode())
            h.update(np.ascontiguousarray(self.relation))
            for f in self.type_features:
                h.update(b"-" if f is None else np.ascontiguousarray(f))
        return h.hexdigest()


def typed_edges(types: GraphTypes, src: list, dst: list, reverse: bool,
                undirected: frozenset[int] = frozenset()) -> tuple:
    """(types, src, dst, relation) of a typed graph whose relation r has the edges ``src[r]`` -> ``dst[r]`` (global
    ids): the relations' edges concatenated with each edge's relation (int16); with ``reverse``, each relation's
    reverse added (``GraphTypes.with_reverses``), its edges the other way, but for the ``undirected`` relations
    (which hold both directions already)."""
    src, dst = list(src), list(dst)
    if reverse:
        types, of = types.with_reverses(undirected)
        src, dst = src + [dst[r] for r in of], dst + [src[r] for r in of]
    relation = np.concatenate([np.full(len(s), r, np.int16) for r, s in enumerate(src)])
    return types, np.concatenate(src), np.concatenate(dst), relation


def hash_edges(src: np.ndarray, dst: np.ndarray):
    """The fingerprint's sha256 of the edge columns, which come first (:meth:`Graph.fingerprint` goes on from it)."""
    h = hashlib.sha256()
    for arr in (src, dst):
        h.update(np.ascontiguousarray(arr))
    return h


def degrees(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Global (in_degree, out_degree) of every node, int64; counted once per graph (two passes over the edges: seconds
    at products' scale)."""
    if graph.counted_degrees is None:
        n = graph.num_nodes
        graph.counted_degrees = (np.bincount(graph.dst, minlength=n).astype(np.int64),
                                 np.bincount(graph.src, minlength=n).astype(np.int64))
    return graph.counted_degrees


def sorted_unique(keys: np.ndarray, kind: str = "quicksort") -> np.ndarray:
    """``np.unique(keys)``, sorting ``keys`` in place (``kind``: numpy's sort; a stable sort of integers merges
    sorted runs in linear time). numpy >= 2.3's np.unique hashes instead of sorting, which on tens of millions of
    random edge keys is far slower and grows faster than linearly."""
    keys.sort(kind=kind)
    first = np.empty(keys.shape[0], dtype=bool)
    first[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return keys[first]


def undirected_keys(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    """The keys ``u * num_nodes + v`` (int64) of the undirected, loop-free, duplicate-free graph of the edges
    ``src -> dst``, both directions: sorted, that is by u, then v. Written into one array (not concatenated from
    temporaries, nor from copies without the self-loops)."""
    m = src.shape[0]
    keys = np.empty(2 * m, dtype=np.int64)
    loops = src == dst
    for half, u, v in ((keys[:m], src, dst), (keys[m:], dst, src)):
        np.multiply(u, num_nodes, out=half)
        half += v
        half[loops] = -1  # sorted first, and left once: dropped below
    keys = sorted_unique(keys)
    return keys[1:] if loops.any() else keys


def pair_keys(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    """The keys ``min(u, v) * num_nodes + max(u, v)`` (int64) of the undirected edges ``src -- dst``, once each:
    sorted, without self-loops or duplicates (``both_directions`` makes them the keys of ``undirected_keys``)."""
    keys = np.minimum(src, dst)
    keys *= num_nodes
    keys += np.maximum(src, dst)
    keys[src == dst] = -1  # sorted first, and left once: dropped below
    keys = sorted_unique(keys)
    return keys[1:] if keys.shape[0] and keys[0] < 0 else keys


def both_directions(pairs: np.ndarray, num_nodes: int) -> np.ndarray:
    """The sorted keys of both directions of the undirected edges ``pairs`` (``pair_keys``, sorted): the reversed
    half sorted alone, then the two sorted runs merged (a stable sort of integers merges runs in linear time)."""
    m = pairs.shape[0]
    keys = np.empty(2 * m, dtype=np.int64)
    keys[:m] = pairs
    np.multiply(pairs % num_nodes, num_nodes, out=keys[m:])
    keys[m:] += pairs // num_nodes
    keys[m:].sort()
    keys.sort(kind="stable")
    return keys


def merged_unique(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct values of the sorted arrays ``a`` and ``b``, by merging their runs (linear)."""
    return sorted_unique(np.concatenate([a, b]), kind="stable")


def edges_of_keys(keys: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of the keys ``src * num_nodes + dst``; src is written over ``keys`` (no longer usable)."""
    dst = keys % num_nodes
    return np.floor_divide(keys, num_nodes, out=keys), dst


def remove_self_loops(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    keep = src != dst
    return src[keep], dst[keep], int((~keep).sum())


def _feat_column(features: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(features.reshape(-1)), features.shape[1])


def _nodes_table(graph: Graph) -> pa.Table:
    """Labels and splits of every node; the features too where the graph is homogeneous."""
    feat = {} if graph.typed else {"feat": _feat_column(graph.features)}
    return pa.table({**feat, "label": graph.labels.astype(np.int64), **graph.masks})


def type_features_file(t: int) -> str:
    """The file of node type ``t``'s features in a typed canonical graph."""
    return f"features.{t}.arrow"


def _write_arrow(path: Path, table: pa.Table) -> None:
    """One record batch: every column one contiguous buffer in the file, which a reader maps in place."""
    with ipc.new_file(path, table.schema) as w:
        w.write_table(table.combine_chunks(), max_chunksize=max(table.num_rows, 1))


def save_graph(graph: Graph, directory: str | Path, source: str, inputs: tuple = ()) -> dict:
    """Validate and write ``graph`` to ``directory`` atomically; returns the metadata written. An existing
    ``directory`` is replaced only if it is an earlier canonical graph (``inputs``: what it was made from)."""
    directory = Path(directory)
    graph.validate(str(directory))
    meta = {
        "format_version": FORMAT_VERSION,
        "name": graph.name,
        "source": source,
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "num_features": int(graph.feature_widths[graph.types.target_index] or 0),
        "num_classes": int(graph.num_classes),
        "num_train": int(graph.train_mask.sum()),
        "num_val": int(graph.val_mask.sum()),
        "num_test": int(graph.test_mask.sum()),
        "fingerprint": graph.fingerprint(),
        **graph.info,
    }
    edges = {"src": np.asarray(graph.src, dtype=np.int64), "dst": np.asarray(graph.dst, dtype=np.int64)}
    if graph.typed:
        meta.update(types=graph.types.to_json(), type_counts=list(graph.node_counts),
                    feature_widths=list(graph.feature_widths))
        edges["relation"] = np.asarray(graph.relation, dtype=np.int16)
    with atomic_path(directory, directory=True, kind=CANONICAL_GRAPH, inputs=inputs) as tmp:
        _write_arrow(tmp / "nodes.arrow", _nodes_table(graph))
        _write_arrow(tmp / "edges.arrow", pa.table(edges))
        for t, f in enumerate(graph.type_features if graph.typed else ()):
            if f is not None:
                _write_arrow(tmp / type_features_file(t), pa.table({"feat": _feat_column(f)}))
        if graph.node_keys is not None:
            meta["node_keys_sha256"] = write_node_keys(tmp, graph.node_keys)
        if graph.link is not None:
            graph.link.validate(graph.num_nodes, f"{directory}: the edge split", len(graph.types.relations))
            meta.update(write_link_pairs(tmp, graph.link), link=graph.link.counts())
        meta = with_checksum(meta)  # a checksum of the rest: load_meta checks it
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def _read_arrow(path: Path, columns: dict[str, pa.DataType]) -> pa.Table:
    if not path.is_file():
        raise SylvieError(f"{path}: missing; rerun `sylvie download` for this dataset")
    try:
        table = ipc.open_file(pa.memory_map(str(path))).read_all()
        # the sizes of every buffer against the lengths the (possibly damaged) metadata gives, before numpy maps them
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError, UnicodeDecodeError) as e:
        raise SylvieError(f"{path}: not a readable Arrow file ({one_line(e)}); the file is damaged: rerun "
                          f"`sylvie download`") from e
    for name, typ in columns.items():
        if name not in table.column_names:
            raise SylvieError(f"{path}: column '{name}' is missing; rerun `sylvie download`")
        actual = table.schema.field(name).type
        if not (actual == typ or (pa.types.is_fixed_size_list(actual) and typ == "fixed_size_list<float32>"
                                  and actual.value_type == pa.float32())):
            raise SylvieError(f"{path}: column '{name}' has type {actual}, expected {typ}")
    return table


def _column(table: pa.Table, name: str) -> np.ndarray:
    """A column as one array (a fixed-size-list column flattened). A column of one chunk (what :func:`save_graph`
    writes) is the memory-mapped file itself, read-only: no copy, and no memory of its own (the pages are the
    file's, in the page cache, let go when the array is). One of several chunks (an older file) is copied into one
    array that numpy allocates: its memory goes back to the system when it is freed, where Arrow's allocator keeps
    what was freed for reuse, which METIS, run after the partition stage let the graph go, cannot use."""
    chunks = [c.flatten() if pa.types.is_fixed_size_list(c.type) else c for c in table.column(name).chunks]
    if not chunks:
        return table.column(name).to_numpy()
    if len(chunks) == 1:
        return as_numpy(chunks[0])
    return np.concatenate([as_numpy(c) for c in chunks])


_META_FIELDS = {"num_classes": int, "fingerprint": str}  # what reading a graph needs of meta.json, and its type


def load_meta(directory: str | Path) -> dict:
    """``meta.json`` of a canonical graph, checked to be one: another of our outputs given instead, or a meta.json
    edited by hand, is a clear error naming the file."""
    directory = Path(directory)
    path = directory / "meta.json"
    if not path.is_file():
        what = identify(directory) if directory.is_dir() else None
        if what:
            raise SylvieError(f"{directory}: is {what}, not a canonical graph; give the directory written by "
                              f"`sylvie download`")
        if directory.is_file():
            raise SylvieError(f"{directory}: is a file, not a canonical graph directory; give the directory written "
                              f"by `sylvie download`")
    meta = read_json(path, "dataset metadata")
    if not isinstance(meta, dict):
        raise SylvieError(f"{path}: not the metadata of a canonical graph (a JSON {type(meta).__name__}, not an "
                          f"object); rerun `sylvie download`")
    for key, typ in _META_FIELDS.items():
        if key not in meta:
            raise SylvieError(f"{path}: field '{key}' is missing; the file was edited or is not `sylvie download`'s: "
                              f"rerun `sylvie download`")
        if not isinstance(meta[key], typ) or isinstance(meta[key], bool):
            raise SylvieError(f"{path}: field '{key}' is {meta[key]!r}, not a{'n' if typ is int else ''} "
                              f"{typ.__name__}; the file was edited: rerun `sylvie download`")
    meta = checked(meta, path, "sylvie download", "rerun `sylvie download`", "a dataset's meta.json")
    version = meta.get("format_version", 1)  # written before the version was recorded: version 1
    if version != FORMAT_VERSION:
        raise SylvieError(f"{path}: format_version {version!r}, this sylvie reads {FORMAT_VERSION}; the graph was "
                          f"written by another version of sylvie: rerun `sylvie download` with this one")
    return meta


def load_graph(directory: str | Path, features: bool = True) -> Graph:
    """Read and validate a canonical graph written by :func:`save_graph`, checked against its fingerprint. Without
    ``features``: its structure, labels and splits only (a features matrix of no columns), not checked against the
    fingerprint, which needs every array: for a stage that needs the features later, if at all (the partition
    stage: METIS needs the edges only; :func:`read_features` reads them, :func:`check_fingerprint` checks). Its
    numeric arrays are read-only where the file holds them in one chunk (the file, mapped: ``_column``); copy one
    to change it."""
    directory = Path(directory)
    meta = load_meta(directory)
    types = _types(meta, directory)
    node_columns = {"label": pa.int64(), **{s: pa.bool_() for s in SPLITS}}
    feat = {} if types is not None else {"feat": "fixed_size_list<float32>"}
    nodes = _read_arrow(directory / "nodes.arrow", {**feat, **node_columns})
    src, dst = read_edges(directory)
    labels = _column(nodes, "label")
    typed = {}
    if types is not None:
        counts = tuple(int(c) for c in meta["type_counts"])
        typed = dict(types=types, type_counts=counts, relation=_relations(directory),
                     type_features=_type_features(directory, meta, counts) if features else (None,) * len(counts))
    homogeneous_features = features and types is None
    graph = Graph(
        name=meta.get("name", directory.name), src=src, dst=dst,
        features=(_column(nodes, "feat").reshape(-1, nodes.schema.field("feat").type.list_size)
                  if homogeneous_features else np.empty((labels.shape[0], 0), np.float32)),
        labels=labels,
        **{f"{s}_mask": _column(nodes, s) for s in SPLITS},
        num_classes=int(meta["num_classes"]), info=meta, **typed,
    )
    if "link_pairs_sha256" in meta:
        graph.link = read_link_pairs(directory, graph.num_nodes, meta, len(graph.types.relations))
    if features:  # first: a change anywhere in the files is named as such
        check_fingerprint(graph, directory)
    with _written_by_download(directory):
        graph.validate(str(directory))
    return graph


def _types(meta: dict, directory: Path) -> GraphTypes | None:
    """A typed graph's types from its meta.json (None: a homogeneous graph)."""
    if "types" not in meta:
        return None
    where = str(directory / "meta.json")
    types = GraphTypes.from_json(meta["types"], where)
    for key in ("type_counts", "feature_widths"):
        value = meta.get(key)
        if not isinstance(value, list) or len(value) != len(types.node_types):
            raise SylvieError(f"{where}: field '{key}' must list a value per node type; the file was edited: rerun "
                              f"`sylvie download`")
    return types


def _relations(directory: Path) -> np.ndarray:
    table = _read_arrow(directory / "edges.arrow", {"relation": pa.int16()})
    return _column(table, "relation")


def _type_features(directory: Path, meta: dict, counts: tuple[int, ...]) -> tuple[np.ndarray | None, ...]:
    out = []
    for t, width in enumerate(meta["feature_widths"]):
        if width is None:
            out.append(None)
            continue
        table = _read_arrow(directory / type_features_file(t), {"feat": "fixed_size_list<float32>"})
        out.append(_column(table, "feat").reshape(-1, table.schema.field("feat").type.list_size))
    return tuple(out)


@contextlib.contextmanager
def _written_by_download(directory: Path):
    """A graph read back that fails the checks ``sylvie download`` made before writing it: its files changed since."""
    try:
        yield
    except SylvieError as e:
        raise SylvieError(f"{e}; nodes.arrow or edges.arrow was changed or damaged after `sylvie download` checked and "
                          f"wrote it: rerun `sylvie download`") from None


def read_edges(directory: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of the canonical graph in ``directory``: their type checked, their range not (:func:`load_graph`
    validates it); read-only views of the mapped file where it holds them in one chunk (``_column``)."""
    table = _read_arrow(Path(directory) / "edges.arrow", {"src": pa.int64(), "dst": pa.int64()})
    return _column(table, "src"), _column(table, "dst")


def read_features(structure: Graph, directory: str | Path) -> np.ndarray:
    """The features of the graph that ``structure`` was read from (by ``load_graph(directory, features=False)``),
    read now and validated (float32, a row a node, finite); not checked against the fingerprint
    (:func:`check_fingerprint` does, over every array). A meta.json that changed since ``structure`` was read (the
    dataset was replaced) is an error."""
    directory = Path(directory)
    check_unchanged(structure, directory)
    if structure.typed:
        raise SylvieError(f"{directory}: a typed graph's features are per node type (features.<t>.arrow); "
                          f"load_graph reads them")
    nodes = _read_arrow(directory / "nodes.arrow", {"feat": "fixed_size_list<float32>"})
    features = _column(nodes, "feat").reshape(-1, nodes.schema.field("feat").type.list_size)
    with _written_by_download(directory):
        check_features(features, structure.num_nodes, str(directory / "nodes.arrow"))
    return features


def check_unchanged(structure: Graph, directory: str | Path) -> None:
    """That ``directory`` holds the dataset ``structure`` was read from (its meta.json's fingerprint is the same),
    not one written there since (a dataset is replaced whole, with its meta.json); else a SylvieError."""
    if load_meta(Path(directory)).get("fingerprint") != structure.info.get("fingerprint"):
        raise SylvieError(f"{directory}: the dataset was replaced while it was being read; rerun the command")


def check_fingerprint(graph: Graph, directory: str | Path, edges_hash=None) -> None:
    """That ``graph``, read from ``directory``, is what ``sylvie download`` wrote there (its meta.json's fingerprint);
    else a SylvieError naming the directory. ``edges_hash``: as for :meth:`Graph.fingerprint`."""
    if graph.fingerprint(edges_hash) != graph.info.get("fingerprint"):
        files = "nodes.arrow, edges.arrow and features.<t>.arrow" if graph.typed else "nodes.arrow and edges.arrow"
        raise SylvieError(f"{directory}: the content of {files} does not match the fingerprint in meta.json; the "
                          f"files were changed after download; rerun `sylvie download`")
