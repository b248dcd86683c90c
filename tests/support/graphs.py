"""The small typed graph the tests share, and typed graphs as a user gives them.

``SMALL_MAG``: the mag preset's knobs for the tests' one typed graph (conftest's session fixtures ``small_mag``,
``small_mag_dir``, ``small_mag_partitions``; ``small_mag_one_way``): four node types (papers with features;
authors, institutions and fields learnt as embeddings), four relations and their reverses. A test whose assertion
depends on its graph's size or shape keeps a graph of its own and says why.
"""
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

# papers 12 features wide, the width of the embedding tables of tests/test_typed_exactness.py's models (R-GCN with
# bases takes one input width for every relation's source type)
SMALL_MAG = {"preset": "mag", "nodes": 2_000, "classes": 6, "features": 12}
# the papers' width write_files writes (and tests/test_typed_files.py's refusals name)
ONE_WAY_FEATURES = 6
SPLIT_NAMES = np.array(["train", "val", "test", ""])


class LazyPartitions(dict):
    """{parts: the folder of the graph at ``graph_dir`` cut by METIS into that many parts}, each cut the first time
    it is asked for (in-process)."""

    def __init__(self, graph_dir: Path, base: Path):
        super().__init__()
        self.graph_dir, self.base = graph_dir, base

    def __missing__(self, parts: int) -> Path:
        from sylvie.partition.stage import partition_dataset

        out = self.base / f"metis-p{parts}"
        partition_dataset(self.graph_dir, out, parts, progress=False)
        self[parts] = out
        return out


def write_files(mag, root):
    """Each type's table (rows shuffled; papers: Parquet with a feature list, label and split; authors: CSV with
    string ids; the rest: Parquet with integer ids 1000 + i) and each relation's edges by those ids; the options."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    offsets, tables, ids = mag.type_offsets, {}, {}
    orders = {}
    for t, name in enumerate(mag.types.node_types):
        n = mag.node_counts[t]
        ids[name] = np.array([f"{name[0]}{i}" for i in range(n)]) if name == "author" else np.arange(n) + 1000
        order = orders[name] = rng.permutation(n)
        cols = {"id": ids[name][order]}
        if name == "paper":
            rows = np.arange(n)[order]
            cols["feat"] = pa.FixedSizeListArray.from_arrays(pa.array(mag.type_features[0][rows].reshape(-1)), 6)
            cols["label"] = mag.labels[rows]
            split = np.select([mag.train_mask[rows], mag.val_mask[rows], mag.test_mask[rows]], [0, 1, 2], 3)
            cols["split"] = SPLIT_NAMES[split]
        path = root / (f"{name}.csv" if name == "author" else f"{name}.parquet")
        (pacsv.write_csv if name == "author" else pq.write_table)(pa.table(cols), path)
        tables[name] = str(path)
    relations = []
    for r, rel in enumerate(mag.types.relations):
        mine = mag.relation == r
        s, d = mag.types.ends(r)
        edges = pa.table({"src": ids[rel.src][mag.src[mine] - offsets[s]],
                          "dst": ids[rel.dst][mag.dst[mine] - offsets[d]]})
        path = root / f"{rel.name}.{'csv' if r % 2 else 'parquet'}"
        (pacsv.write_csv if r % 2 else pq.write_table)(edges, path)
        relations.append({"src": rel.src, "name": rel.name, "dst": rel.dst, "edges": str(path)})
    write_files.orders = orders  # row i of type t's table is node orders[t][i] of the type
    return {"source": "files", "node_tables": tables, "relations": relations, "target": "paper", "node_key": "id",
            "split_column": "split"}


def write_papers_and_words(cora, root, cites_both_ways: bool = False) -> dict:
    """Cora as a user exports it as papers and words: papers.parquet keyed ``paper`` (ids "p<i>", rows shuffled) with
    the feature list ``feat``, ``label`` and ``split``; words.csv keyed ``word`` ("w<j>"), no features; cites.csv
    with ``citing,cited``, each citation once in an arbitrary direction (both directions with ``cites_both_ways``);
    has_word.csv with ``paper,word``, a paper's nonzero feature columns. The options that read them, each table and
    relation with its own columns, cites declared undirected."""
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    n, x = cora.num_nodes, cora.features
    papers, words = np.array([f"p{i}" for i in range(n)]), np.array([f"w{j}" for j in range(x.shape[1])])
    order = rng.permutation(n)
    split = np.select([cora.train_mask, cora.val_mask, cora.test_mask], [0, 1, 2], 3)[order]
    pq.write_table(pa.table({
        "paper": papers[order], "feat": pa.FixedSizeListArray.from_arrays(pa.array(x[order].reshape(-1)), x.shape[1]),
        "label": cora.labels[order], "split": pa.array([None if s == 3 else SPLIT_NAMES[s] for s in split])}),
        root / "papers.parquet")
    pacsv.write_csv(pa.table({"word": words[rng.permutation(len(words))]}), root / "words.csv")
    if cites_both_ways:
        a, b = cora.src, cora.dst
    else:
        once = cora.src < cora.dst
        u, v = cora.src[once], cora.dst[once]
        flip = rng.random(u.shape[0]) < 0.5
        a, b = np.where(flip, v, u), np.where(flip, u, v)
    pacsv.write_csv(pa.table({"citing": papers[a], "cited": papers[b]}), root / "cites.csv")
    rows, cols = np.nonzero(x)
    pacsv.write_csv(pa.table({"paper": papers[rows], "word": words[cols]}), root / "has_word.csv")
    return {"source": "files", "target": "paper", "split_column": "split",
            "node_tables": {"paper": {"path": str(root / "papers.parquet"), "node_key": "paper",
                                      "feature_columns": ["feat"]},
                            "word": {"path": str(root / "words.csv"), "node_key": "word", "feature_columns": []}},
            "relations": [{"src": "paper", "name": "cites", "dst": "paper", "edges": str(root / "cites.csv"),
                           "edge_columns": ["citing", "cited"], "directed": False},
                          {"src": "paper", "name": "has_word", "dst": "word", "edges": str(root / "has_word.csv"),
                           "edge_columns": ["paper", "word"]}]}
