"""``source: synthetic``: the graph a dataset section describes, made by one of the generators: the block model
(``synthetic``), nested communities (``nested_communities``, which builds on the block model's parts), the typed
citation graphs shaped like ogbn-mag (``mag_like``) and IGBH-small (``igbh_like``), which share ``typed_synthetic``,
or the link-prediction citation graph shaped like ogbl-citation2 (``citation_like``). The one module that knows them
all, so that none imports another back."""
from __future__ import annotations

from sylvie.data.citation_like import generate_citation
from sylvie.data.graph import Graph
from sylvie.data.igbh_like import generate_igbh
from sylvie.data.mag_like import generate_mag
from sylvie.data.nested_communities import PARAMETERS as NESTED
from sylvie.data.nested_communities import generate_nested
from sylvie.data.synthetic import PARAMETERS, generate
from sylvie.errors import SylvieError


def generate_from(options, name: str = "synthetic") -> Graph:
    """The graph the dataset section ``options`` (typed, ``sylvie.config.section("dataset", ...)``) describes: a
    block model, (``structure: nested``) nested communities (``sylvie.data.nested_communities``), or (``structure:
    mag``, ``igbh``) a typed graph shaped like ogbn-mag or IGBH-small, or (``structure: citation``) a citation graph
    with its edge split (``sylvie.data.citation_like``)."""
    if options.structure == "citation":
        if options.edge_split:
            raise SylvieError(f"dataset {name}: structure citation holds out each evaluated paper's latest references "
                              f"itself (val_fraction); remove edge_split")
        return generate_citation(name=name, **{k: getattr(options, k) for k in (
            "nodes", "avg_degree", "features", "classes", "homophily", "feature_noise", "degree_sigma", "val_fraction",
            "eval_negatives", "seed")})
    common = {k: getattr(options, k) for k in PARAMETERS}
    if options.structure in ("mag", "igbh"):
        del common["avg_degree"]  # each relation's degree is the real graph's
        typed = generate_mag if options.structure == "mag" else generate_igbh
        return typed(name=name, **common, degree_sigma=options.degree_sigma,
                     reverse_relations=options.reverse_relations, relation_homophily=options.relation_homophily)
    if options.structure == "nested":
        return generate_nested(name=name, **common, **{k: getattr(options, k) for k in NESTED})
    if options.split != "random":
        raise SylvieError(f"dataset {name}: split {options.split} needs structure: nested (the block model's split "
                          f"is random); set structure: nested or split: random")
    return generate(name=name, **common)
