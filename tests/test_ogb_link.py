"""ogbl-citation2 and ogbl-collab through ogb's real downloader: archives in OGB's layout (raw/*.csv.gz, the
split's {train,valid,test}.pt, RELEASE_v1.txt), built here for a few tens of nodes and served on loopback; the
download stage makes each a canonical graph whose edges are the training edges both ways and whose ``link`` holds
OGB's pairs and negatives as the archive gives them. A damaged archive is refused, naming the file and field."""
import zipfile

import numpy as np
import pytest
import torch
from support.ogb_archives import csv_gz, served

from sylvie.config import section
from sylvie.data.graph import load_graph
from sylvie.data.registry import download, num_nodes_before_download, source_of
from sylvie.errors import SylvieError
from sylvie.formats.link_pairs import TEST, TRAIN, VAL

pytestmark = pytest.mark.unit

FEATURES = 4


def _pt(zf, name, fields):
    """A split file: OGB's dictionary of tensors, saved by torch."""
    with zf.open(name, "w") as f:
        torch.save({k: torch.as_tensor(v) for k, v in fields.items()}, f)


def _raw(zf, folder, n, edges, rng, extra=()):
    csv_gz(zf, f"{folder}/raw/edge.csv.gz", edges.tolist())
    csv_gz(zf, f"{folder}/raw/num-node-list.csv.gz", [[n]])
    csv_gz(zf, f"{folder}/raw/num-edge-list.csv.gz", [[len(edges)]])
    features = rng.standard_normal((n, FEATURES)).astype(np.float32)
    csv_gz(zf, f"{folder}/raw/node-feat.csv.gz", ([f"{v:.9g}" for v in row] for row in features))
    for name, rows in extra:
        csv_gz(zf, f"{folder}/raw/{name}.csv.gz", rows)
    zf.writestr(f"{folder}/RELEASE_v1.txt", "built by sylvie's tests\n")
    return features


