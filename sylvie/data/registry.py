"""Which loader turns which dataset name into a canonical graph."""
from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from sylvie.data import files_source, generated, ogb, ogb_link, planetoid
from sylvie.data.graph import Graph, load_meta, save_graph
from sylvie.data.input_files import check_entry, listed
from sylvie.data.link_split import check_shares, has_edge_split, target_relation, with_edge_split
from sylvie.errors import SylvieError
from sylvie.output_dir import CANONICAL_GRAPH, check_replaceable

log = logging.getLogger(__name__)
SOURCES = ("planetoid", "ogb", "synthetic", "files", "dgl")
# what a source needs set, besides itself
_REQUIRED = {"files": ("edges", "node_table"), "dgl": ("graph_file",)}


def source_of(name: str, source: str | None = None) -> str:
    """The loader family for ``name``: given explicitly, or inferred from a known name."""
    if source:
        if source not in SOURCES:
            raise SylvieError(f"dataset '{name}': unknown source '{source}'; choose one of {', '.join(SOURCES)}")
        return source
    if name in planetoid.NAMES:
        return "planetoid"
    if name in ogb.NAMES:
        return "ogb"
    if name == "synthetic" or name.startswith("synthetic"):
        return "synthetic"
    known = planetoid.NAMES + ogb.NAMES + ("synthetic",)
    raise SylvieError(f"unknown dataset '{name}'; {_did_you_mean(name, known)}known datasets: {', '.join(known)} "
                      f"(names are case-sensitive; any other name needs a source: {', '.join(SOURCES)})")


def published_name(key: str, options) -> str:
    """The name a dataset is read by: its ``name`` (Planetoid's, OGB's), or its key under ``datasets``."""
    return getattr(options, "name", None) or key


def _did_you_mean(name: str, names) -> str:
    """The hint for a known name that differs from ``name`` only in case (names are case-sensitive)."""
    close = [n for n in names if n.lower() == name.lower()]
    return f"did you mean '{close[0]}'? " if close else ""


def check_dataset(name: str, options) -> str:
    """The source of dataset ``name`` if a loader can build it from ``options``, else a SylvieError saying what to
    write (checked when a config is loaded, before any work)."""
    name = published_name(name, options)
    source = source_of(name, options.source)
    names = {"planetoid": planetoid.NAMES, "ogb": ogb.NAMES}.get(source)
    if names is not None and name not in names:
        raise SylvieError(f"dataset '{name}': source {source} has no dataset of that name; "
                          f"{_did_you_mean(name, names)}it has "
                          f"{', '.join(names)} (names are case-sensitive)")
    typed = source == "files" and (options.node_tables or options.relations or options.target)
    files_types = None
    if typed:
        missing = [k for k in ("node_tables", "relations", "target") if not getattr(options, k)]
        if missing:
            raise SylvieError(f"dataset '{name}': a typed graph from files needs node_tables, relations and target; "
                              f"{' and '.join(missing)} missing; see docs/datasets.md")
        if options.node_table or options.edges:
            raise SylvieError(f"dataset '{name}': give node_tables and relations (a typed graph) or node_table and "
                              f"edges (one node type), not both")
        if options.unknown_nodes == "add" or options.features_file:
            raise SylvieError(f"dataset '{name}': unknown_nodes add and features_file are for one node type; a typed "
                              f"graph's every node is in its type's table, its features in its columns")
        from sylvie.data.typed_files import typed_types
        files_types = typed_types(name, options)
    missing = [] if typed else [k for k in _REQUIRED.get(source, ()) if not getattr(options, k)]
    if missing:
        raise SylvieError(f"dataset '{name}': source {source} needs {' and '.join(missing)} (the file or folder to "
                          f"read); see docs/datasets.md")
    if source == "files" and options.split_column and options.mask_columns:
        raise SylvieError(f"dataset '{name}': give the split once: split_column or mask_columns, not both")
    _check_edge_split(name, source, options, _known_types(source, options, files_types))
    _warn_unused(name, source, options)
    return source


