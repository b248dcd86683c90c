"""Our own file formats read back: a file of ours given where another is expected, truncated, corrupted or edited by
hand is a one-line error naming the file, exit code 2, never a traceback. In-process through ``sylvie.cli.main``."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from support.files import truncate

from sylvie.cli import main

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def made(cora_dir, cora_partitions, tmp_path_factory):
    """A 1-part partition's VIP analysis and a model trained on it for 2 epochs, a checkpoint of it and its
    eval.json (in-process)."""
    base = tmp_path_factory.mktemp("own-formats")
    p1 = cora_partitions[1]
    assert main(["vip", str(p1), "--out", str(base / "vip"), "--no-progress"]) == 0
    run = base / "run"
    assert main(["train", "--partition", str(p1), "--out", str(run), "--epochs", "2", "--checkpoint-every", "1",
                 "--no-progress", "--hidden", "4"]) == 0
    assert main(["evaluate", "--dataset", str(cora_dir), "--model", str(run / "model.pt"),
                 "--out", str(run / "eval.json")]) == 0
    return {"dataset": cora_dir, "partition": p1, "vip": base / "vip", "run": run}


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit_json(path: Path, edit) -> None:
    d = json.loads(path.read_text())
    edit(d)
    path.write_text(json.dumps(d, indent=2))


def _damaged(case: str, made: dict, tmp: Path) -> tuple[list[str], Path]:
    """(the command's arguments, the file its one line must name) for each damage."""
    ds, part, vip, run = made["dataset"], made["partition"], made["vip"], made["run"]
    out = tmp / "out"
    train = ["train", "--out", str(out), "--epochs", "1", "--no-progress"]
    sampled = train + ["--mode", "sampled", "--arch", "sage", "--no-self-loop"]
    if case == "partition-given-a-partition":
        return ["partition", str(part), "--out", str(out), "--parts", "2"], part
    if case == "vip-given-a-dataset":
        return ["vip", str(ds), "--out", str(out), "--no-progress"], ds
    if case == "train-given-a-dataset":
        return train + ["--partition", str(ds)], ds
    if case == "train-given-a-vip-analysis":
        return train + ["--partition", str(vip)], vip
    if case == "evaluate-given-a-partition-as-dataset":
        return ["evaluate", "--dataset", str(part), "--model", str(run / "model.pt"), "--out", str(out)], part
    if case == "evaluate-given-a-dataset-as-partition":
        return ["evaluate", "--partition", str(ds), "--model", str(run / "model.pt"), "--out", str(out)], ds
    if case.startswith("shard-"):
        p = _copy(part, tmp / "p")
        {"shard-truncated": truncate, "shard-empty": lambda f: f.write_bytes(b""),
         "shard-is-the-topology": lambda f: shutil.copy(p / "topology.arrow", f)}[case](p / "part-0.arrow")
        return train + ["--partition", str(p)], p / "part-0.arrow"
    if case == "topology-truncated":
        p = _copy(part, tmp / "p")
        truncate(p / "topology.arrow")
        return ["vip", str(p), "--out", str(out), "--no-progress"], p / "topology.arrow"
    if case.startswith("manifest-"):
        p = _copy(part, tmp / "p")
        m = p / "manifest.json"
        if case == "manifest-truncated":
            truncate(m)
        elif case == "manifest-num-parts-edited":
            _edit_json(m, lambda d: d.update(num_parts=2))
        elif case == "manifest-not-an-object":
            m.write_text("[1, 2, 3]\n")
        elif case == "manifest-is-the-vip-manifest":
            shutil.copy(vip / "manifest.json", m)
        elif case == "manifest-is-a-shard":
            shutil.copy(p / "part-0.arrow", m)
        return train + ["--partition", str(p)], m
    if case.startswith("nodes-") or case.startswith("meta-"):
        d = _copy(ds, tmp / "d")
        if case == "nodes-truncated":
            truncate(d / "nodes.arrow")
        elif case == "nodes-is-the-edges-file":
            shutil.copy(d / "edges.arrow", d / "nodes.arrow")
        elif case == "nodes-one-byte-flipped":
            data = bytearray((d / "nodes.arrow").read_bytes())
            data[len(data) // 2] ^= 0xFF  # inside the features
            (d / "nodes.arrow").write_bytes(bytes(data))
        elif case == "meta-truncated":
            truncate(d / "meta.json")
        elif case == "meta-num-classes-edited":
            _edit_json(d / "meta.json", lambda m: m.update(num_classes="seven"))
        elif case == "meta-num-classes-removed":
            _edit_json(d / "meta.json", lambda m: m.pop("num_classes"))
        elif case == "meta-not-an-object":
            (d / "meta.json").write_text('"cora"\n')
        elif case == "meta-is-the-nodes-file":
            shutil.copy(d / "nodes.arrow", d / "meta.json")
        named = d / ("nodes.arrow" if case.startswith("nodes-") else "meta.json")
        return ["partition", str(d), "--out", str(out), "--parts", "2"], named
    if case.startswith("vip-"):
        v = _copy(vip, tmp / "v")
        if case == "vip-array-truncated":
            truncate(v / "vip-0.npy")
            named = v / "vip-0.npy"
        else:
            truncate(v / "manifest.json")
            named = v / "manifest.json"
        return sampled + ["--partition", str(part), "--vip", str(v)], named
    if case.startswith("model-"):
        r = _copy(run, tmp / "r")
        model = r / "model.pt"
        if case == "model-truncated":
            truncate(model)
        elif case == "model-is-metrics-renamed":
            shutil.copy(r / "metrics.jsonl", model)
        elif case == "model-is-eval-json":
            model = r / "eval.json"
        elif case == "model-empty":
            model.write_bytes(b"")
        elif case == "model-is-a-checkpoint":
            model = r / "checkpoints" / "last.pt"
        return ["evaluate", "--dataset", str(ds), "--model", str(model), "--out", str(tmp / "e.json")], model
    raise AssertionError(case)


CASES = ["partition-given-a-partition", "vip-given-a-dataset", "train-given-a-dataset", "train-given-a-vip-analysis",
         "evaluate-given-a-partition-as-dataset", "evaluate-given-a-dataset-as-partition",
         "shard-truncated", "shard-empty", "shard-is-the-topology", "topology-truncated",
         "manifest-truncated", "manifest-num-parts-edited", "manifest-not-an-object", "manifest-is-the-vip-manifest",
         "manifest-is-a-shard",
         "nodes-truncated", "nodes-is-the-edges-file", "nodes-one-byte-flipped", "meta-truncated",
         "meta-num-classes-edited",
         "meta-num-classes-removed", "meta-not-an-object", "meta-is-the-nodes-file",
         "vip-array-truncated", "vip-manifest-truncated",
         "model-truncated", "model-is-metrics-renamed", "model-is-eval-json", "model-empty",
         "model-is-a-checkpoint"]


SAYS = {"partition-given-a-partition": "is a partition directory", "vip-given-a-dataset": "is a canonical graph",
        "train-given-a-dataset": "is a canonical graph", "train-given-a-vip-analysis": "is a VIP analysis",
        "evaluate-given-a-partition-as-dataset": "is a partition directory",
        "evaluate-given-a-dataset-as-partition": "is a canonical graph",
        "manifest-is-the-vip-manifest": "is a VIP analysis", "topology-truncated": "the topology file is corrupt"}


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_or_misplaced_file_of_ours_is_one_clear_line(case, made, tmp_path, capsys):
    argv, named = _damaged(case, made, tmp_path)
    capsys.readouterr()
    code = main(argv)  # anything but a SylvieError would propagate here, with its traceback
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith(f"sylvie {argv[0]}: error"), err
    assert str(named) in lines[0] or named.name in lines[0], (named, err)
    if case in SAYS:  # another of our outputs where this one was expected: the line says which
        assert SAYS[case] in lines[0], err
    assert not (tmp_path / "out" / "model.pt").exists() and not (tmp_path / "e.json").exists()



@pytest.mark.parametrize("where", ["--dataset", "--partition"])
@pytest.mark.parametrize("clash", ["out-is-predictions", "out-is-predictions-spelt-otherwise",
                                   "out-is-predictions-through-a-link", "predictions-is-the-model", "out-is-the-model",
                                   "predictions-inside-the-input", "out-is-a-directory"])
def test_evaluate_never_writes_over_its_predictions_model_or_input(where, clash, made, tmp_path, capsys):
    """eval.json over the predictions (the same path, however spelt), either output over the model or into the data
    it reads: refused before any work, in one line, on both evaluation paths; nothing is written or changed."""
    run = tmp_path / "run"
    shutil.copytree(made["run"], run)
    data = made["dataset"] if where == "--dataset" else made["partition"]
    model, out, pred = run / "model.pt", run / "eval-new.json", run / "pred.npy"
    np.save(pred, np.arange(3))
    if clash == "out-is-predictions":
        out = pred
    elif clash == "out-is-predictions-spelt-otherwise":
        out = run / "checkpoints" / ".." / "pred.npy"
    elif clash == "out-is-predictions-through-a-link":
        (run / "link.npy").symlink_to(pred)
        out = run / "link.npy"
    elif clash == "predictions-is-the-model":
        pred = model
    elif clash == "out-is-the-model":
        out = model
    elif clash == "predictions-inside-the-input":
        pred = data / "pred.npy"
    elif clash == "out-is-a-directory":
        out = run / "checkpoints"
    before = {p: p.read_bytes() for p in (model, run / "pred.npy")}
    inputs_before = sorted(p.name for p in data.iterdir())
    capsys.readouterr()
    code = main(["evaluate", where, str(data), "--model", str(model), "--out", str(out), "--predictions", str(pred)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "--predictions" in lines[0] if clash.startswith("predictions") else "--out" in lines[0], err
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in data.iterdir()) == inputs_before
    assert not (run / "eval-new.json").exists() and (run / "checkpoints").is_dir()


@pytest.mark.parametrize("error, said", [
    (PermissionError(13, "Permission denied"), "cannot read the trained model: permission denied"),
    (OSError(5, "Input/output error"), "cannot read the trained model: input/output error"),
])
def test_a_model_the_system_will_not_read_is_cannot_read_not_not_a_model(tmp_path, monkeypatch, error, said):
    """The system refusing the read (here: torch.load raising what the OS said, since root reads any file) is said
    as such; only a file read whole that is not our format is "not a model written by `sylvie train`"."""
    import torch

    from sylvie.errors import SylvieError
    from sylvie.formats.model_file import load_model

    path = tmp_path / "model.pt"
    path.write_bytes(b"whatever it holds")

    def refused(*args, **kwargs):
        raise error

    monkeypatch.setattr(torch, "load", refused)
    with pytest.raises(SylvieError) as e:
        load_model(path)
    assert str(e.value).startswith(f"{path}: {said}") and "not a model written" not in str(e.value)
    monkeypatch.undo()
    with pytest.raises(SylvieError, match="not a model written by `sylvie train`"):
        load_model(path)  # readable, but not ours


# ---- files we wrote, changed after: refused by the checksum they carry (issue 57, class 8) -------------------------

def _flip_inside_a_tensor(path: Path) -> None:
    """Flip one byte in the middle of the largest tensor a torch file holds: the file still loads, with another
    value in it (what a flipped bit on disk does)."""
    import torch

    def tensors(x):
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from tensors(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from tensors(v)

    largest = max(tensors(torch.load(path, weights_only=True)), key=torch.Tensor.nelement)
    data = bytearray(path.read_bytes())
    at = data.find(largest.numpy().tobytes())
    assert at >= 0
    data[at + largest.nelement() * largest.element_size() // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _changed_json(path: Path, edit, line: int | None = None) -> None:
    """Change a value of a JSON file (of one line of a JSON-lines file), leaving it valid JSON."""
    lines = path.read_text().splitlines()
    if line is None:
        d = json.loads(path.read_text())
        edit(d)
        path.write_text(json.dumps(d, indent=2) + "\n")
    else:
        d = json.loads(lines[line - 1])
        edit(d)
        lines[line - 1] = json.dumps(d)
        path.write_text("\n".join(lines) + "\n")


def _changed(case: str, made: dict, tmp: Path) -> tuple[list[str], Path, str]:
    """(the command, the file changed, what its line must say) for each file of ours changed after writing."""
    part, vip, run = made["partition"], made["vip"], made["run"]
    out = tmp / "out"
    r = _copy(run, tmp / "r")
    start_over = "delete it to train the run from its first epoch"
    if case.startswith("checkpoint-"):  # the made run again: it would resume from its checkpoint
        ckpt = r / "checkpoints" / "last.pt"
        _flip_inside_a_tensor(ckpt) if case == "checkpoint-byte-flipped" else truncate(ckpt)
        said = "was changed after `sylvie train`" if case == "checkpoint-byte-flipped" else "the file is damaged"
        return (["train", "--partition", str(part), "--out", str(r), "--epochs", "2", "--checkpoint-every", "1",
                 "--no-progress", "--hidden", "4"], ckpt, f"{said}.*{start_over}")
    if case == "model-byte-flipped":
        _flip_inside_a_tensor(r / "model.pt")
        return (["evaluate", "--dataset", str(made["dataset"]), "--model", str(r / "model.pt"), "--out", str(out)],
                r / "model.pt", "was changed after `sylvie train`.*rerun `sylvie train`")
    if case.startswith("vip-"):
        v = _copy(vip, tmp / "v")
        if case == "vip-manifest-value-changed":
            _changed_json(v / "manifest.json", lambda m: m["parts"][0].update(expected_sampled=1.5))
            named, said = v / "manifest.json", "was changed after `sylvie vip`.*rerun `sylvie vip`"
        else:
            data = bytearray((v / "vip-0.npy").read_bytes())
            data[-8] ^= 0x01
            (v / "vip-0.npy").write_bytes(bytes(data))
            named, said = v / "vip-0.npy", "sha256 differs.*rerun `sylvie vip`"
        return (["train", "--out", str(out), "--epochs", "1", "--no-progress", "--mode", "sampled", "--arch", "sage",
                 "--no-self-loop", "--partition", str(part), "--vip", str(v)], named, said)
    if case == "dataset-meta-value-changed":
        d = _copy(made["dataset"], tmp / "d")
        _changed_json(d / "meta.json", lambda m: m.update(num_test=m["num_test"] + 1))
        return (["partition", str(d), "--out", str(out), "--parts", "2"], d / "meta.json",
                "was changed after `sylvie download`.*rerun `sylvie download`")
    report = ["report", str(r), "--out", str(out)]
    if case == "eval-value-changed":
        _changed_json(r / "eval.json", lambda d: d.update(test_acc=0.99))
        return report, r / "eval.json", "was changed after `sylvie evaluate`.*rerun `sylvie evaluate`"
    if case == "metrics-value-changed":
        _changed_json(r / "metrics.jsonl", lambda d: d.update(loss=0.5), line=2)
        return report, r / "metrics.jsonl", "metrics.jsonl: line 2: was changed after `sylvie train`"
    if case == "failure-record-changed":  # a run that stopped: failed.json beside the epochs it ran
        from sylvie.formats.run_failure import RunFailure, write_run_failure

        (r / "eval.json").unlink()
        (r / "model.pt").unlink()
        write_run_failure(r, RunFailure("diverged", 2, "loss 40 at epoch 2"))
        _changed_json(r / "failed.json", lambda d: d.update(epoch=1))
        return report, r / "failed.json", "was changed after `sylvie train`"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["checkpoint-byte-flipped", "checkpoint-truncated", "model-byte-flipped",
                                  "vip-manifest-value-changed", "vip-array-byte-flipped", "eval-value-changed",
                                  "metrics-value-changed", "failure-record-changed", "dataset-meta-value-changed"])
def test_a_file_of_ours_changed_after_it_was_written_is_refused_naming_it(case, made, tmp_path, capsys):
    """Every file a stage reads back that we wrote carries a checksum of its content (or is listed with its sha256
    in one that does): one changed on disk, though still readable, is refused in one line naming it and what to do;
    nothing is written, and the damaged file is left as it is (a checkpoint is neither resumed nor written over)."""
    import re

    argv, named, said = _changed(case, made, tmp_path)
    before = named.read_bytes()
    model = tmp_path / "r" / "model.pt"
    model_before = model.read_bytes() if model.exists() else None
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert str(named) in lines[0] and re.search(said, lines[0]), err
    assert named.read_bytes() == before and not (tmp_path / "out").exists()
    assert (model.read_bytes() if model.exists() else None) == model_before
