"""The OGB path: ogb's real downloader fetches an OGB-format archive (built from Cora) from a loopback mirror."""
import functools
import gzip
import http.server
import threading
import time
import zipfile

import numpy as np
import pytest
from support.commands import BIN, run

from sylvie.data.graph import load_graph

pytestmark = pytest.mark.slow


def _csv_gz(zf, name, rows):
    zf.writestr(name, gzip.compress("".join(",".join(map(str, r)) + "\n" for r in rows).encode()))


def build_arxiv_zip(graph, path):
    """ogbn-arxiv's archive layout: arxiv/{raw,split/time}/*.csv.gz and RELEASE_v1.txt."""
    with zipfile.ZipFile(path, "w") as zf:
        keep = graph.src < graph.dst  # one direction: the loader symmetrises ogbn-arxiv
        _csv_gz(zf, "arxiv/raw/edge.csv.gz", zip(graph.src[keep], graph.dst[keep]))
        _csv_gz(zf, "arxiv/raw/node-feat.csv.gz", ([f"{v:.8g}" for v in row] for row in graph.features))
        _csv_gz(zf, "arxiv/raw/node-label.csv.gz", ([v] for v in graph.labels))
        _csv_gz(zf, "arxiv/raw/node_year.csv.gz", ([2020] for _ in graph.labels))
        _csv_gz(zf, "arxiv/raw/num-node-list.csv.gz", [[graph.num_nodes]])
        _csv_gz(zf, "arxiv/raw/num-edge-list.csv.gz", [[int(keep.sum())]])
        for split, mask in (("train", graph.train_mask), ("valid", graph.val_mask), ("test", graph.test_mask)):
            _csv_gz(zf, f"arxiv/split/time/{split}.csv.gz", ([i] for i in np.flatnonzero(mask)))
        zf.writestr("arxiv/processed/", "")  # OGB's archives ship this empty folder; ogb saves into it
        zf.writestr("arxiv/RELEASE_v1.txt", "built by sylvie's tests from Cora\n")


@pytest.fixture
def mirror(cora_dir, tmp_path):
    served = tmp_path / "mirror"
    served.mkdir()
    build_arxiv_zip(load_graph(cora_dir), served / "arxiv.zip")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_ogb_download_through_mirror(cora_dir, mirror, tmp_path):
    out = tmp_path / "ds" / "ogbn-arxiv"
    p = run([str(BIN / "sylvie"), "download", "ogbn-arxiv", "--mirror", mirror, "--root", str(tmp_path / "raw"),
             "--out", str(out)])
    assert "2,708 nodes, 10,556 edges" in p.stderr
    ogb_graph, cora = load_graph(out), load_graph(cora_dir)
    assert ogb_graph.info["url"] == mirror + "arxiv.zip"
    np.testing.assert_array_equal(ogb_graph.labels, cora.labels)
    np.testing.assert_array_equal(ogb_graph.test_mask, cora.test_mask)
    np.testing.assert_allclose(ogb_graph.features, cora.features, rtol=1e-6)
    assert set(zip(ogb_graph.src.tolist(), ogb_graph.dst.tolist())) == set(zip(cora.src.tolist(), cora.dst.tolist()))


def test_unreachable_mirror_is_a_clear_error(tmp_path):
    p = run([str(BIN / "sylvie"), "download", "ogbn-arxiv", "--mirror", "http://127.0.0.1:9/", "--root",
             str(tmp_path / "raw"), "--out", str(tmp_path / "ds")], check=False)
    assert p.returncode == 2 and "could not download ogbn-arxiv from http://127.0.0.1:9/arxiv.zip" in p.stderr
    assert not (tmp_path / "ds").exists()


def _serve(handler_cls):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_mirror_that_never_answers_times_out(tmp_path):
    class Silent(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            time.sleep(30)  # accepts the connection, sends nothing

        def log_message(self, *args):
            pass

    server = _serve(Silent)
    try:
        t0 = time.monotonic()
        p = run([str(BIN / "sylvie"), "download", "ogbn-arxiv", "--mirror",
                 f"http://127.0.0.1:{server.server_address[1]}/", "--timeout", "1", "--root", str(tmp_path / "raw"),
                 "--out", str(tmp_path / "ds")], check=False, timeout=60)
        assert time.monotonic() - t0 < 25
    finally:
        server.shutdown()
        server.server_close()
    assert p.returncode == 2 and "could not download ogbn-arxiv" in p.stderr and "timeout 1 s" in p.stderr
    assert not (tmp_path / "ds").exists()


def test_a_corrupt_archive_is_not_reused(cora_dir, mirror, tmp_path):
    served = tmp_path / "mirror"
    good = (served / "arxiv.zip").read_bytes()
    (served / "arxiv.zip").write_bytes(b"this is not a zip archive" * 100)
    args = [str(BIN / "sylvie"), "download", "ogbn-arxiv", "--mirror", mirror, "--root", str(tmp_path / "raw"),
            "--out", str(tmp_path / "ds")]
    p = run(args, check=False)
    assert p.returncode == 2 and "not a valid zip archive" in p.stderr and "arxiv.zip" in p.stderr
    assert not (tmp_path / "raw" / "arxiv.zip").exists() and (tmp_path / "raw" / "arxiv.zip.corrupt").exists()
    (served / "arxiv.zip").write_bytes(good)  # the mirror is fixed: the next run downloads again
    p = run(args)
    assert "2,708 nodes" in p.stderr


def test_a_second_download_from_the_same_root_reads_ogbs_processed_file(cora_dir, mirror, tmp_path):
    """The second ``sylvie download`` from the same ``--root`` reads the file ogb processed the first time (numpy
    arrays in a pickle, which torch's ``weights_only`` load refuses by default) instead of failing, and downloads
    nothing: the mirror is gone by then."""
    root, first, second = tmp_path / "raw", tmp_path / "a", tmp_path / "b"
    run([str(BIN / "sylvie"), "download", "ogbn-arxiv", "--mirror", mirror, "--root", str(root), "--out", str(first)])
    assert (root / "ogbn_arxiv" / "processed" / "data_processed").exists()
    p = run([str(BIN / "sylvie"), "download", "ogbn-arxiv", "--mirror", "http://127.0.0.1:9/", "--root", str(root),
             "--out", str(second)])
    assert "2,708 nodes, 10,556 edges" in p.stderr
    np.testing.assert_array_equal(load_graph(second).labels, load_graph(first).labels)