def _known_types(source: str, options, files_types):
    """The types of the graph a dataset's options make, where they tell them before it is made: a typed graph's
    (``GraphTypes``: a preset's or the files' relations, ``files_types``, with their reverses where
    ``reverse_relations`` adds them), None for a graph of one node type, False where they do not tell."""
    from sylvie.graph_types import GraphTypes

    if files_types is not None:
        types = files_types
    elif source == "synthetic" and options.structure in ("mag", "igbh"):
        from sylvie.data.igbh_like import IGBH_EDGES
        from sylvie.data.mag_like import MAG_EDGES
        relations = tuple(MAG_EDGES if options.structure == "mag" else IGBH_EDGES)
        ends = tuple(dict.fromkeys(t for r in relations for t in (r.src, r.dst)))
        types = GraphTypes(ends, relations, ends[0])
    elif source in ("planetoid", "synthetic", "files", "dgl"):  # one node type (dgl refuses a typed graph)
        return None
    else:
        return False
    if files_types is not None:  # one node type and one relation after the reverses: the graph of one type it is
        from sylvie.data.typed_files import undirected_relations
        if options.reverse_relations:
            types = types.with_reverses(undirected_relations(options))[0]
        return None if types.homogeneous else types
    return types.with_reverses()[0] if options.reverse_relations else types


def _check_edge_split(name: str, source: str, options, types) -> None:
    """The edge-split knobs of link prediction, together: one way of giving the split, val_edges with test_edges,
    a negatives column only beside the pairs' files, shares that leave edges to train on; on a typed graph
    (``types``: ``_known_types``) a drawn split of the relation edge_split_relation names, on a graph of one node type
    none named."""
    ways = [k for k, on in (("edge_split", options.edge_split), ("edge_split_column", options.edge_split_column),
                            ("val_edges and test_edges", options.val_edges or options.test_edges)) if on]
    if source == "files" and len(ways) > 1:
        raise SylvieError(f"dataset '{name}': give the edge split once: {' or '.join(ways)}, not both")
    if source == "files" and bool(options.val_edges) != bool(options.test_edges):
        given, missing = ("val_edges", "test_edges") if options.val_edges else ("test_edges", "val_edges")
        raise SylvieError(f"dataset '{name}': {given} without {missing}: the validation and the test pairs come "
                          f"together; give both (edges then holds the training edges)")
    if source == "files" and options.negatives_column and not (options.edge_split_column or options.val_edges):
        raise SylvieError(f"dataset '{name}': negatives_column is a column of the validation and test pairs' file: "
                          f"give it with edge_split_column or val_edges and test_edges (a random edge_split draws "
                          f"eval_negatives instead)")
    if options.edge_split and _reads(source, "edge_split"):
        check_shares(options.edge_split, f"dataset '{name}'")
    if not _reads(source, "edge_split_relation"):
        return
    if options.edge_split_relation and not options.edge_split:
        raise SylvieError(f"dataset '{name}': edge_split_relation names the relation whose edges a random edge_split "
                          f"splits; give edge_split too (e.g. [0.05, 0.1]), or remove edge_split_relation")
    if types and has_edge_split(options) and not options.edge_split:
        raise SylvieError(f"dataset '{name}': a typed graph's edge split is drawn (edge_split with "
                          f"edge_split_relation), not read from files: remove edge_split_column, val_edges and "
                          f"test_edges, and give edge_split and edge_split_relation")
    if types and options.edge_split and not options.edge_split_relation:
        raise SylvieError(f"dataset '{name}': edge_split on a typed graph needs edge_split_relation, the relation "
                          f"whose edges are split and predicted (one of "
                          f"{', '.join(r.name for r in types.relations)})")
    if types and options.edge_split_relation:
        target_relation(types, options.edge_split_relation, f"dataset '{name}'")
    if types is None and options.edge_split_relation:
        raise SylvieError(f"dataset '{name}': edge_split_relation {options.edge_split_relation!r}: the graph has one "
                          f"node type and one relation, whose edges edge_split splits; remove edge_split_relation")


