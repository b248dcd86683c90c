# The two commands a new user types: `make run` and `make test`.
VENV ?= .venv
PYTHON ?= python3
TORCH_VERSION ?= 2.13.0
DGL_VERSION ?= 1.1.3
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
CORES ?= all

export PATH := $(BIN):$(PATH)
export DGLBACKEND := pytorch

.PHONY: run run-slurm slurm-up slurm-down test claims check install metis tcmalloc lint clean gpu gpu-wheels \
	kernel-resources

install: $(STAMP)

# The CPU build of torch (and the DGL that runs with it) is installed first and pinned, so that no other
# requirement pulls a CUDA build or a DGL built for another torch. DGL is only an extra of the package (`dgl`: the
# tests' reference); the tests need it, so it is installed here with them.
$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==$(TORCH_VERSION) dgl==$(DGL_VERSION)
	$(BIN)/python -m pip install -q -e '.[all,test,dgl]'
	@$(MAKE) -s metis tcmalloc
	touch $(STAMP)

# A 32-bit METIS (Debian's libmetis5): the partition stage takes half the memory and ~0.6x the time of the 64-bit
# METIS inside pymetis (sylvie/partition/metis_library.py), which is used where none is installed. Installed here
# when running as root with apt; elsewhere a note says how (conda: `conda install -c conda-forge metis`).
metis:
	@if /sbin/ldconfig -p 2>/dev/null | grep -q 'libmetis\.so'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's libmetis5 (a 32-bit METIS: half the partition stage's memory)"; \
	  apt-get install -y -q libmetis5 >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libmetis5 >/dev/null 2>&1; } || \
	  echo "note: apt-get could not install libmetis5; partitioning uses pymetis's 64-bit METIS (twice the memory)"; \
	else echo "note: no 32-bit METIS found; partitioning uses pymetis's 64-bit METIS (twice the memory). For half:" \
	  "sudo apt-get install libmetis5 (Debian, Ubuntu) or conda install -c conda-forge metis"; fi

# tcmalloc (Debian's libtcmalloc-minimal4), which `sylvie launch` preloads into the ranks (launch.allocator auto), as
# PyTorch's CPU launcher does: full-graph epochs as fast as with any allocator measured (benchmarks/allocators.py).
# Installed here when running as root with apt; elsewhere the ranks use glibc with huge pages and a note says how.
tcmalloc:
	@if /sbin/ldconfig -p 2>/dev/null | grep -q 'libtcmalloc'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian's libtcmalloc-minimal4 (the ranks' memory allocator)"; \
	  apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1; } || \
	  echo "note: apt-get could not install libtcmalloc-minimal4; the ranks use glibc's malloc with huge pages"; \
	else echo "note: no tcmalloc found; the ranks use glibc's malloc with huge pages. For tcmalloc:" \
	  "sudo apt-get install libtcmalloc-minimal4 (Debian, Ubuntu) or conda install -c conda-forge gperftools"; fi

# CONFIG=path/to/config.yaml runs that config instead of config/config.yaml (in its place, not merged with it)
CONFIG ?=
CONFIG_FLAGS := $(if $(CONFIG),--configfile $(CONFIG) --replace-workflow-config)
# Snakemake reads a --configfile before the Snakefile runs, and meets a missing file or a folder with a traceback:
# each file is read first as the pipeline reads it, and what it configures checked whole, an error in one line
# (sylvie/pipeline_config.py)
CONFIG_CHECK := $(if $(CONFIG),$(BIN)/python -m sylvie.pipeline_config $(CONFIG))

run: $(STAMP)
	@$(CONFIG_CHECK)
	$(BIN)/snakemake --cores $(CORES) $(CONFIG_FLAGS)
	@echo "Report: $(abspath results/report/report.html)"

# The pipeline as Slurm jobs (workflow/profiles/slurm); `make slurm-up` starts a Slurm on this machine (root).
run-slurm: $(STAMP)
	@$(CONFIG_CHECK)
	$(BIN)/snakemake --profile workflow/profiles/slurm $(CONFIG_FLAGS)
	@echo "Report: $(abspath results/report/report.html)"

