# Bench. Tests live in tests/bench/ and run with `make unit`; these targets are extra.
#   make bench-client        our client vs llama-benchy against the stand-in (figures, not a test)
#   make test-bench          only the bench tests (the same ones `make unit` runs)
#   make test-bench-schedule molecule: install the scheduled benchmark on a lab node and run the unit once

BENCH_BUILD := $(BUILD)/bench-client
# Where the checkout keeps the sparkfleet_bench package (the venv's editable install may be another checkout's).
BENCH_PACKAGE_PARENT := $(ROOT)/collections/ansible_collections/sparkfleet/spark/plugins/module_utils
BENCHY_VENV := $(BUILD)/llama-benchy-venv
BENCHY_VERSION := 0.4.0
BENCH_STREAMS ?= 1,8,16x5,64
BENCH_RUNS ?= 3

NODE_TEST_TARGETS += test-bench-schedule

.PHONY: bench-client test-bench test-bench-schedule

$(BENCHY_VENV)/.installed:
	$(PYTHON) -m venv $(BENCHY_VENV)
	$(BENCHY_VENV)/bin/pip install -q llama-benchy==$(BENCHY_VERSION)
	@touch $@

bench-client: setup $(BENCHY_VENV)/.installed ## Our bench client vs llama-benchy on the stand-in (TTFT/tok/s error, CPU)
	@# pip byte-compiled llama-benchy; compile ours too, or every run pays for it (PYTHONDONTWRITEBYTECODE may be set)
	$(PY) -m compileall -q $(ROOT)/collections/ansible_collections/sparkfleet/spark/plugins/module_utils $(ROOT)/tests/bench \
	  $(ROOT)/tests/unit/conftest.py
	PYTHONPATH=$(ROOT)/tests:$(BENCH_PACKAGE_PARENT) $(PY) tests/bench/compare_clients.py compare --benchy-venv $(BENCHY_VENV) --work $(BENCH_BUILD) \
	  --streams $(BENCH_STREAMS) --runs $(BENCH_RUNS)

test-bench: setup ## Only the bench tests (stand-in on loopback, ~1-2 min)
	$(PY) -m pytest -q tests/bench

test-bench-schedule: setup lab-image ## molecule: the scheduled benchmark unit, once, on a lab node
	$(call lab_scenario,bench_schedule,$(MOLECULE_TEST) bench_schedule)
