# Sylvie pipeline: download -> partition -> [vip, for sampled runs] -> train (torchrun) -> evaluate -> report.
# Rules only wire inputs, outputs and params; all logic is in the `sylvie` package.
import os

from snakemake.utils import min_version

from sylvie.config import cli_arguments, dataset_options, resolve_runs, validate
from sylvie.config_file import load_config
from sylvie.data.registry import check_datasets, given_files, num_nodes_before_download
from sylvie.launch.torchrun import plan_geometry, slurm_resources

min_version("9.0")


# config/config.yaml is the config unless --configfile names others, which then stand in its place (merged with
# each other in order, not with it): `snakemake --configfile config/products.yaml` runs that config alone. Each file
# is read again as the pipeline reads it: a YAML error, or a line YAML reads otherwise than it is written
# (`split_column: yes` is the boolean true), is named by file and line (Snakemake's own errors name neither).
for path in workflow.overwrite_configfiles or ["config/config.yaml"]:
    if os.path.exists(path):
        load_config(path)
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


RUNS = resolve_runs(config, where="config")
check_datasets(config)  # every dataset the config defines can be built: refused here, before Snakemake plans
LAUNCH = validate(config)["launch"]
REPORT = validate(config)["report"]


include: "workflow/rules/common.smk"
include: "workflow/rules/download.smk"
include: "workflow/rules/partition.smk"
include: "workflow/rules/vip.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        "results/report/report.html",
    default_target: True
