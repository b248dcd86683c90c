"""DGL is an optional extra, and no stage needs it: `sylvie download cora` (the default pipeline's first stage) reads
the Planetoid files with our own reader, and gives the canonical graph DGL's loader gave, fingerprint and all. DGL is
made unimportable in this process for the test (an import hook first on sys.meta_path, which also notes every import
of DGL asked for, and DGL's modules taken out of sys.modules), and put back after it."""
import json
import sys

import pytest
from support.commands import CORA_RAW

from sylvie.cli import main
from sylvie.config import section
from sylvie.data.registry import download

pytestmark = pytest.mark.unit

# The embedded Cora's fingerprint as the DGL-based loader gave it (before our reader; tests/test_planetoid_reader.py
# checks it against DGL's CoraGraphDataset).
CORA_FINGERPRINT = "e66bb23fa7ad56e0f9453bce2d0ee1706c0989778b9a4923b1dcb01b62d8c71b"


class RefuseDGL:
    def __init__(self):
        self.refused = []

    def find_spec(self, name, path=None, target=None):
        if name == "dgl" or name.startswith("dgl."):
            self.refused.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)", name=name)
        return None


@pytest.fixture
def without_dgl(monkeypatch):
    hook = RefuseDGL()
    monkeypatch.setattr(sys, "meta_path", [hook, *sys.meta_path])
    for name in [m for m in sys.modules if m == "dgl" or m.startswith("dgl.")]:
        monkeypatch.delitem(sys.modules, name)
    return hook


def test_download_of_cora_without_dgl_gives_dgls_graph(without_dgl, tmp_path):
    out = tmp_path / "cora"
    embedded = section("dataset", {"source": "planetoid", "raw_dir": str(CORA_RAW), "allow_download": False})
    meta = download("cora", out, embedded)
    assert meta["fingerprint"] == CORA_FINGERPRINT
    assert json.loads((out / "meta.json").read_text()) == meta
    assert {k: meta[k] for k in ("num_nodes", "num_edges", "num_features", "num_classes", "num_train", "num_val",
                                 "num_test", "self_loops_removed")} == {
        "num_nodes": 2708, "num_edges": 10556, "num_features": 1433, "num_classes": 7, "num_train": 140,
        "num_val": 500, "num_test": 1000, "self_loops_removed": 0}
    assert without_dgl.refused == [] and "dgl" not in sys.modules  # not even asked for


def test_the_cli_downloads_cora_without_dgl(without_dgl, tmp_path, capsys):
    out = tmp_path / "cora"
    code = main(["download", "cora", "--raw-dir", str(CORA_RAW), "--no-allow-download", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert json.loads((out / "meta.json").read_text())["fingerprint"] == CORA_FINGERPRINT
    assert without_dgl.refused == []


def test_the_refusal_is_undone_after_the_test():
    import dgl.data

    assert dgl.data.CoraGraphDataset
