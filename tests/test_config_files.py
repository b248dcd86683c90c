"""A config file is read as it is written, or refused naming the file and line: YAML 1.1 (PyYAML, which Snakemake
reads configs with) turns unquoted words into other types (`yes` -> true, `010` -> 8, `2026-11-29` -> a date,
`1e-3` -> a text), which load_config checks against the type the schema gives each setting. A config file that is
missing, a folder or empty is one line too, before Snakemake (which reads --configfile itself) meets it."""
import json

import pytest
from support.commands import BIN, REPO, run

from sylvie.config import resolve_runs
from sylvie.config_file import load_config, main
from sylvie.errors import SylvieError

READ = "is read (YAML 1.1, as Snakemake reads a config) as"


def _refused(tmp_path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SylvieError) as e:
        load_config(path)
    assert "\n" not in str(e.value)
    return str(e.value).removeprefix(f"{path}, ")


@pytest.mark.unit
@pytest.mark.parametrize("text, said", [
    ("datasets:\n  m: {source: files, edges: e, node_table: n,\n      split_column: yes}\nruns: {a: {dataset: m}}\n",
     f"line 3: datasets.m.split_column: yes {READ} the boolean true, but the setting takes a text or null; quote it: "
     f"'yes'"),
    ("datasets:\n  no: {source: synthetic}\nruns: {a: {dataset: 'no'}}\n",
     f"line 2: datasets.no: the key no {READ} the boolean false, not a name; quote it: 'no'"),
    ("runs:\n  on: {}\n", f"line 2: runs.on: the key on {READ} the boolean true, not a name; quote it: 'on'"),
    ("datasets:\n  1.10: {source: synthetic}\nruns: {a: {}}\n",
     f"line 2: datasets.1.10: the key 1.10 {READ} the number 1.1, not a name; quote it: '1.10'"),
    ("datasets:\n  2026-11-29: {source: synthetic}\nruns: {a: {}}\n",
     f"line 2: datasets.2026-11-29: the key 2026-11-29 {READ} the date 2026-11-29, not a name; quote it: "
     f"'2026-11-29'"),
    ("runs:\n  a:\n    train: {mode: sampled}\n    features: {zero_copy: on}\n",
     f"line 4: runs.a.features.zero_copy: on {READ} the boolean true, but the setting takes a text; quote it: 'on'"),
    ("datasets:\n  m:\n    source: files\n    node_tables: {a: x}\n    target: a\n"
     "    relations: [{src: a, name: off, dst: a, edges: e}]\nruns: {a: {dataset: m}}\n",
     f"line 6: datasets.m.relations.0.name: off {READ} the boolean false, but the setting takes a text; quote it: "
     f"'off'"),
    ("runs:\n  a: {train: {mode: sampled}, sampling: {fanouts: [{Off: 5}, 5]}}\n",
     f"line 2: runs.a.sampling.fanouts.0.Off: the key Off {READ} the boolean false, not a name; quote it: 'Off'"),
    ("datasets:\n  m: {source: files, edges: e, node_table: n, edge_columns: [0, 1]}\nruns: {a: {dataset: m}}\n",
     f"line 2: datasets.m.edge_columns.0: 0 {READ} the integer 0, but the setting takes a text; quote it: '0'"),
    ("datasets:\n  m: {source: synthetic, label_column: ~}\nruns: {a: {dataset: m}}\n",
     f"line 2: datasets.m.label_column: ~ {READ} null (no value), but the setting takes a text; quote it: '~'"),
    ("runs:\n  a:\n    train: {lr: 1e-3}\n",
     f"line 3: runs.a.train.lr: 1e-3 {READ} the text '1e-3', but the setting takes a number; write 0.001"),
    ("datasets:\n  s: {source: synthetic, nodes: 1e4}\nruns: {a: {dataset: s}}\n",
     f"line 2: datasets.s.nodes: 1e4 {READ} the text '1e4', but the setting takes an integer; write 10000"),
    ("runs:\n  a: {partition: {parts: 010}}\n",
     f"line 2: runs.a.partition.parts: 010 {READ} the integer 8, in YAML 1.2 as the integer 10; write 8 or 10, "
     f"whichever you mean"),
    ("runs:\n  a: {train: {optimizer_args: {eps: 1e-8}}}\n",
     f"line 2: runs.a.train.optimizer_args.eps: 1e-8 {READ} the text '1e-8', in YAML 1.2 as the number 1e-08; write "
     f"'1e-8' or 1.0e-08, whichever you mean"),
    ("runs:\n  a: {train: {optimizer: SGD, optimizer_args: {nesterov: on}}}\n",
     f"line 2: runs.a.train.optimizer_args.nesterov: on {READ} the boolean true, in YAML 1.2 as the text 'on'; write "
     f"true or 'on', whichever you mean"),
    ("runs:\n  a: {dataset: 2026-13-45}\n",
     "line 2: runs.a.dataset: 2026-13-45 is a date to YAML 1.1, as Snakemake reads a config, but not a valid one; "
     "quote it: '2026-13-45'"),
    ("runs:\n  a:\n    train: {lr: 0.1}\n  a:\n    train: {lr: 0.01}\n",
     "line 4: runs.a is given twice (lines 2 and 4); YAML would keep the last without a word; give it once"),
], ids=["split-column-yes", "dataset-no", "run-on", "version-key", "date-key", "enum-on", "relation-off",
        "fanout-relation-off", "column-numbers", "label-tilde", "lr-1e-3", "nodes-1e4", "octal", "untyped-eps",
        "untyped-on", "not-a-date", "duplicate-run"])
