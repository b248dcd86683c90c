"""A graph of the user's own, through each way in (``source: files`` from Parquet, Arrow, CSV with string ids and
class names, .npy; ``source: dgl``; an OGB folder already on disk), gives the canonical graph the Planetoid loader
gives for Cora: the same fingerprint, once the user's ids and class names are mapped back to Cora's numbers."""
import zipfile

import numpy as np
import pyarrow as pa
import pytest
from support.commands import BIN, ranks, run
from test_ogb_download import build_arxiv_zip

from sylvie.config import section
from sylvie.data.export import ExportLayout, export_graph
from sylvie.data.graph import Graph, load_graph
from sylvie.data.registry import download
from sylvie.formats.node_keys import read_node_keys
from sylvie.formats.predictions import read_prediction_table

pytestmark = pytest.mark.slow

SUBJECTS = ("Theory", "Neural_Networks", "Case_Based", "Genetic_Algorithms", "Rule_Learning",
            "Probabilistic_Methods", "Reinforcement_Learning")  # class i's name: deliberately not in sorted order


def _sorted_fingerprint(graph: Graph) -> str:
    """The fingerprint of ``graph`` with its edges in (src, dst) order: the order an undirected source writes."""
    order = np.lexsort((np.asarray(graph.dst), np.asarray(graph.src)))
    return Graph(name=graph.name, src=np.asarray(graph.src)[order], dst=np.asarray(graph.dst)[order],
                 features=graph.features, labels=graph.labels, train_mask=graph.train_mask, val_mask=graph.val_mask,
                 test_mask=graph.test_mask, num_classes=graph.num_classes).fingerprint()


def _mapped_back(graph: Graph, directory, prefix: str) -> Graph:
    """``graph`` renumbered from the user's ids (``<prefix><number>``, node_keys.arrow) to Cora's numbers, and its
    classes from sorted names back to Cora's."""
    keys = read_node_keys(directory, graph.num_nodes).to_pylist()
    number = np.array([int(k[len(prefix):]) for k in keys])  # node i of graph is Cora's node number[i]
    where = np.empty_like(number)
    where[number] = np.arange(number.shape[0])  # Cora's node j is node where[j] of graph
    names = graph.info["class_names"]
    cora_class = np.array([SUBJECTS.index(n) for n in names])
    labels = np.asarray(graph.labels)[where]
    return Graph(name=graph.name, src=number[graph.src], dst=number[graph.dst], features=graph.features[where],
                 labels=np.where(labels >= 0, cora_class[np.maximum(labels, 0)], -1),
                 train_mask=graph.train_mask[where], val_mask=graph.val_mask[where], test_mask=graph.test_mask[where],
                 num_classes=graph.num_classes)


def _through_files(entry: dict, tmp_path, name="mine") -> Graph:
    out = tmp_path / "datasets" / name
    download(name, out, section("dataset", entry))
    return load_graph(out)


def test_parquet_gives_cora_exactly(cora_dir, tmp_path):
    """Integer ids, integer labels, every stored edge (directed: true keeps their order): the very same graph, so
    every later stage computes what it computes on Cora."""
    entry = export_graph(cora_dir, tmp_path / "files", ExportLayout(file_format="parquet"))
    graph = _through_files(entry, tmp_path)
    assert graph.info["fingerprint"] == load_graph(cora_dir).info["fingerprint"]
    for f in ("nodes.arrow", "edges.arrow"):
        assert (tmp_path / "datasets" / "mine" / f).read_bytes() == (cora_dir / f).read_bytes()


def test_csv_with_string_ids_and_class_names_gives_cora(cora_dir, tmp_path):
    """gzip CSV, ids 'paper-0042', labels class names (not in sorted order), rows shuffled, one row an undirected
    edge: mapped back through node_keys.arrow and class_names, Cora's graph."""
    cora = load_graph(cora_dir)
    layout = ExportLayout(file_format="csv", gzip=True, id_prefix="paper-", class_names=SUBJECTS, shuffle_seed=7,
                          pairs=True, edge_columns=("citing", "cited"), node_key="paper", label_column="subject",
                          feature_prefix="w")
    entry = export_graph(cora_dir, tmp_path / "files", layout)
    assert entry["directed"] is False and entry["feature_columns"] == ["w*"]
    graph = _through_files(entry, tmp_path)
    assert graph.info["class_names"] == sorted(SUBJECTS)
    assert read_node_keys(tmp_path / "datasets" / "mine", graph.num_nodes).to_pylist()[:2] != ["paper-0000",
                                                                                                "paper-0001"]
    assert _sorted_fingerprint(_mapped_back(graph, tmp_path / "datasets" / "mine", "paper-")) == \
        _sorted_fingerprint(cora)


