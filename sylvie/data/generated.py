"""``source: synthetic``: the graph a dataset section describes, made by one of the generators: the block model
(``synthetic``), nested communities (``nested_communities``, which builds on the block model's parts) or the typed
citation graph shaped like ogbn-mag (``mag_like``). The one module that knows them all, so that none imports another
back."""
from __future__ import annotations

from sylvie.data.graph import Graph
from sylvie.data.mag_like import generate_mag
from sylvie.data.nested_communities import PARAMETERS as NESTED
from sylvie.data.nested_communities import generate_nested
from sylvie.data.synthetic import PARAMETERS, generate
from sylvie.errors import SylvieError


def generate_from(options, name: str = "synthetic") -> Graph:
    """The graph the dataset section ``options`` (typed, ``sylvie.config.section("dataset", ...)``) describes: a
    block model, or (``structure: nested``) nested communities (``sylvie.data.nested_communities``)."""
    common = {k: getattr(options, k) for k in PARAMETERS}
    if options.structure == "mag":
        del common["avg_degree"]  # each relation's degree is ogbn-mag's
        return generate_mag(name=name, **common, degree_sigma=options.degree_sigma,
                            reverse_relations=options.reverse_relations)
    if options.structure == "nested":
        return generate_nested(name=name, **common, **{k: getattr(options, k) for k in NESTED})
    if options.split != "random":
        raise SylvieError(f"dataset {name}: split {options.split} needs structure: nested (the block model's split "
                          f"is random); set structure: nested or split: random")
    return generate(name=name, **common)
