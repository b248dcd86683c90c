"""What a typed graph is made of: node types, relations ``(source type, name, destination type)`` and the target
type that carries labels and splits. A homogeneous graph is one type and one relation (``HOMOGENEOUS``), so every
stage has one path for both. Node ids of all types share one id space in type-contiguous ranges.
"""
from __future__ import annotations

from dataclasses import dataclass

from sylvie.errors import SylvieError

REVERSE_PREFIX = "rev-"  # the name of a relation's reverse: rev-<name>, as DGL's and GraphStorm's recipes name it


@dataclass(frozen=True)
class Relation:
    """Edges ``src`` -> ``dst`` of one kind: a paper (``src``) ``cites`` a paper, an author ``writes`` a paper."""

    src: str
    name: str
    dst: str

    def reverse(self) -> Relation:
        return Relation(self.dst, REVERSE_PREFIX + self.name, self.src)

    def reverse_of(self) -> Relation:
        """The relation this one is the reverse of (``reverse``'s inverse)."""
        if not self.name.startswith(REVERSE_PREFIX):
            raise ValueError(f"{self} is not a reverse relation")
        return Relation(self.dst, self.name[len(REVERSE_PREFIX):], self.src)

    def __str__(self) -> str:
        return f"({self.src}, {self.name}, {self.dst})"


@dataclass(frozen=True)
class GraphTypes:
    """The node types (in id order), the relations (in edge-type order) and the target node type."""

    node_types: tuple[str, ...]
    relations: tuple[Relation, ...]
    target: str

    def __post_init__(self):
        object.__setattr__(self, "node_types", tuple(self.node_types))
        object.__setattr__(self, "relations", tuple(self.relations))

    def check(self, where: str) -> None:
        """A SylvieError naming ``where`` for an empty or repeated type, a relation naming an unknown node type, a
        repeated relation, or a target that is not a node type."""
        if not self.node_types:
            raise SylvieError(f"{where}: a graph needs at least one node type")
        if len(set(self.node_types)) != len(self.node_types):
            raise SylvieError(f"{where}: node types {list(self.node_types)} repeat a name; give each type once")
        if not self.relations:
            raise SylvieError(f"{where}: a graph needs at least one relation")
        known = set(self.node_types)
        for r in self.relations:
            for end in (r.src, r.dst):
                if end not in known:
                    raise SylvieError(f"{where}: relation {r} names node type {end!r}, which is not one of "
                                      f"{sorted(known)}; add a node table for it or fix the relation")
        if len(set(self.relations)) != len(self.relations):
            raise SylvieError(f"{where}: a relation is given twice; give each (source, name, destination) once")
        if self.target not in known:
            raise SylvieError(f"{where}: target node type {self.target!r} is not one of {sorted(known)}; name the "
                              f"type that carries the labels")

    @property
    def homogeneous(self) -> bool:
        return len(self.node_types) == 1 and len(self.relations) == 1

    def type_index(self, name: str) -> int:
        return self.node_types.index(name)

    @property
    def target_index(self) -> int:
        return self.type_index(self.target)

    def ends(self, r: int) -> tuple[int, int]:
        """(source type index, destination type index) of relation ``r``."""
        rel = self.relations[r]
        return self.type_index(rel.src), self.type_index(rel.dst)

    def reverse_index(self) -> list[int]:
        """For each relation, the index of its reverse among the relations (``Relation.reverse``, or the relation
        a ``rev-`` one reverses), or -1 where the graph has none; a homogeneous graph's one relation is its own (an
        undirected graph holds both directions of every edge in it)."""
        if self.homogeneous:
            return [0]
        index = {r: i for i, r in enumerate(self.relations)}
        out = []
        for r in self.relations:
            partner = r.reverse()
            if partner not in index and r.name.startswith(REVERSE_PREFIX):
                partner = r.reverse_of()
            out.append(index.get(partner, -1))
        return out

    def with_reverses(self, undirected: frozenset[int] = frozenset()) -> tuple[GraphTypes, list[int]]:
        """These types with each relation's reverse (``Relation.reverse``) added after the relations, except where
        the graph has it already or the relation is ``undirected`` (indices: relations within one node type that
        carry both directions themselves); and for each added relation, the index of the relation it reverses."""
        have = set(self.relations)
        added, of = [], []
        for i, r in enumerate(self.relations):
            if i in undirected:
                continue
            if r.name.startswith(REVERSE_PREFIX) and r.reverse_of() in have:  # the reverse of one given
                continue
            rev = r.reverse()
            if rev not in have:
                added.append(rev)
                of.append(i)
                have.add(rev)
        return GraphTypes(self.node_types, self.relations + tuple(added), self.target), of

    def to_json(self) -> dict:
        return {"node_types": list(self.node_types), "relations": [[r.src, r.name, r.dst] for r in self.relations],
                "target": self.target}

    @staticmethod
    def from_json(record: dict, where: str) -> GraphTypes:
        try:
            types = GraphTypes(tuple(record["node_types"]), tuple(Relation(*r) for r in record["relations"]),
                               record["target"])
        except (KeyError, TypeError) as e:
            raise SylvieError(f"{where}: the graph's types are malformed ({e}); write the file again") from e
        types.check(where)
        return types


HOMOGENEOUS = GraphTypes(("node",), (Relation("node", "edge", "node"),), "node")