def test_arrow_tsv_and_npy_forms(cora_dir, tmp_path):
    """An Arrow node table with an .npy edge list (OGB's (2, M) edge_index) and an .npy features_file; and a TSV
    node table split by mask columns: Cora."""
    cora = load_graph(cora_dir)
    entry = export_graph(cora_dir, tmp_path / "arrow", ExportLayout(file_format="arrow"))
    np.save(tmp_path / "edge_index.npy", np.stack([cora.src, cora.dst]))
    np.save(tmp_path / "feat.npy", cora.features.astype(np.float64))
    entry.update(edges=str(tmp_path / "edge_index.npy"), features_file=str(tmp_path / "feat.npy"), node_key=None)
    assert _through_files(entry, tmp_path, "npy").info["fingerprint"] == cora.info["fingerprint"]

    entry = export_graph(cora_dir, tmp_path / "tsv", ExportLayout(file_format="tsv"))
    nodes = tmp_path / "tsv" / "nodes.tsv"
    lines = nodes.read_text().splitlines()
    header = lines[0].split("\t")
    split_at = header.index('"split"')
    header[split_at:split_at + 1] = ['"is_train"', '"is_val"', '"is_test"']
    rows = ["\t".join(header)]
    for line in lines[1:]:
        cells = line.split("\t")
        s = cells[split_at].strip('"')
        cells[split_at:split_at + 1] = [str(s == k).lower() for k in ("train", "val", "test")]
        rows.append("\t".join(cells))
    nodes.write_text("\n".join(rows) + "\n")
    entry.update(split_column=None, mask_columns=["is_train", "is_val", "is_test"])
    assert _through_files(entry, tmp_path, "tsv").info["fingerprint"] == cora.info["fingerprint"]


def test_dgl_graph_file_gives_cora(cora_dir, tmp_path):
    """A dgl.save_graphs file of Cora (its node data named as DGL's CoraGraphDataset names them): Cora, through the
    command the download rule runs."""
    dgl = pytest.importorskip("dgl")
    import torch

    cora = load_graph(cora_dir)
    g = dgl.graph((torch.tensor(cora.src), torch.tensor(cora.dst)), num_nodes=cora.num_nodes)
    g.ndata["feat"] = torch.tensor(cora.features)
    g.ndata["label"] = torch.tensor(cora.labels)
    for s, m in cora.masks.items():
        g.ndata[f"{s}_mask"] = torch.tensor(m)
    dgl.save_graphs(str(tmp_path / "cora.bin"), [g])
    out = tmp_path / "ds"
    run([str(BIN / "sylvie"), "download", "cora-dgl", "--source", "dgl", "--graph-file", str(tmp_path / "cora.bin"),
         "--directed", "--out", str(out)])
    assert load_graph(out).info["fingerprint"] == cora.info["fingerprint"]


def test_ogb_folder_on_disk_needs_no_network(cora_dir, tmp_path):
    """An OGB dataset folder already extracted under root is read as it is: the mirror (a closed port) is never
    asked."""
    build_arxiv_zip(load_graph(cora_dir), tmp_path / "arxiv.zip")
    root = tmp_path / "ogb"
    with zipfile.ZipFile(tmp_path / "arxiv.zip") as zf:
        zf.extractall(root)
    (root / "arxiv").rename(root / "ogbn_arxiv")  # the folder name OGB's loader gives it
    out = tmp_path / "ds"
    meta = download("ogbn-arxiv", out, section("dataset", {"root": str(root), "mirror": "http://127.0.0.1:9/",
                                                           "timeout": 2}))
    assert (meta["num_nodes"], meta["num_edges"]) == (2708, 10556)
    np.testing.assert_array_equal(load_graph(out).labels, load_graph(cora_dir).labels)


def test_predictions_name_the_users_nodes_and_classes(cora_dir, tmp_path):
    """`sylvie evaluate --predictions preds.csv` on a dataset of string ids and class names: a row a node, the
    user's id and the class's name, agreeing with the .npy of class numbers; partition-parallel evaluation given the
    dataset writes the same table."""
    from sylvie.evaluate import evaluate
    from sylvie.formats.predictions import read_predictions
    from sylvie.partition.stage import partition_dataset

    layout = ExportLayout(file_format="parquet", id_prefix="paper-", class_names=SUBJECTS)
    graph = _through_files(export_graph(cora_dir, tmp_path / "files", layout), tmp_path)
    dataset, part, model = tmp_path / "datasets" / "mine", tmp_path / "part", tmp_path / "run" / "model.pt"
    partition_dataset(dataset, part, 2, "metis", 0, progress=False)
    ranks(2, "--no-python", "sylvie", "train", "--partition", part, "--out", model.parent, "--epochs", "3",
          "--no-progress")
    evaluate(dataset, model, tmp_path / "e.json", tmp_path / "p.csv")
    evaluate(dataset, model, tmp_path / "e2.json", tmp_path / "p.npy")
    table = read_prediction_table(tmp_path / "p.csv")
    numbers = read_predictions(tmp_path / "p.npy")
    assert table.column("node").to_pylist()[:2] == ["paper-0000", "paper-0001"]
    names = graph.info["class_names"]
    assert table.column("prediction").to_pylist() == [names[c] for c in numbers]
    assert table.num_rows == graph.num_nodes and pa.types.is_string(table.schema.field("prediction").type)
    ranks(2, "--no-python", "sylvie", "evaluate", "--partition", part, "--dataset", dataset, "--model", model,
          "--out", tmp_path / "e3.json", "--predictions", tmp_path / "p.parquet")
    assert read_prediction_table(tmp_path / "p.parquet").to_pylist() == table.to_pylist()
