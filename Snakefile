# Sylvie pipeline: download -> partition -> [vip, for sampled runs] -> train and evaluate (one job) -> report.
# Rules only wire inputs, outputs and params; all logic is in the `sylvie` package.
import os

from snakemake.utils import min_version

from sylvie.config import cli_arguments, dataset_options
from sylvie.config_file import load_config, typed_overrides
from sylvie.data.registry import given_files, num_nodes_before_download
from sylvie.launch.torchrun import plan_geometry, slurm_resources
from sylvie.pipeline_config import deep_update, exit_on_config_error, plan_config

min_version("9.0")


# config/config.yaml is the config unless --configfile names others, which then stand in its place (merged with
# each other in order, not with it): `snakemake --configfile config/products.yaml` runs that config alone. Each file
# is read again as the pipeline reads it: a YAML error, or a line YAML reads otherwise than it is written
# (`split_column: yes` is the boolean true), is named by file and line (Snakemake's own errors name neither). A
# config error is one line and exit 2 (exit_on_config_error), not a traceback of this file's frames.
with exit_on_config_error():
    for path in workflow.overwrite_configfiles or ["config/config.yaml"]:
        if os.path.exists(path):
            load_config(path)
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# --config's overrides read by the schema's types (Snakemake hands nested values over as text: `--config
# 'defaults={train: {epochs: 5}}'` gives epochs '5'); then the whole config checked before Snakemake plans: every
# dataset buildable, every run placeable by the config's launch
with exit_on_config_error():
    deep_update(config, typed_overrides(workflow.config_settings.config or {}))
    PLAN = plan_config(config)
RUNS, LAUNCH, REPORT = PLAN.runs, PLAN.launch, PLAN.report


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/vip.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "results/report/report.html",
    default_target: True
