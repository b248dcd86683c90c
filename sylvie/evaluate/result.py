"""The evaluate stage's result: the accuracies on each split's nodes (OGB's Evaluator for ogbn-* datasets) next to
the run's settings, written as ``eval.json`` (``sylvie.formats.eval_result``); both evaluation paths write it through
here, from the labels and predictions of the labelled nodes. And where the stage may write it and the predictions."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sylvie.data.input_files import check_entry
from sylvie.errors import SylvieError
from sylvie.extras import needs
from sylvie.formats import eval_result, pair_scores
from sylvie.formats import predictions as predictions_file
from sylvie.formats.eval_result import EvalResult, link_accuracies, write_eval_result
from sylvie.formats.model_file import ModelFile
from sylvie.formats.splits import SPLITS
from sylvie.output_dir import resolved_path


def _same(a: Path, b: Path) -> bool:
    """Whether the resolved paths ``a`` and ``b`` are one file (also through a hard link)."""
    if a == b:
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet
        return False


def check_outputs(out_path, predictions, inputs: dict[str, str | Path], kind: str = "eval") -> None:
    """Before any work, evaluate's one check of where it writes: ``--out`` (eval.json) and ``--predictions`` are two
    files of their own, neither one of the ``inputs`` (flag -> path) nor inside one nor an existing directory, and each
    either does not exist or is a file evaluate wrote (``eval_result.foreign``, ``predictions.foreign``; ``kind``
    "scores": ``--out`` is the scores of ``--score-pairs``, ``pair_scores.foreign``), never a user's
    file. An input that is a link to nothing or to itself is said first."""
    # The inputs are the model, the dataset or partition; the directories refused include the root, the home or working
    # directory and a parent of an input; a predictions file's kind is known by its name.
    for flag, given in inputs.items():  # a link to nothing or to itself: said as the input it is, before anything
        if os.path.islink(given) and not os.path.exists(given):
            check_entry(Path(given), flag)
    if predictions:
        predictions_file.check_predictions_path(predictions)
    outs = {"--out": out_path, **({"--predictions": predictions} if predictions else {})}
    resolved = {flag: resolved_path(p) for flag, p in outs.items()}
    model_dir = Path(inputs["--model"]).parent
    if predictions and _same(resolved["--out"], resolved["--predictions"]):
        other = Path(out_path).parent / "predictions.npy"
        raise SylvieError(f"refusing --predictions {predictions}: it is the same file as --out {out_path}, and "
                          f"eval.json would overwrite the predictions; give each a path of its own, e.g. --predictions "
                          f"{other if resolved_path(other) != resolved['--out'] else other.with_name('predicted.npy')}")
    default = {"--out": "eval.json" if kind == "eval" else "scores.csv", "--predictions": "predictions.npy"}
    for flag, target in resolved.items():
        for in_flag, given in inputs.items():
            src = resolved_path(given)
            if _same(target, src) or src in target.parents:
                where = "is" if _same(target, src) else "is inside"
                raise SylvieError(f"refusing {flag} {outs[flag]}: it {where} the input {in_flag} {given}, which "
                                  f"evaluate only reads; give a path of its own, e.g. {flag} "
                                  f"{model_dir / default[flag]}")
        if target.is_dir():
            raise SylvieError(f"refusing {flag} {outs[flag]}: it is an existing directory, and "
                              f"{flag} names a file; e.g. {flag} {Path(outs[flag]) / default[flag]}")
        if target.exists():
            said = {"--out": "an eval.json written by sylvie evaluate" if kind == "eval" else
                    "scores written by sylvie evaluate --score-pairs",
                    "--predictions": "predictions written by sylvie evaluate --predictions"}[flag]
            out_format = eval_result if kind == "eval" else pair_scores
            why = (out_format if flag == "--out" else predictions_file).foreign(target)
            if why:
                raise SylvieError(f"refusing {flag} {outs[flag]}: it exists and is not {said} ({why}); nothing was "
                                  f"changed; give another {flag} or move it away yourself")


def accuracy(dataset: str, labels: np.ndarray, pred: np.ndarray) -> float:
    if labels.shape[0] == 0:
        return float("nan")
    if dataset.startswith("ogbn-"):
        evaluator = needs("ogb.nodeproppred", f"evaluating {dataset} (OGB's Evaluator)").Evaluator

        return float(evaluator(dataset).eval({"y_true": labels[:, None], "y_pred": pred[:, None]})["acc"])
    return float((labels == pred).mean())


def write_eval(out_path: str | Path, dataset: str, saved: ModelFile, split_rows: dict, mode: str) -> dict:
    """``split_rows[s] = (labels, predictions)`` of split s's nodes; ``mode`` says how inference ran. Returns
    eval.json's content."""
    result = EvalResult(
        dataset=dataset, evaluator="ogb" if dataset.startswith("ogbn-") else "accuracy", inference=mode,
        accuracies={s: accuracy(dataset, *split_rows[s]) for s in SPLITS},
        model=saved.model_cfg, train=saved.train_cfg, comm=saved.comm_cfg, sampling=saved.sampling_cfg,
        cache=saved.cache_cfg, features=saved.features_cfg, summary=saved.summary)
    return write_eval_result(out_path, result)


def link_metrics(dataset: str, pos, neg, shared: bool) -> dict[str, float]:
    """A split's ranking metrics (``sylvie.runtime.ranking``) from its positives' scores ``[n]`` and its negatives':
    ``[n, k]`` (each pair's own), or ``[m]`` (negative pairs the split shares). An ogbl-* dataset's metric as OGB's
    Evaluator computes it, in place of ours (they agree: tests/test_ranking.py)."""
    import torch

    from sylvie.runtime.ranking import ranking_metrics, shared_negative_metrics

    pos, neg = torch.as_tensor(pos), torch.as_tensor(neg)
    metrics = shared_negative_metrics(pos, neg) if shared else ranking_metrics(pos, neg)
    if dataset.startswith("ogbl-") and pos.shape[0]:
        official = needs("ogb.linkproppred", f"evaluating {dataset} (OGB's Evaluator)").Evaluator(dataset)
        if shared:
            got = official.eval({"y_pred_pos": pos, "y_pred_neg": neg})
            metrics.update({k: float(v) for k, v in got.items() if k in metrics})
        elif official.eval_metric == "mrr":
            got = official.eval({"y_pred_pos": pos, "y_pred_neg": neg})
            metrics["mrr"] = float(got["mrr_list"].mean())
    return metrics


def write_link_eval(out_path: str | Path, dataset: str, saved: ModelFile, scores: dict, mode: str) -> dict:
    """A link-prediction model's eval.json: ``scores[s] = (pos, neg, shared)`` of split s's pairs (``link_metrics``);
    ``mode`` says how inference ran. Returns eval.json's content."""
    link = {s: link_metrics(dataset, *scores[s]) for s in scores}
    result = EvalResult(
        dataset=dataset, evaluator="ogb" if dataset.startswith("ogbl-") else "ranking", inference=mode,
        accuracies=link_accuracies(link), model=saved.model_cfg, train=saved.train_cfg, comm=saved.comm_cfg,
        sampling=saved.sampling_cfg, cache=saved.cache_cfg, features=saved.features_cfg, summary=saved.summary,
        task="link", link=link, link_cfg=saved.link_cfg)
    return write_eval_result(out_path, result)
