"""Models saved when our layers were DGL's (tests/legacy_models/, written at f88f2bb) load into today's layers and
predict every Cora node's class as they did then: the parameters kept their names, shapes and meaning."""
import numpy as np
import pytest
from support.commands import REPO

from sylvie.evaluate.whole_graph import evaluate

pytestmark = pytest.mark.unit

LEGACY = REPO / "tests" / "legacy_models"


@pytest.mark.parametrize("arch", ["gcn", "sage", "gat"])
def test_a_model_saved_on_dgls_layers_predicts_what_it_did(arch, cora_dir, tmp_path):
    evaluate(cora_dir, LEGACY / arch / "model.pt", tmp_path / "eval.json", tmp_path / "predictions.npy")
    then = np.load(LEGACY / arch / "predictions.npy")
    now = np.load(tmp_path / "predictions.npy")
    assert now.shape == then.shape and np.array_equal(now, then.astype(now.dtype))