def citation2(path, damage=None):
    """ogbl-citation2's archive for 40 papers: paper i cites older papers; each of the 8 newest with 3 or more
    references has one held out for validation and one for test, ranked against 20 negatives it does not cite."""
    rng = np.random.default_rng(0)
    n, k = 40, 20
    refs = {i: sorted(rng.choice(i, min(i, int(rng.integers(1, 7))), replace=False).tolist()) for i in range(1, n)}
    sources = [i for i in range(n - 1, 0, -1) if len(refs[i]) >= 3][:8]
    held = {s: (refs[s][-2], refs[s][-1]) for s in sources}
    train = np.array([(i, j) for i, r in refs.items() for j in r if j not in held.get(i, ())], np.int64)
    parts = {"train": {"source_node": train[:, 0], "target_node": train[:, 1]}}
    for part, which in (("valid", 0), ("test", 1)):
        neg = [rng.choice([x for x in range(n) if x not in refs[s] and x != s], k) for s in sources]
        parts[part] = {"source_node": np.array(sources), "target_node": np.array([held[s][which] for s in sources]),
                       "target_node_neg": np.array(neg)}
    if damage:
        damage(parts)
    with zipfile.ZipFile(path, "w") as zf:
        features = _raw(zf, "citation-v2", n, train, rng, [("node_year", ([2000 + i // 4] for i in range(n)))])
        for part, fields in parts.items():
            _pt(zf, f"citation-v2/split/time/{part}.pt", fields)
    return n, features, parts


def collab(path, damage=None, recurring=False):
    """ogbl-collab's archive for 30 authors: collaborations listed once each (one pair twice, in two years), later
    ones held out for validation and test, each split ranked against 15 shared negative pairs. ``recurring``: one
    validation pair is also a training collaboration, as in OGB's collab."""
    rng = np.random.default_rng(1)
    n = 30
    pairs = rng.permutation(np.array([(u, v) for u in range(n) for v in range(u + 1, n)]))
    train, valid, test = pairs[:60], pairs[60:68], pairs[68:74]
    train = np.concatenate([train, train[:1]])  # a recurring collaboration: two years, two rows
    if recurring:
        valid = np.concatenate([valid, train[5:6]])
    parts = {"train": {"edge": train, "weight": np.ones(len(train), np.int64), "year": np.full(len(train), 2010)},
             "valid": {"edge": valid, "edge_neg": pairs[100:115]}, "test": {"edge": test, "edge_neg": pairs[120:135]}}
    if damage:
        damage(parts)
    with zipfile.ZipFile(path, "w") as zf:
        years = [[2009]] + [[2010]] * (len(train) - 1)
        features = _raw(zf, "collab", n, train, rng, [("edge_weight", [[1]] * len(train)), ("edge_year", years)])
        for part, fields in parts.items():
            _pt(zf, f"collab/split/time/{part}.pt", fields)
    return n, features, parts


ARCHIVES = {"ogbl-citation2": ("citation-v2.zip", citation2), "ogbl-collab": ("collab.zip", collab)}


def _download(name, tmp_path, **kw):
    """Build ``name``'s archive (``kw`` to its builder), serve it and run the download stage in-process: (graph
    read back, what the archive holds)."""
    archive, build = ARCHIVES[name]
    (tmp_path / "mirror").mkdir()
    held = build(tmp_path / "mirror" / archive, **kw)
    with served(tmp_path / "mirror") as url:
        options = section("dataset", {"mirror": url, "root": str(tmp_path / "raw"), "timeout": 10})
        download(name, tmp_path / name, options)
    return load_graph(tmp_path / name), held


def _edge_set(src, dst):
    return set(zip(src.tolist(), dst.tolist()))


def _check_message_graph(graph, train):
    """The graph's edges are the training pairs both ways, once each; no validation or test pair is among them."""
    both = {(u, v) for u, v in train} | {(v, u) for u, v in train}
    assert _edge_set(graph.src, graph.dst) == both and graph.num_edges == len(both)
    link = graph.link
    held = link.split != TRAIN
    assert not _edge_set(link.src[held], link.dst[held]) & both
    assert graph.num_classes == 1 and graph.train_mask.all() and not (graph.val_mask | graph.test_mask).any()


def test_ogbl_citation2_downloads_with_its_pairs_and_negatives(tmp_path):
    graph, (n, features, parts) = _download("ogbl-citation2", tmp_path)
    link = graph.link
    assert graph.num_nodes == n and graph.info["eval_metric"] == "mrr"
    np.testing.assert_allclose(graph.features, features, rtol=1e-6)
    for part, s in (("train", TRAIN), ("valid", VAL), ("test", TEST)):  # each split in its file's order
        i = link.indices(s)
        assert np.array_equal(link.src[i], parts[part]["source_node"])
        assert np.array_equal(link.dst[i], parts[part]["target_node"])
    assert np.array_equal(link.negatives_of("val"), parts["valid"]["target_node_neg"])
    assert np.array_equal(link.negatives_of("test"), parts["test"]["target_node_neg"])
    assert link.negative_pairs is None and link.undirected
    train = parts["train"]
    _check_message_graph(graph, list(zip(train["source_node"].tolist(), train["target_node"].tolist())))
    # the extracted folder is read again with no network (a mirror that answers nothing)
    offline = section("dataset", {"mirror": "http://127.0.0.1:9/", "root": str(tmp_path / "raw"), "timeout": 1})
    download("ogbl-citation2", tmp_path / "again", offline)
    assert load_graph(tmp_path / "again").info["fingerprint"] == graph.info["fingerprint"]


def test_ogbl_collab_downloads_with_shared_negative_pairs(tmp_path):
    graph, (n, features, parts) = _download("ogbl-collab", tmp_path)
    link = graph.link
    assert graph.num_nodes == n and graph.info["eval_metric"] == "hits@50"
    for part, s in (("train", TRAIN), ("valid", VAL), ("test", TEST)):
        i = link.indices(s)
        assert np.array_equal(np.stack([link.src[i], link.dst[i]], 1), parts[part]["edge"])
    assert link.counts()["train"] == 61  # the recurring collaboration twice, as OGB lists it
    assert link.negatives.shape == (0, 0)
    src, dst, split = link.negative_pairs
    assert np.array_equal(np.stack([src, dst], 1), np.concatenate([parts["valid"]["edge_neg"],
                                                                   parts["test"]["edge_neg"]]))
    assert np.array_equal(split, [VAL] * 15 + [TEST] * 15)
    _check_message_graph(graph, parts["train"]["edge"].tolist())


def test_a_pair_that_is_also_a_training_edge_is_kept_and_counted(tmp_path, caplog):
    graph, _ = _download("ogbl-collab", tmp_path, recurring=True)
    assert graph.info["held_out_in_graph"] == 1
    assert "ogbl-collab: 1 validation and test pairs are also training edges" in caplog.text


def _drop(part, field):
    def damage(parts):
        del parts[part][field]
    return damage


def _outside(parts):
    parts["test"]["target_node_neg"][2, 3] = 40  # the graph has 40 nodes


def _float_ids(parts):
    parts["valid"]["edge"] = parts["valid"]["edge"].astype(np.float32)


@pytest.mark.parametrize("name, damage, said", [
    ("ogbl-collab", _drop("valid", "edge_neg"), "split/time/valid.pt: field 'edge_neg' is missing or not a tensor"),
    ("ogbl-citation2", _drop("train", "target_node"), "split/time/train.pt: field 'target_node' is missing"),
    ("ogbl-citation2", _outside, "split/time/test.pt: field 'target_node_neg' names node 40, outside the graph's 40"),
    ("ogbl-collab", _float_ids, "split/time/valid.pt: field 'edge' is torch.float32 of shape [8, 2], not integer ids"),
])
def test_a_damaged_split_file_is_named_with_its_field(tmp_path, name, damage, said):
    with pytest.raises(SylvieError, match=said.replace("[", r"\[").replace("]", r"\]")) as e:
        _download(name, tmp_path, damage=damage)
    assert "move" in str(e.value) and "rerun" in str(e.value)
    assert not (tmp_path / name).exists()


def test_an_archive_that_is_not_a_zip_or_not_the_datasets_is_refused(tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "collab.zip").write_bytes(b"not a zip archive" * 50)
    with zipfile.ZipFile(tmp_path / "mirror" / "citation-v2.zip", "w") as zf:
        zf.writestr("citation/RELEASE_v1.txt", "another dataset's folder\n")
    with served(tmp_path / "mirror") as url:
        options = section("dataset", {"mirror": url, "root": str(tmp_path / "raw"), "timeout": 10})
        with pytest.raises(SylvieError, match="collab.zip: downloaded from .* but not a valid zip archive"):
            download("ogbl-collab", tmp_path / "collab", options)
        with pytest.raises(SylvieError, match="citation-v2.zip: holds no folder citation-v2/"):
            download("ogbl-citation2", tmp_path / "citation2", options)


def test_the_link_datasets_are_known_by_name():
    options = section("dataset")
    assert source_of("ogbl-citation2") == source_of("ogbl-collab") == "ogb"
    assert num_nodes_before_download("ogbl-citation2", options) == 2_927_963
    assert num_nodes_before_download("ogbl-collab", options) == 235_868
