"""The config's ``sampling.fanouts`` resolved against a graph's relations: for every hop, a fanout per relation.

Each entry (DGL's order, input layer first) is a number for every relation, or a map naming every relation (by name
where unique, else ``src:name:dst``), as DGL's ``NeighborSampler`` takes it. A homogeneous graph has one relation.
"""
from __future__ import annotations

from collections.abc import Sequence

from sylvie.errors import SylvieError
from sylvie.graph_types import GraphTypes


def relation_label(types: GraphTypes, r: int) -> str:
    """How a fanout map names relation ``r``: its name if unique, else ``src:name:dst``."""
    rel = types.relations[r]
    if sum(x.name == rel.name for x in types.relations) == 1:
        return rel.name
    return f"{rel.src}:{rel.name}:{rel.dst}"


def _relation_index(types: GraphTypes) -> dict[str, int]:
    index = {}
    for r, rel in enumerate(types.relations):
        index[f"{rel.src}:{rel.name}:{rel.dst}"] = r
        index[relation_label(types, r)] = r
    return index


def resolve_fanouts(fanouts: Sequence, types: GraphTypes, key: str = "sampling.fanouts") -> list[tuple[int, ...]]:
    """Per hop in the config's order, the fanout of each relation (in ``types.relations``' order); a SylvieError
    naming ``key[i]`` for a map that names an unknown relation or leaves one out, or a fanout below 1."""
    index = _relation_index(types)
    labels = [relation_label(types, r) for r in range(len(types.relations))]
    out = []
    for i, entry in enumerate(fanouts):
        where = f"{key}[{i}]"
        if isinstance(entry, dict):
            unknown = [k for k in entry if k not in index]
            if unknown:
                raise SylvieError(f"{where} names relation {unknown[0]!r}, which the graph does not have; its "
                                  f"relations are {', '.join(labels)}")
            per = [None] * len(labels)
            for k, n in entry.items():
                per[index[k]] = n
            missing = [labels[r] for r, n in enumerate(per) if n is None]
            if missing:
                raise SylvieError(f"{where} gives no fanout for relation {missing[0]!r}" +
                                  (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "") +
                                  "; a map names every relation (or give one number for all of them)")
        else:
            per = [entry] * len(labels)
        for r, n in enumerate(per):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise SylvieError(f"{where}: relation {labels[r]!r}'s fanout must be a whole number of at least 1, "
                                  f"got {n!r}")
        out.append(tuple(int(n) for n in per))
    return out

