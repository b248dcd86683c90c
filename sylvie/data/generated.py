"""``source: synthetic``: the graph a dataset section describes, made by one of the two generators: the block model
(``synthetic``) or nested communities (``nested_communities``, which builds on the block model's parts). The one
module that knows both, so that neither imports the other back."""
from __future__ import annotations

from sylvie.data.graph import Graph
from sylvie.data.nested_communities import PARAMETERS as NESTED
from sylvie.data.nested_communities import generate_nested
from sylvie.data.synthetic import PARAMETERS, generate
from sylvie.errors import SylvieError


def generate_from(options, name: str = "synthetic") -> Graph:
    """The graph the dataset section ``options`` (typed, ``sylvie.config.section("dataset", ...)``) describes: a
    block model, or (``structure: nested``) nested communities (``sylvie.data.nested_communities``)."""
    common = {k: getattr(options, k) for k in PARAMETERS}
    if options.structure == "nested":
        return generate_nested(name=name, **common, **{k: getattr(options, k) for k in NESTED})
    if options.split != "random":
        raise SylvieError(f"dataset {name}: split {options.split} needs structure: nested (the block model's split "
                          f"is random); set structure: nested or split: random")
    return generate(name=name, **common)