def _warn_unused(name: str, source: str, options) -> None:
    """A warning line naming the settings of ``options`` away from their default that ``source`` does not read
    (the schema's ``sources`` beside each knob): a split column given to Planetoid's Cora, a seed to an OGB dataset."""
    from sylvie.config import properties, section

    defaults = vars(section("dataset"))
    unused = [k for k, spec in properties("dataset").items()
              if source not in spec.get("sources", (source,)) and getattr(options, k) != defaults[k]]
    if unused:
        said = ", ".join(f"{k} (read by {', '.join(properties('dataset')[k]['sources'])})" for k in unused)
        log.warning(f"dataset '{name}': source {source} does not read {said}: ignored; remove "
                    f"{'them' if len(unused) > 1 else 'it'}, or give the source that reads "
                    f"{'them' if len(unused) > 1 else 'it'}")


def check_datasets(config: dict, where: str = "config") -> None:
    """Every dataset of ``config`` is one a loader can build, and every file or folder a run's dataset is read from
    is there: raised when the config is loaded, naming the key, so that no error is left for Snakemake to raise (or
    swallow) while it plans the jobs. A dataset already downloaded is no exception: its download stage reruns when
    its inputs change, and inputs gone would leave it the graph of files no longer given (Snakemake plans nothing
    for an output whose inputs are missing)."""
    from sylvie.config import dataset_options, resolve_runs

    used = {run.dataset for run in resolve_runs(config, where).values()}
    for name in config.get("datasets") or {}:
        try:
            options = dataset_options(config, name)
            check_dataset(name, options)
            if name in used:
                check_inputs(name, options)
        except SylvieError as e:
            raise SylvieError(f"{where}: datasets.{name}: {e}") from None


def check_inputs(name: str, options) -> None:
    """Every file or folder a dataset of the user's own is read from is there to read, by the check its reader makes
    (``input_files.check_entry``, of a folder's every entry ``listed``), and a folder has a file to read; else a
    SylvieError naming the key and the path."""
    for key, path in given_inputs(name, options).items():
        p = Path(path)
        try:
            if not p.is_dir():
                check_entry(p, "")  # missing, a link to nothing or to itself, not a regular file, unreadable
            elif not listed(p):
                raise SylvieError(f"the folder {path} holds no file to read; put the files back, or point {key} at "
                                  f"where they are now")
        except SylvieError as e:
            raise SylvieError(f"{key}: {e}") from None


def load(name: str, options) -> Graph:
    """Build the canonical graph of dataset ``name`` from its (typed) config options, with the edge split they ask
    for (link prediction: ``link_split.with_edge_split``, where every source's graph passes)."""
    name = published_name(name, options)
    graph = _load(name, options)
    return with_edge_split(graph, options, name) if _reads(source_of(name, options.source), "edge_split") else graph


def _reads(source: str, knob: str) -> bool:
    """Whether ``source`` reads the dataset knob ``knob`` (the schema's ``sources`` beside it)."""
    from sylvie.config import properties

    return source in properties("dataset")[knob].get("sources", (source,))


def _load(name: str, options) -> Graph:
    source = source_of(name, options.source)
    if source == "planetoid":
        return planetoid.load_planetoid(name, options.raw_dir, allow_download=options.allow_download,
                                        timeout_s=options.timeout)
    if source == "ogb" and name in ogb.LINK_NAMES:
        return ogb_link.load_ogb_link(name, options.root, mirror=options.mirror, timeout_s=options.timeout)
    if source == "ogb":
        return ogb.load_ogb(name, options.root, mirror=options.mirror, timeout_s=options.timeout,
                            reverse_relations=options.reverse_relations)
    if source == "files":
        return files_source.load_files(name, options)
    if source == "dgl":
        from sylvie.data.dgl_file import load_dgl_file  # DGL only where a dataset is read with it

        return load_dgl_file(name, options)
    return generated.generate_from(options, name)


