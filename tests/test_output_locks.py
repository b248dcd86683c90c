"""Two writers of one output: every stage holds a lock on its --out while it writes (as training does on its run
directory); a second writer is refused at once, naming the holder, and writes nothing."""
import json

import pytest
from support.commands import BIN, run

from sylvie.output_lock import OutputLock

pytestmark = pytest.mark.slow


def sylvie(*args):
    return run([str(BIN / "sylvie"), *map(str, args)], check=False)


def test_every_stage_refuses_an_output_another_writer_holds(cora_dir, cora_partitions, tmp_path):
    trained = tmp_path / "run"
    assert sylvie("train", "--partition", cora_partitions[1], "--out", trained, "--epochs", 2,
                  "--no-progress").returncode == 0
    commands = {
        "download": ("download", "synthetic", "--nodes", 200, "--out", tmp_path / "ds"),
        "partition": ("partition", cora_dir, "--parts", 2, "--out", tmp_path / "parts"),
        "vip": ("vip", cora_partitions[2], "--out", tmp_path / "vip", "--no-progress"),
        "evaluate": ("evaluate", "--dataset", cora_dir, "--model", trained / "model.pt", "--out",
                     trained / "eval.json"),
        "report": ("report", trained, "--out", tmp_path / "report"),
    }
    for stage, argv in commands.items():
        out = argv[argv.index("--out") + 1]
        with OutputLock(out, "partition"):  # another stage's process, as far as the lock can tell
            p = sylvie(*argv)
        assert p.returncode == 2, (stage, p.stdout + p.stderr)
        line = p.stderr.strip().splitlines()[-1]
        assert f"{out}: another `sylvie partition` (host " in line and "is writing this output" in line, line
        assert not out.exists(), stage
        assert sylvie(*argv).returncode == 0, stage  # the holder gone, the same command runs
        assert out.exists() and not (out.parent / f".{out.name}.lock").exists()  # and its lock goes with it


def test_the_lock_names_its_holder_and_is_released_by_its_death(tmp_path):
    out = tmp_path / "parts"
    with OutputLock(out, "vip") as lock:
        record = json.loads(lock.path.read_text())
        assert record["stage"] == "vip" and record["pid"] > 0
    holder = run([str(BIN / "python"), "-c", f"from sylvie.output_lock import OutputLock\n"
                  f"import os\nOutputLock({str(out)!r}, 'download').__enter__()\nos._exit(9)"], check=False)
    assert holder.returncode == 9
    assert (tmp_path / ".parts.lock").exists()  # what a killed holder leaves: taken over, then removed
    with OutputLock(out, "partition"):
        pass
    assert not (tmp_path / ".parts.lock").exists()
