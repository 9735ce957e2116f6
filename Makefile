# The single entry point: `make demo` and `make test` each work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_STORE := $(VENV)/demo-sigs.parquet

.PHONY: demo test soak lint docs bench bench-corpora bench-exact bench-scale bench-scale-100m bench-card bench-scaling \
	bench-cluster corpora clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Marker files record which extras are installed, so a second run installs nothing. The plot extra (matplotlib,
# for dedup eval --plot) comes with dedup itself, so demo, test and CI have it; so does the fast extra (numba, the
# compiled signing kernel), compiled here, once, into numba's cache, so that no user's run pays for it.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[fast,plot]'
	$(BIN)/python -c 'from dedup_cli.kernel.compiled import compile_kernel; compile_kernel()'
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[fast,plot,dask,s3,test]'
	touch $@

$(VENV)/.installed-dask: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[fast,plot,dask]'
	touch $@

$(VENV)/.installed-lint: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[lint]'
	touch $@

# The demo signs the sample corpora, finds their groups (on both engines), measures their accuracy into a picture
# (.venv/demo-eval.png) and writes the page to review them before deleting anything (.venv/demo-review.html).
demo: $(VENV)/.installed-dask
	$(BIN)/dedup sign sample_corpora --exclude SOURCE -o $(DEMO_STORE)
	$(BIN)/dedup find $(DEMO_STORE) --threshold 0.5 --bits 2
	$(BIN)/dedup find $(DEMO_STORE) --threshold 0.5 --bits 2 -q -o $(VENV)/demo-local.jsonl
	$(BIN)/dedup find $(DEMO_STORE) --threshold 0.5 --bits 2 -q -o $(VENV)/demo-dask.jsonl --engine dask --workers 2
	cmp $(VENV)/demo-local.jsonl $(VENV)/demo-dask.jsonl && echo "find --engine dask --workers 2: the same groups"
	$(BIN)/dedup eval $(DEMO_STORE) --threshold 0.5 --bits 2 --plot $(VENV)/demo-eval.png
	$(BIN)/dedup review $(DEMO_STORE) --threshold 0.5 --bits 2 -o $(VENV)/demo-review.html
	@echo "the groups to look at before deleting anything, one page: file://$(abspath $(VENV)/demo-review.html)"

# The core install at the oldest versions pyproject.toml allows (tests/oldest-requirements.txt), in a virtualenv
# of its own, without dedup installed: tests/test_oldest_versions.py runs this checkout with it.
OLDEST_VENV ?= .venv-oldest
$(OLDEST_VENV)/.installed: tests/oldest-requirements.txt
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install --quiet --only-binary=:all: -r tests/oldest-requirements.txt
	touch $@

# The whole suite, a test file at a time in two processes (the machines it runs on have two cores or more); a
# file's tests run in order in one process, so the Dask tests of a file share one cluster.
test: $(VENV)/.installed-test $(OLDEST_VENV)/.installed
	DEDUP_OLDEST_PYTHON=$(abspath $(OLDEST_VENV))/bin/python $(BIN)/python -m pytest -q -n 2 --dist loadfile

# The nightly store soaked: 30 nights of every kind of edit on 10^4 documents, signed into one store on each
# engine, find and filter checked against exact truth every night (bench/soak.py; bench/RESULTS-soak.md). The short
# version of the same simulation runs in make test (tests/engines/test_nightly_store.py).
SOAK_NIGHTS ?= 30
SOAK_DOCUMENTS ?= 10000
soak: $(VENV)/.installed-test
	$(BENCH_LOCK) $(BIN)/python bench/soak.py --nights $(SOAK_NIGHTS) --documents $(SOAK_DOCUMENTS) \
		--out bench/RESULTS-soak.md

lint: $(VENV)/.installed-lint
	$(BIN)/ruff check dedup_cli tests
	$(BIN)/mypy dedup_cli

# docs/cli.md and docs/api.md, written from the code (Click's --help, the public API's docstrings); tests/test_docs.py
# fails when they are out of date.
docs: $(VENV)/.installed
	$(BIN)/python docs/generate_reference.py

corpora:
	$(PYTHON) scripts/build_corpora.py --out sample_corpora

# The benchmark: its own virtualenv (dedup plus the peers it is compared with), corpora built into the
# git-ignored bench/data/ (deterministic; rebuilt only when make_corpus.py or its parameters change), the
# side-by-side comparison (bench/RESULTS.md), signing (bench/RESULTS-sign.md: the kernel auto chooses at every
# size, the first run after an install, signing against reading, end to end against the peers, start-up, beside
# dedup at BENCH_BASELINE), then find at scale, the languages (bench/RESULTS-languages.md: what w means per
# script, planted copies found per language, word hashing beside BENCH_BASELINE; it also writes a planted
# multilingual corpus), and the accuracy tables from dedup eval --truth on the same corpora and the multilingual
# one (their truth.tsv), with the main venv; then README.md's How fast section from the results
# (bench/readme_numbers.py). Every measurement holds BENCH_LOCK, so benchmarks on a shared machine take turns.
BENCH_VENV ?= bench/.venv
BENCH_BIN := $(BENCH_VENV)/bin
BENCH_SIZES ?= 10000 100000
BENCH_REPEAT ?= 3
BENCH_BASELINE ?= main
BENCH_LOCK ?= $(shell command -v flock >/dev/null 2>&1 && echo flock /tmp/dedup-bench.lock)
BENCH_CORPORA := $(foreach size,$(BENCH_SIZES),bench/data/corpus-$(size))
# Corpora of long documents (300-3000 words; 74 MB and 741 MB) for the signing benchmark, written by the generator
# of the long-document benchmark corpus, which is kept outside this repository (it is not ours to copy):
# BENCH_LONG_GENERATOR names its make_corpus.py (found beside this checkout by default); without it, sign_bench.py
# runs on the corpora above only. About 8 minutes, once (most of it the generator's exact truth).
BENCH_LONG_GENERATOR ?= $(wildcard ../shared/bench-corpus/make_corpus.py)
BENCH_LONG_SIZES ?= 10000 100000
BENCH_LONG_CORPORA := $(if $(BENCH_LONG_GENERATOR),$(foreach size,$(BENCH_LONG_SIZES),bench/data/long-$(size)))

$(BENCH_BIN)/python:
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/python -m pip install --quiet --upgrade pip

$(BENCH_VENV)/.installed: $(BENCH_BIN)/python pyproject.toml bench/requirements.txt
	$(BENCH_BIN)/python -m pip install --quiet -e '.[fast]' -r bench/requirements.txt
	$(BENCH_BIN)/python -c 'from dedup_cli.kernel.compiled import compile_kernel; compile_kernel()'
	touch $@

bench-corpora: $(BENCH_VENV)/.installed $(BENCH_LONG_CORPORA)
	for size in $(BENCH_SIZES); do $(BENCH_BIN)/python bench/make_corpus.py --docs $$size || exit 1; done

bench/data/long-%/meta.json: $(BENCH_LONG_GENERATOR) | $(BENCH_VENV)/.installed
	$(BENCH_LOCK) $(BENCH_BIN)/python $(BENCH_LONG_GENERATOR) --docs $* --seed 1 --out bench/data/long-$* --jsonl

bench/data/long-%: bench/data/long-%/meta.json
	@true

bench: bench-corpora $(VENV)/.installed
	$(BENCH_LOCK) $(BENCH_BIN)/python bench/compare.py --corpus $(BENCH_CORPORA) --repeat $(BENCH_REPEAT) \
		--out bench/RESULTS.md
	$(BENCH_LOCK) $(BENCH_BIN)/python bench/sign_bench.py --corpus $(BENCH_CORPORA) --long-corpus $(BENCH_LONG_CORPORA) \
		--repeat $(BENCH_REPEAT) --baseline $(BENCH_BASELINE) --out bench/RESULTS-sign.md
	$(BENCH_LOCK) $(BIN)/python bench/find_scale.py --out bench/RESULTS-find.md
	$(BENCH_LOCK) $(BIN)/python bench/languages.py --corpus $(firstword $(BENCH_CORPORA)) \
		--baseline $(BENCH_BASELINE) --accuracy-corpus bench/data/languages --out bench/RESULTS-languages.md
	$(BENCH_LOCK) $(BIN)/python bench/accuracy.py --corpus $(BENCH_CORPORA) bench/data/languages \
		--out bench/RESULTS-accuracy.md
	$(BENCH_LOCK) $(BIN)/python bench/triples.py --corpus $(firstword $(BENCH_CORPORA)) --baseline $(BENCH_BASELINE) \
		--section bench/RESULTS-accuracy.md
	$(BIN)/python bench/readme_numbers.py
	@echo "wrote bench/RESULTS.md, bench/RESULTS-sign.md, bench/RESULTS-find.md, bench/RESULTS-languages.md," \
		"bench/RESULTS-accuracy.md, and README.md's How fast"

# The exact checks of find beside BENCH_BASELINE (bench/RESULTS-exact.md): on a real, repetitive corpus, the
# README, CHANGELOG and LICENSE files of a few hundred npm packages at three versions each (fetched once with npm pack
# into the git-ignored bench/data/npm, at the versions bench/npm-specs.txt pins), with and without --verify, and on
# the benchmark corpora where they exist (bench/data/long-10000 comes from BENCH_LONG_GENERATOR).
bench-exact: bench-corpora $(VENV)/.installed
	test -d bench/data/npm/files || $(BIN)/python bench/npm_corpus.py
	$(BENCH_LOCK) $(BIN)/python bench/exact_checks.py --baseline $(BENCH_BASELINE) --out bench/RESULTS-exact.md

# find at 10^6 and 10^7 documents with the local engine and the Dask engine on 1 and 2 workers (about 15 minutes,
# 2.8 GB of synthetic stores in bench/data/), and at 10^8 documents with the Dask engine on 2 workers
# (bench-scale-100m: a 27 GB store built once into bench/data/, up to an hour); each under the shared lock so that
# no two benchmarks overlap on this machine. Every run appends its JSON line to bench/scale-runs.jsonl, and
# bench/RESULTS-scale.md is written from the latest run of each configuration there.
BENCH_SCALE_SIZES ?= 1000000 10000000

bench-scale: $(VENV)/.installed-dask
	flock /tmp/dedup-bench.lock $(BIN)/python bench/scale.py --sizes $(BENCH_SCALE_SIZES) --threshold 0.55 \
	  --log bench/scale-runs.jsonl --out bench/RESULTS-scale.md
	$(BIN)/python bench/readme_numbers.py

bench-scale-100m: $(VENV)/.installed-dask
	flock /tmp/dedup-bench.lock $(BIN)/python bench/scale.py --sizes 100000000 --engines dask --workers 2 \
	  --threshold 0.8 --memory-limit 3GiB --log bench/scale-runs.jsonl --out bench/RESULTS-scale.md

# The card's command (default sign, then find --threshold 0.5 --bits 2) at 10^6 and 10^7 short records with planted
# near-duplicates, local -j 2 and Dask on two loopback hosts: wall, CPU, every process's peak memory and reads,
# candidates and precision and recall beside the plan (the top of bench/RESULTS-scale.md). BENCH_CARD_SIZES=100000000
# adds 10^8: a 14 GB corpus and a 27 GB store in bench/data/, about 10 minutes on the local engine.
BENCH_CARD_SIZES ?= 1000000 10000000

bench-card: $(VENV)/.installed-dask
	flock /tmp/dedup-bench.lock $(BIN)/python bench/card_scale.py --sizes $(BENCH_CARD_SIZES)

# sign (long files, short JSON Lines records) and find (local, Dask) at -j / --workers 1, 2 and every power of two
# up to the cores: wall time, speed-up, the serial share (the driver's CPU beyond start-up over all processes' CPU)
# and CPU per document (bench/RESULTS-scaling.md). The corpora and stores are built first into bench/data/
# (deterministic, no network; the long files by BENCH_LONG_GENERATOR when there is one, else by the script); the
# measurements hold the shared lock. BENCH_SCALING_SIZES, e.g. "--short-sizes 10000000 --find-sizes 10000000", for
# larger runs; about 10 minutes at the defaults on 2 cores, once the corpora exist.
BENCH_SCALING_SIZES ?=
BENCH_SCALING_INPUTS = $(if $(BENCH_LONG_GENERATOR),--long-generator $(BENCH_LONG_GENERATOR)) $(BENCH_SCALING_SIZES)

bench-scaling: $(VENV)/.installed-dask
	$(BENCH_LOCK) $(BIN)/python bench/scaling.py --prepare $(BENCH_SCALING_INPUTS)
	$(BENCH_LOCK) $(BIN)/python bench/scaling.py $(BENCH_SCALING_INPUTS) --out bench/RESULTS-scaling.md
	$(BIN)/python bench/readme_numbers.py

# The Dask engine on workers of separate hosts (loopback addresses 127.0.0.2, .3, ...) against the local engine:
# sign and find of 10^6 short records, find on 2 and 4 hosts and of a store in a local S3 server; wall, CPU of
# every process and bytes moved, appended to bench/RESULTS-scaling.md (about 10 minutes on 2 cores).
bench-cluster: $(VENV)/.installed-test
	$(BENCH_LOCK) $(BIN)/python bench/cluster.py --out bench/RESULTS-scaling.md --append

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
