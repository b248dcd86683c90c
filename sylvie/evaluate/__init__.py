"""The evaluate stage: a trained model's accuracies in ``eval.json``, computed in full precision either on the
whole graph in one process (``whole_graph``, the reference) or partition-parallel, one rank per part
(``partitioned``, for graphs one process cannot hold)."""
from sylvie.evaluate.whole_graph import evaluate  # noqa: F401
