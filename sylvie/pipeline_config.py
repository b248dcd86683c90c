"""The pipeline's config as the Snakefile plans from it, checked whole before Snakemake plans: every file read as
written (``load_config``), ``--config`` overrides read by the schema's types (``config_file.typed_overrides``:
Snakemake hands nested values over as text), the runs resolved, every dataset buildable and every run placeable
(``plan_config``). A config error is one line and exit 2 (``exit_on_config_error``), on every entry: the Snakefile,
and ``python -m sylvie.pipeline_config FILE...`` (``make run CONFIG=``'s check before Snakemake starts)."""
from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from sylvie.config import Run, resolve_runs, validate
from sylvie.errors import SylvieError, one_line

PROG = "sylvie pipeline"


@contextlib.contextmanager
def exit_on_config_error() -> Iterator[None]:
    """A SylvieError inside becomes one line on stderr and exit 2 (SystemExit, which Snakemake passes on), not a
    traceback of the Snakefile's frames."""
    try:
        yield
    except SylvieError as e:
        print(f"{PROG}: error: {one_line(e, limit=2000)}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def deep_update(config: dict, overrides: dict) -> None:
    """``overrides`` merged into ``config`` in place, mappings key by key (as Snakemake merges ``--config``)."""
    for k, v in overrides.items():
        if isinstance(v, dict) and isinstance(config.get(k), dict):
            deep_update(config[k], v)
        else:
            config[k] = v


@dataclass(frozen=True)
class PipelinePlan:
    runs: dict[str, Run]
    launch: dict
    report: dict

    def geometry(self, name: str):
        """How run ``name``'s ranks are placed (``launch.torchrun.plan_geometry`` under the config's ``launch``); a
        SylvieError naming the run where they cannot be."""
        from sylvie.launch.torchrun import plan_geometry

        placement = {k: v for k, v in self.launch.items() if k not in ("allocator", "launcher")}  # where ranks go
        return plan_geometry(self.runs[name].partition.parts, **placement, where=f"run {name} with config launch")


def plan_config(config: dict) -> PipelinePlan:
    """The pipeline's runs, checked whole: the config valid, every dataset buildable, every run placeable by the
    config's ``launch``; a SylvieError naming the key otherwise."""
    from sylvie.data.registry import check_datasets

    runs = resolve_runs(config, where="config")
    check_datasets(config)
    checked = validate(config)
    plan = PipelinePlan(runs, checked["launch"], checked["report"])
    for name in runs:
        plan.geometry(name)
    return plan


def main(argv: list[str] | None = None) -> int:
    """``python -m sylvie.pipeline_config FILE...``: the config files, merged in order as ``--configfile`` merges
    them, checked as the pipeline plans from them; exit 2 with one line where they cannot run."""
    from sylvie.config_file import load_config

    paths = sys.argv[1:] if argv is None else argv
    try:
        with exit_on_config_error():
            if not paths:
                raise SylvieError("usage: python -m sylvie.pipeline_config CONFIG.yaml [MORE.yaml ...]")
            config: dict = {}
            for path in paths:
                deep_update(config, load_config(path))
            plan_config(config)
    except SystemExit as e:
        return int(e.code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
