"""``sylvie evaluate --score-pairs FILE``: a trained link model's score of each pair a user gives, the pairs named by
the user's own node ids (a graph made from their files: ``node_key``) or by node numbers, from whole-graph embeddings
in one process; written by ``sylvie.formats.pair_scores``."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import torch

from sylvie.data.edge_files import read_edge_rows
from sylvie.data.graph import load_graph
from sylvie.errors import SylvieError
from sylvie.evaluate.result import check_outputs
from sylvie.evaluate.trained_model import model_for_inference
from sylvie.evaluate.whole_graph import embeddings, whole_graph_inputs
from sylvie.formats.model_file import load_model
from sylvie.formats.node_keys import read_node_keys
from sylvie.formats.pair_scores import suffix_of, write_pair_scores


def score_pairs(dataset_dir: str | Path, model_path: str | Path, pairs_path: str | Path, out_path: str | Path,
                columns: tuple[str, str] = ("src", "dst")) -> int:
    """Score every pair of ``pairs_path`` (a CSV, TSV, Parquet or Arrow file or folder: its ``columns``, source and
    destination) with the link model ``model_path`` trained on the graph ``dataset_dir``; write the scores to
    ``out_path``; returns the number of pairs. A pair naming a node the graph lacks is an error naming its file and
    row, before anything is written."""
    suffix_of(out_path)
    check_outputs(out_path, None, {"--model": model_path, "--dataset": dataset_dir, "--score-pairs": pairs_path},
                  kind="scores")
    saved = load_model(model_path)
    if saved.link_cfg is None:
        raise SylvieError(f"--score-pairs: {model_path} classifies nodes (train.task node), it scores no pairs; give "
                          f"the model.pt of a link-prediction run (train.task link)")
    graph = load_graph(dataset_dir)
    if graph.typed:
        raise SylvieError(f"--score-pairs: {dataset_dir} is a typed graph; scoring a user's pairs is for graphs of one "
                          f"node type for now")
    model, model_cfg = model_for_inference(saved, model_path, graph.info["fingerprint"], dataset_dir)
    keys = read_node_keys(dataset_dir, graph.num_nodes, graph.info.get("node_keys_sha256"))
    given = SimpleNamespace(edges=str(pairs_path), edge_columns=list(columns), unknown_nodes="error")
    rows = read_edge_rows(given, keys, graph.num_nodes, what="--score-pairs", known_only=True)
    own = embeddings(graph, model, *whole_graph_inputs(graph, model_cfg))
    src, dst = torch.from_numpy(rows.src), torch.from_numpy(rows.dst)
    with torch.no_grad():
        score = model.decoder(own[src], own[dst]).numpy()

    def named(numbers):  # the user's ids of node numbers, or the numbers
        return keys.take(pa.array(numbers)) if keys is not None else pa.array(numbers)

    write_pair_scores(out_path, named(rows.src), named(rows.dst), score)
    return int(score.shape[0])
