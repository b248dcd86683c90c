"""ogbn-mag through ogb's real downloader: an archive in ogbn-mag's layout (csv.gz per node type and per relation,
as OGB ships it), built here from a small graph of the mag preset, served on loopback; ``sylvie download ogbn-mag``
makes it a typed canonical graph (types in ogb's order, each relation's reverse added unless told not to) that holds
the same nodes, edges, features, labels and split."""
import functools
import gzip
import http.server
import threading
import zipfile

import numpy as np
import pytest
from support.commands import BIN, run

from sylvie.data.graph import load_graph

pytestmark = pytest.mark.slow


def _csv_gz(zf, name, rows, header=None):
    text = "".join(",".join(map(str, r)) + "\n" for r in ([header] if header else []) + list(rows))
    zf.writestr(name, gzip.compress(text.encode()))


def build_mag_zip(graph, path):
    """ogbn-mag's archive: mag/raw/{num-node-dict, triplet-type-list, nodetype-has-label}.csv.gz, relations/<h___r___t>/
    {edge, num-edge-list, edge_reltype}.csv.gz, node-feat/paper/{node-feat, node_year}.csv.gz,
    node-label/paper/node-label.csv.gz, split/time/{nodetype-has-split.csv.gz, paper/<split>.csv.gz}, RELEASE_v2.txt.
    The graph's relations without their reverses (OGB ships the four, ogb's loader adds none)."""
    types, counts, offsets = graph.types, graph.node_counts, graph.type_offsets
    names = types.node_types
    with zipfile.ZipFile(path, "w") as zf:
        _csv_gz(zf, "mag/raw/num-node-dict.csv.gz", [counts], header=names)
        forward = [r for r in types.relations if not r.name.startswith("rev-")]
        _csv_gz(zf, "mag/raw/triplet-type-list.csv.gz", ([r.src, r.name, r.dst] for r in forward))
        for i, r in enumerate(forward):
            mine = graph.relation == types.relations.index(r)
            d = f"mag/raw/relations/{r.src}___{r.name}___{r.dst}"
            heads = graph.src[mine] - offsets[types.type_index(r.src)]
            tails = graph.dst[mine] - offsets[types.type_index(r.dst)]
            _csv_gz(zf, f"{d}/edge.csv.gz", zip(heads, tails))
            _csv_gz(zf, f"{d}/num-edge-list.csv.gz", [[int(mine.sum())]])
            _csv_gz(zf, f"{d}/edge_reltype.csv.gz", ([i] for _ in range(int(mine.sum()))))
        paper = types.target_index
        rows = slice(offsets[paper], offsets[paper + 1])
        _csv_gz(zf, "mag/raw/node-feat/paper/node-feat.csv.gz",
                ([f"{v:.8g}" for v in row] for row in graph.type_features[paper]))
        _csv_gz(zf, "mag/raw/node-feat/paper/node_year.csv.gz", ([2015] for _ in range(counts[paper])))
        _csv_gz(zf, "mag/raw/nodetype-has-label.csv.gz", [[t == "paper" for t in names]], header=names)
        _csv_gz(zf, "mag/raw/node-label/paper/node-label.csv.gz", ([v] for v in graph.labels[rows]))
        _csv_gz(zf, "mag/split/time/nodetype-has-split.csv.gz", [[t == "paper" for t in names]], header=names)
        for split, mask in (("train", graph.train_mask), ("valid", graph.val_mask), ("test", graph.test_mask)):
            _csv_gz(zf, f"mag/split/time/paper/{split}.csv.gz", ([i] for i in np.flatnonzero(mask[rows])))
        zf.writestr("mag/processed/", "")
        zf.writestr("mag/RELEASE_v2.txt", "built by sylvie's tests from the mag preset\n")


@pytest.fixture(scope="module")
def mag_mirror(small_mag, tmp_path_factory):
    served = tmp_path_factory.mktemp("mag-mirror")
    graph = small_mag
    build_mag_zip(graph, served / "mag.zip")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", graph
    server.shutdown()
    server.server_close()


def _by_name(graph):
    """{(src type, relation, dst type): set of (src id, dst id) within their types}, features and labels by type."""
    offsets = graph.type_offsets
    edges = {}
    for r, rel in enumerate(graph.types.relations):
        mine = graph.relation == r
        s, d = graph.types.ends(r)
        edges[(rel.src, rel.name, rel.dst)] = set(zip((graph.src[mine] - offsets[s]).tolist(),
                                                      (graph.dst[mine] - offsets[d]).tolist()))
    return edges


@pytest.mark.parametrize("reverse", [True, False])
def test_ogbn_mag_downloads_as_a_typed_graph(mag_mirror, tmp_path, reverse):
    mirror, want = mag_mirror
    out = tmp_path / "ogbn-mag"
    run([str(BIN / "sylvie"), "download", "ogbn-mag", "--mirror", mirror, "--root", str(tmp_path / "raw"),
         "--out", str(out), *([] if reverse else ["--no-reverse-relations"])])
    got = load_graph(out)
    assert got.types.node_types == ("author", "field_of_study", "institution", "paper")  # ogb's order
    assert got.types.target == "paper" and got.num_classes == 349  # OGB's master list: 349 venues
    counts = dict(zip(got.types.node_types, got.node_counts, strict=True))
    assert counts == dict(zip(want.types.node_types, want.node_counts, strict=True))
    edges, expected = _by_name(got), _by_name(want)
    if not reverse:
        expected = {k: v for k, v in expected.items() if not k[1].startswith("rev-")}
    assert edges == expected
    paper = got.types.target_index
    rows = slice(*got.type_offsets[paper:paper + 2])
    np.testing.assert_allclose(got.type_features[paper], want.type_features[0], rtol=1e-6)
    assert got.type_features[:paper] == (None, None, None)
    assert np.array_equal(got.labels[rows], want.labels[:counts["paper"]])
    assert (got.labels[:rows.start] == -1).all()
    for split in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(got, split)[rows], getattr(want, split)[:counts["paper"]])
