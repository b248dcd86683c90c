"""Which loader turns which dataset name into a canonical graph."""
from __future__ import annotations

from pathlib import Path

from sylvie.data import ogb, planetoid, synthetic
from sylvie.data.graph import Graph, save_graph
from sylvie.errors import SylvieError
from sylvie.output_dir import CANONICAL_GRAPH, check_replaceable

SOURCES = ("planetoid", "ogb", "synthetic")


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
    known = ", ".join(planetoid.NAMES + ogb.NAMES + ("synthetic",))
    raise SylvieError(f"unknown dataset '{name}'; known datasets: {known} (or give source: synthetic)")


def load(name: str, options) -> Graph:
    """Build the canonical graph of dataset ``name`` from its (typed) config options."""
    source = source_of(name, options.source)
    if source == "planetoid":
        return planetoid.load_planetoid(name, options.raw_dir, allow_download=options.allow_download,
                                        timeout_s=options.timeout)
    if source == "ogb":
        return ogb.load_ogb(name, options.root, mirror=options.mirror, timeout_s=options.timeout)
    return synthetic.generate_from(options, name)


def raw_inputs(name: str, options) -> tuple[str, ...]:
    """The folders a dataset is read from (never an output location)."""
    source = source_of(name, options.source)
    return {"planetoid": (options.raw_dir,), "ogb": (options.root,)}.get(source, ())


def download(name: str, out_dir: str | Path, options) -> dict:
    """Load dataset ``name`` and write it in canonical form to ``out_dir``; returns its metadata."""
    inputs = raw_inputs(name, options)
    check_replaceable(out_dir, CANONICAL_GRAPH, inputs)  # before any download or work
    graph = load(name, options)
    return save_graph(graph, out_dir, source=source_of(name, options.source), inputs=inputs)
