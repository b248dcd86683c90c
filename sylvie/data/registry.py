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


def load(name: str, options: dict) -> Graph:
    """Build the canonical graph of dataset ``name`` from its config options."""
    source = source_of(name, options.get("source"))
    if source == "planetoid":
        return planetoid.load_planetoid(options.get("dataset_name", name), options.get("raw_dir", "data/raw/planetoid"),
                                        allow_download=options.get("allow_download", True),
                                        timeout_s=options.get("timeout", 60))
    if source == "ogb":
        return ogb.load_ogb(options.get("dataset_name", name), options.get("root", "data/raw/ogb"),
                            mirror=options.get("mirror"), timeout_s=options.get("timeout", 60))
    params = {k: options.get(k, v) for k, v in synthetic.DEFAULTS.items()}
    return synthetic.generate(name=name, **params)


def raw_inputs(name: str, options: dict) -> tuple[str, ...]:
    """The folders a dataset is read from (never an output location)."""
    source = source_of(name, options.get("source"))
    if source == "planetoid":
        return (options.get("raw_dir", "data/raw/planetoid"),)
    if source == "ogb":
        return (options.get("root", "data/raw/ogb"),)
    return ()


def download(name: str, out_dir: str | Path, options: dict) -> dict:
    """Load dataset ``name`` and write it in canonical form to ``out_dir``; returns its metadata."""
    inputs = raw_inputs(name, options)
    check_replaceable(out_dir, CANONICAL_GRAPH, inputs)  # before any download or work
    graph = load(name, options)
    return save_graph(graph, out_dir, source=source_of(name, options.get("source")), inputs=inputs)
