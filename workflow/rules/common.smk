# Paths shared by the rules, derived from the resolved runs.


def run_dirs():
    return [f"results/{r.name}/seed{s}" for r in RUNS.values() for s in r.train["seeds"]]


def partition_dir(run_name):
    r = RUNS[run_name]
    return f"data/partitions/{r.dataset}/{r.partition_id}"


def dataset_dir(run_name):
    return f"data/datasets/{RUNS[run_name].dataset}"
