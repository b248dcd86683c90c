"""Bad input in a ``source: dgl`` file (a ``dgl.save_graphs`` file; DGL reads it in the download stage only): each a
one-line error naming the file and the node data, nothing written; what it reads without a word that it should
not (masks it does not use), a warning line."""
import logging

import pytest
import torch

from sylvie.config import section
from sylvie.data.registry import download
from sylvie.errors import SylvieError

dgl = pytest.importorskip("dgl")
pytestmark = pytest.mark.unit


def _graph(masks=("train_mask", "val_mask", "test_mask"), n=6):
    g = dgl.graph((torch.arange(n), (torch.arange(n) + 1) % n))
    g.ndata["feat"] = torch.arange(n * 2, dtype=torch.float32).reshape(n, 2)
    g.ndata["label"] = torch.arange(n) % 2
    for i, m in enumerate(masks):
        g.ndata[m] = torch.arange(n) % 3 == i
    return g


def _save(tmp_path, g, name="g.bin"):
    dgl.save_graphs(str(tmp_path / name), [g])
    return {"source": "dgl", "graph_file": str(tmp_path / name)}


def _refused(tmp_path, entry: dict, pattern: str) -> str:
    with pytest.raises(SylvieError, match=pattern) as e:
        download("mine", tmp_path / "out" / "mine", section("dataset", entry))
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists(), "something was written"
    return str(e.value)


def test_a_file_that_is_not_one_plain_graph_is_refused_by_name(tmp_path):
    """A typed graph (node types or relations), a folder, a file of another kind, no file: each refused naming the
    path, with what to do."""
    typed = dgl.heterograph({("a", "r", "b"): ([0, 1], [1, 0]), ("b", "s", "a"): ([0], [1])})
    _refused(tmp_path, _save(tmp_path, typed, "typed.bin"),
             r"typed.bin: its first graph is typed \(2 node types: a, b; 2 relations\); source dgl reads a graph of "
             r"one node type and one relation: save dgl.to_homogeneous")
    one_type = dgl.heterograph({("n", "cites", "n"): ([0, 1], [1, 2]), ("n", "likes", "n"): ([2], [0])})
    _refused(tmp_path, _save(tmp_path, one_type, "relations.bin"), r"relations.bin: its first graph is typed "
             r"\(1 node type: n; 2 relations\)")
    (tmp_path / "folder.bin").mkdir()
    _refused(tmp_path, {"source": "dgl", "graph_file": str(tmp_path / "folder.bin")},
             r"folder.bin: graph_file is a folder; name the file dgl.save_graphs wrote in it")
    (tmp_path / "text.bin").write_text("src,dst\n0,1\n")
    _refused(tmp_path, {"source": "dgl", "graph_file": str(tmp_path / "text.bin")},
             r"text.bin: not a graph file written by dgl.save_graphs")
    _refused(tmp_path, {"source": "dgl", "graph_file": str(tmp_path / "gone.bin")}, r"gone.bin: graph_file: no such")


def test_node_data_of_the_wrong_kind_is_refused_naming_it(tmp_path):
    """A mask of numbers other than 0 and 1 (once read as true), a missing node data, labels out of range."""
    g = _graph()
    g.ndata["val_mask"] = (torch.arange(6) % 3 == 1).long() * 2
    _refused(tmp_path, _save(tmp_path, g), r"g.bin: node data 'val_mask': node 1 has 2, not a mask value "
             r"\(2 such nodes\); a mask is boolean, or 0 and 1")
    g = _graph()
    g.ndata["train_mask"] = (torch.arange(6) % 3 == 0).float() - 0.5
    _refused(tmp_path, _save(tmp_path, g), r"node data 'train_mask': node 0 has 0.5, not a mask value")
    _refused(tmp_path, {**_save(tmp_path, _graph()), "feature_columns": ["x"]},
             r"g.bin: the graph has no node data 'x' \(it has feat, label, test_mask, train_mask, val_mask\)")
    g = _graph()
    g.ndata["label"] = torch.tensor([0, 1, -3, 1, 0, 1])
    _refused(tmp_path, _save(tmp_path, g), r"node data 'label': node 2 has label -3, out of range")


def test_some_of_the_three_masks_is_said_not_used(tmp_path, caplog):
    """One or two of train_mask, val_mask, test_mask: the graph is split at random, as with none, and a warning
    names the masks it has and the one it lacks; all three: used, no warning."""
    for masks, said in ((("train_mask", "val_mask"), "train_mask and val_mask but no test_mask"),
                        (("test_mask",), "test_mask but no train_mask or val_mask")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="sylvie"):
            meta = download("mine", tmp_path / masks[0], section("dataset", {
                **_save(tmp_path, _graph(masks)), "train_fraction": 0.5, "val_fraction": 0.25}))
        assert meta["num_nodes"] == 6
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warned) == 1 and f"the graph has node data {said}: its masks are not used" in warned[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sylvie"):
        meta = download("mine", tmp_path / "all", section("dataset", _save(tmp_path, _graph())))
    assert (meta["num_train"], meta["num_val"], meta["num_test"]) == (2, 2, 2)
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