def test_a_line_yaml_reads_otherwise_than_written_is_refused_naming_it(tmp_path, text, said):
    assert _refused(tmp_path, text) == said


@pytest.mark.unit
def test_what_yaml_reads_as_written_is_taken(tmp_path):
    """A spelling only YAML 1.1 knows of the type a setting takes means that, and quoted text is text; a JSON file
    (which Snakemake reads as JSON) means what JSON says."""
    path = tmp_path / "config.yaml"
    path.write_text("datasets:\n  'no': {source: synthetic, nodes: 1_000, directed: yes, split_column: 'on'}\n"
                    "runs:\n  'on': {dataset: 'no', model: {self_loop: off}, train: {lr: 1.0e-3, timeout: 1:30}}\n")
    config = load_config(path)
    assert config["datasets"]["no"] == {"source": "synthetic", "nodes": 1000, "directed": True, "split_column": "on"}
    run_ = resolve_runs(config)["on"]
    assert (run_.model.self_loop, run_.train.lr, run_.train.timeout) == (False, 0.001, 90)
    path.write_text(json.dumps({"runs": {"a": {"train": {"lr": 1e-3}}}}).replace("0.001", "1e-3"))
    assert resolve_runs(load_config(path))["a"].train.lr == 0.001
    path.write_text('{"runs": {"a": {"train": {"lr": 0.1, "epochs": 3, "lr": 0.2}}}}')  # JSON keeps the last
    with pytest.raises(SylvieError, match=r'config.yaml: the key "lr" is given twice in one object, and the last '
                                          r'would win; keep one'):
        load_config(path)


@pytest.mark.unit
def test_a_config_file_that_cannot_be_read_is_one_line(tmp_path, capsys, monkeypatch):
    """`python -m sylvie.config_file FILE...`: each file read as the pipeline reads it (`make run CONFIG=` runs
    `python -m sylvie.pipeline_config`, which reads them so, then checks what they configure)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "comments.yaml").write_text("# nothing yet\n")
    (tmp_path / "latin1.yaml").write_bytes("runs: {caf\xe9: {}}\n".encode("latin-1"))
    (tmp_path / "good.yaml").write_text("runs: {a: {}}\n")
    for name, said in [
        ("missing.yaml", f"missing.yaml: no such config file; check the path (relative paths are from {tmp_path}), "
                         f"or start from the repository's config/config.yaml"),
        ("folder", "folder: a folder, not a config file; give a YAML file (e.g. config/config.yaml)"),
        ("empty.yaml", "empty.yaml: the config file is empty; a config is a mapping with at least 'runs:'"),
        ("comments.yaml", "comments.yaml: the config file is empty"),
        ("latin1.yaml", "latin1.yaml, line 1: not UTF-8 text; save the config as UTF-8"),
    ]:
        capsys.readouterr()
        assert main(["good.yaml", name]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {said}") and err.count("\n") == 1, err
    assert main(["good.yaml"]) == 0


@pytest.mark.slow
def test_make_run_and_snakemake_name_the_config_file(tmp_path):
    """`make run CONFIG=` with a missing file stops in one line before Snakemake; a --configfile Snakemake read is
    read again by the Snakefile, which names the line YAML reads otherwise."""
    venv = BIN.parent
    p = run(["make", "-s", "-C", str(REPO), f"VENV={venv}", "-o", f"{venv}/.installed", "run",
             f"CONFIG={tmp_path}/missing.yaml"], check=False)
    said = f"sylvie pipeline: error: {tmp_path}/missing.yaml: no such config file"
    assert p.returncode == 2 and p.stderr.startswith(said), p.stderr
    config = tmp_path / "mine.yaml"
    config.write_text("runs:\n  a: {partition: {parts: 1}}\n  b: {model: {self_loop: no}, train: {seeds: [0, 010]}}\n")
    p = run([str(BIN / "snakemake"), "-n", "--cores", "1", "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path),
             "--configfile", str(config)], check=False)
    assert p.returncode != 0
    assert (f"{config}, line 3: runs.b.train.seeds.1: 010 {READ} the integer 8, in YAML 1.2 as the integer 10"
            in p.stdout + p.stderr), p.stdout + p.stderr