slurm-up:
	workflow/scripts/slurm-local-up.sh

slurm-down:
	workflow/scripts/slurm-local-down.sh

# Lint first, then every tier but the claims, in TEST_WORKERS processes (pytest-xdist; each test module runs whole in
# one of them, so that its set-up is made once, longest modules first: tests/conftest.py's order, which
# --no-loadscope-reorder keeps instead of xdist's by number of tests); --durations lists the slowest tests.
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -q -rs --durations=12 -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder \
	  -m "not claims" tests

# The claims: the default config's accuracies (docs/full-graph.md, docs/sampled.md: its 26 trainings of 200 epochs on
# 4 ranks, trained as the pipeline trains them) and the README's own-graph example against Planetoid Cora (~6
# minutes on 2 cores). CI runs it after make test.
claims: $(STAMP)
	$(BIN)/python -m pytest -q -rs -m claims tests

# The fast loop, after every edit: the unit tier (in-process, no torchrun, each test well under a second; one that
# takes longer belongs to the slow tier), in TEST_WORKERS processes, test by test (its time: docs/testing.md).
check: $(STAMP)
	$(BIN)/python -m pytest -q -m unit --durations=5 -n $(TEST_WORKERS) --dist load tests

# Our Numba-CUDA kernels' registers, shared memory and spills for sm_90 (ARCH=sm_80 ...), without a GPU: numba-cuda's
# PTX through `ptxas -v` (the test extra's nvidia-cuda-nvcc-cu12 brings libNVVM and ptxas); benchmarks/README.md.
ARCH ?= sm_90
kernel-resources: $(STAMP)
	$(BIN)/python benchmarks/kernel_resources.py --arch $(ARCH)

# The GPU check, one call on a GPU machine that has CUDA, PyTorch, numba, numba-cuda and pyarrow (and nothing of ours:
# no DGL, no Snakemake, no network): installs this checkout without dependencies, plus the wheels in .whl/ where a
# module they bring is missing, then runs the GPU test tier (pytest -m gpu) and the GPU benchmarks (lowbit.py --device
# cuda, gather.py, gpu_epoch.py --profile, feature_store.py), each bounded, within 8 minutes; DIR gets summary.md and one log per step. Without a
# GPU it runs the CUDA simulator's tests and reports the GPU tests as skipped (workflow/scripts/gpu-check.sh).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
gpu:
	@test -n "$(OUT)" || { echo "usage: make gpu OUT=DIR (the folder for summary.md and the logs)"; exit 2; }
	workflow/scripts/gpu-check.sh "$(OUT)" "$(GPU_PYTHON)"

# What such a GPU machine lacks of our run-time dependencies, as pinned wheels for its Python (3.12, manylinux
# x86_64) into .whl/ (ignored by git), to carry there with the checkout: jsonschema and what it needs that is not
# there (the config's validation), pymetis (METIS for the partition stage). Its image has the rest (pyyaml, tqdm,
# scipy, matplotlib, pytest, pytest-timeout, pytest-xdist, PyG); `ogb`, DGL and Snakemake stay behind (not used).
GPU_WHEELS ?= jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 \
	pymetis==2025.2.2
GPU_WHEEL_PYTHON ?= 3.12
gpu-wheels:
	rm -rf .whl
	$(GPU_PYTHON) -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_WHEEL_PYTHON) \
	  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
	  --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  --platform manylinux1_x86_64 -d .whl $(GPU_WHEELS)
	@echo "wheels for the GPU machine (carry .whl with the checkout, then: make gpu OUT=DIR):"
	@cd .whl && ls -1s --block-size=K *.whl

lint: $(STAMP)
	$(BIN)/ruff check sylvie tests benchmarks
	$(BIN)/snakemake --lint

clean:
	rm -rf results data/datasets data/partitions .snakemake