# Published node counts (Planetoid: Yang et al. 2016; OGB: Hu et al. 2020), known before anything is downloaded.
NUM_NODES = {"cora": 2_708, "citeseer": 3_327, "pubmed": 19_717, "ogbn-arxiv": 169_343, "ogbn-products": 2_449_029,
             "ogbn-papers100M": 111_059_956, "ogbn-mag": 1_939_743, "ogbl-citation2": 2_927_963,
             "ogbl-collab": 235_868}


def num_nodes_before_download(name: str, options, dataset_dir: str | Path | None = None) -> int:
    """How many nodes dataset ``name`` will have: its published size, or the synthetic generator's setting (the
    pipeline decides from it how to evaluate before the dataset exists). A graph of the user's own: the node count
    of its canonical graph in ``dataset_dir`` where one is there, else its input counted, once a process (for
    ``source: dgl``, with DGL)."""
    name = published_name(name, options)
    source = source_of(name, options.source)
    if source == "synthetic":
        return int(options.nodes)
    if source in ("files", "dgl"):
        meta = Path(dataset_dir or "", "meta.json")
        if dataset_dir is not None and meta.is_file():
            with contextlib.suppress(SylvieError, KeyError, TypeError, ValueError):
                return int(load_meta(dataset_dir)["num_nodes"])
        paths = given_files(name, options)
        for p in paths:  # a folder's files were checked as it was listed
            check_entry(Path(p), f"dataset '{name}'")
        key = (source, tuple((p, os.stat(p).st_mtime_ns) for p in paths))
        if key not in _COUNTED:  # once a process: Snakemake asks for every evaluate job
            _COUNTED[key] = files_source.count_nodes(options) if source == "files" else _dgl_count(options)
        return _COUNTED[key]
    if name not in NUM_NODES:
        raise SylvieError(f"dataset '{name}': its node count is not known before download; set evaluate.mode to "
                          f"whole or partitioned for its runs instead of auto")
    return NUM_NODES[name]


_COUNTED: dict = {}  # (source, its input files with their change times) -> nodes


def _dgl_count(options) -> int:
    from sylvie.data.dgl_file import count_nodes

    return count_nodes(options)


def raw_inputs(name: str, options) -> tuple[str, ...]:
    """The folders a dataset is read from (never an output location)."""
    source = source_of(published_name(name, options), options.source)
    return {"planetoid": (options.raw_dir,), "ogb": (options.root,)}.get(source) or \
        tuple(given_inputs(name, options).values())


def given_inputs(name: str, options) -> dict[str, str]:
    """The files and folders a dataset of the user's own (files, dgl) is read from, by the key that gives each
    (``edges``, ``node_tables.paper``, ``relations[0].edges``, ``graph_file``); none for the sources that download or
    generate."""
    source = source_of(name, options.source)
    if source == "dgl":
        return {"graph_file": options.graph_file} if options.graph_file else {}
    return files_source.input_paths(options) if source == "files" else {}


def given_files(name: str, options) -> tuple[str, ...]:
    """The files a dataset of the user's own (files, dgl) is made from, a folder's files each (Snakemake would see
    only the folder's own time): they must exist before its download stage runs, and rerun it when they change
    (``check_inputs`` refuses a plan where they are gone); none for the sources that download or generate."""
    out = []
    for key, p in given_inputs(name, options).items():
        out += [str(f) for f in listed(Path(p), key) if f.is_file()] if Path(p).is_dir() else [p]
    return tuple(out)


def download(name: str, out_dir: str | Path, options) -> dict:
    """Load dataset ``name`` and write it in canonical form to ``out_dir``; returns its metadata."""
    check_dataset(name, options)  # the combinations the config refuses, refused on the command line alike
    inputs = raw_inputs(name, options)
    check_replaceable(out_dir, CANONICAL_GRAPH, inputs)  # before any download or work
    graph = load(name, options)
    return save_graph(graph, out_dir, source=source_of(published_name(name, options), options.source), inputs=inputs)
