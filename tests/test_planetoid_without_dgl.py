"""DGL is an optional extra: without it, `sylvie download cora` fails with one line that names the install, not a
traceback. DGL is made unimportable in this process for the test (an import hook first on sys.meta_path, and DGL's
modules taken out of sys.modules), and put back after it."""
import sys

import pytest
from conftest import CORA_RAW

from sylvie.cli import main

pytestmark = pytest.mark.unit


class RefuseDGL:
    def find_spec(self, name, path=None, target=None):
        if name == "dgl" or name.startswith("dgl."):
            raise ModuleNotFoundError(f"No module named {name!r} (refused by the test)", name=name)
        return None


@pytest.fixture
def without_dgl(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", [RefuseDGL(), *sys.meta_path])
    for name in [m for m in sys.modules if m == "dgl" or m.startswith("dgl.")]:
        monkeypatch.delitem(sys.modules, name)


def test_download_of_a_planetoid_dataset_without_dgl_is_one_line_naming_the_install(without_dgl, tmp_path, capsys):
    out = tmp_path / "cora"
    code = main(["download", "cora", "--raw-dir", str(CORA_RAW), "--no-allow-download", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.splitlines() == [
        "sylvie download: error: reading Planetoid datasets (cora, citeseer, pubmed) needs DGL, which is not "
        "installed; install it (the package's dgl extra) with pip install dgl==1.1.3 packaging"], err
    assert "dgl" not in sys.modules


def test_the_refusal_is_undone_after_the_test():
    import dgl.data

    assert dgl.data.CoraGraphDataset
