# sparkfleet — developer and CI entry points.
# `make demo` runs the main job on the lab; `make test` runs every test (what CI calls).
# Area-specific targets live in mk/*.mk; each appends its test target to TEST_TARGETS, or to NODE_TEST_TARGETS
# for a molecule scenario on one container of its own; make test runs both beside the site scenario tp3.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.sparkfleet-setup
# molecule test -s <scenario>, keeping the Ansible log in build/logs and printing the failed tasks last
MOLECULE_TEST := $(ROOT)/molecule/test-scenario.sh
PYTHON ?= python3
TOPOLOGY ?= tp3
INVENTORIES := $(sort $(wildcard inventories/*/hosts.yml))
BUILD := $(ROOT)/build
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export PATH := $(BIN):$(PATH)

# make test runs in two lanes, then what needs the machine to itself (test-labs):
#   lane 1  site-tp3, three lab nodes; about a third of its CPU is idle while it waits on stand-ins, dockerd, systemd
#   lane 2  TEST_TARGETS (no lab), then NODE_TEST_TARGETS one after another (a fourth lab node)
#   alone   unit-timing (it asserts wall-clock figures), then site-tp4 and site-sw4 (four lab nodes each)
# Run side by side with the one-node scenarios all at once, the static checks were slower than one after the
# other (592 s against 545 s: both CPU-bound); beside site-tp3 they fill the CPU its waits leave.
TEST_TARGETS := lint syntax render-check unit
NODE_TEST_TARGETS :=

.PHONY: help setup test failures test-nodes test-lane test-labs lint unit unit-timing syntax render-check render validate demo demo-down clean

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sort | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

setup: $(STAMP) ## Create .venv/ with the pinned toolchain (idempotent)

$(STAMP): requirements-dev.txt bench/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) 2>/dev/null || { \
	  echo "setup: installing python3-venv (Debian's python3 ships without ensurepip)"; rm -rf $(VENV); \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv python3-pip >/dev/null \
	  && $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	@# the bench package (editable: its source is the collection's, so an edit needs no reinstall)
	$(PY) -m pip install -q -e $(ROOT)/bench
	@touch $@

lint: setup ## yamllint + ansible-lint (production profile, offline)
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --offline -q

# Two pytest workers: most unit time is stand-in servers and subprocesses waiting, not CPU. A test file stays on
# one worker (--dist loadfile), so the timing tests of one file never run beside each other.
PYTEST_WORKERS ?= 2

unit: setup ## pytest: filters, modules, module_utils, stand-in server, bench (all but the timing tests)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests --ignore=tests/render -m "not timing"

# They mostly sleep on the stand-in's clock (about a sixth of their wall time is CPU), so two workers, one file
# each, keep each other's figures intact; what breaks them is a loaded machine, so they run on their own.
unit-timing: setup ## pytest: the tests that assert wall-clock figures, on their own (make test runs them after unit)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile tests --ignore=tests/render -m timing

syntax: setup ## --syntax-check of every playbook against every shipped inventory
	@for inv in $(INVENTORIES); do \
	  $(BIN)/ansible-playbook -i $$(dirname $$inv) --syntax-check site.yml playbooks/*.yml >/dev/null \
	    || { echo "syntax check failed with $$(dirname $$inv)"; exit 1; }; \
	  echo "syntax ok: $$(dirname $$inv): site.yml and $$(ls playbooks/*.yml | wc -l) playbooks"; \
	done

render-check: setup ## validate + render every shipped and test inventory and check the files
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) tests/render

validate: setup ## Validate one inventory: make validate INV=inventories/tp3-triangle
	$(BIN)/ansible-playbook -i $(or $(INV),inventories/tp3-triangle) playbooks/validate.yml

render: setup ## Render the plan of one inventory: make render INV=... DIR=...
	$(BIN)/ansible-playbook -i $(or $(INV),inventories/tp3-triangle) playbooks/render.yml \
	  -e spark_render_dir=$(or $(DIR),$(BUILD)/render/$(notdir $(or $(INV),inventories/tp3-triangle)))
	@echo "rendered: $(or $(DIR),$(BUILD)/render/$(notdir $(or $(INV),inventories/tp3-triangle)))"

DEMO_INVENTORY = inventories/$(patsubst tp2,tp2-pair,$(patsubst tp3,tp3-triangle,$(patsubst tp4,tp4-ring,$(TOPOLOGY))))

demo: setup lab-image ## The main job on the lab: TOPOLOGY (tp3|tp4) lab, site.yml on it, the quick bench, its summary
	@echo "== sparkfleet demo: $(DEMO_INVENTORY) on the lab"
	@echo "== [1/4] starting the $(TOPOLOGY) lab and its test doubles (molecule/site/README.md)"
	$(MAKE) --no-print-directory site-lab TOPOLOGY=$(TOPOLOGY)
	@echo "== [2/4] site.yml on $$(grep -c 'spark_rank:' $(LAB_STATE)/$(TOPOLOGY)/inventory/hosts.yml) nodes: validate, host, fabric, image, model, serve"
	$(BIN)/ansible-playbook -i $(LAB_STATE)/$(TOPOLOGY)/inventory site.yml -e spark_site_bench=false \
	  -e spark_fabric_report_dir=$(BUILD)/demo/$(TOPOLOGY)/reports
	@echo "== [3/4] the quick bench against the head (points as they finish)"
	rm -rf $(BUILD)/demo/$(TOPOLOGY)/bench
	$(BIN)/sparkfleet-bench --url http://$$(awk '/spark_mgmt_address/ {print $$2; exit}' $(LAB_STATE)/$(TOPOLOGY)/inventory/hosts.yml):8000 \
	  --output-dir $(BUILD)/demo/$(TOPOLOGY)/bench
	@echo "== [4/4] reports"
	@echo "bench report:  $(BUILD)/demo/$(TOPOLOGY)/bench/bench.json (summary.md, points.csv beside it)"
	@echo "bench plots:   $$(ls $(BUILD)/demo/$(TOPOLOGY)/bench/*.png | tr '\n' ' ')"
	@echo "path matrix:   $(BUILD)/demo/$(TOPOLOGY)/reports/fabric-paths.json"
	@echo "lab inventory: $(LAB_STATE)/$(TOPOLOGY)/inventory (status: ansible-playbook -i it playbooks/status.yml; make demo-down removes the lab)"

demo-down: lab-down ## Remove everything make demo started

-include $(sort $(wildcard mk/*.mk))

# The one-node scenarios share nothing (each has its own container, name and molecule state) and spend much of
# their time waiting on systemd, apt and dockerd, so they run side by side; each one's output is printed whole
# when it ends, with its time.
test-nodes: setup lab-image ## The one-node molecule scenarios (host, memory guard, bench schedule) side by side
	@$(MAKE) --no-print-directory -j$(words $(NODE_TEST_TARGETS)) --output-sync=target $(addprefix timed-,$(NODE_TEST_TARGETS))

# A target's output is also kept in build/logs/make-<target>.out; a failed one is listed in FAILED_LIST, innermost
# first, so make test can print the failure again at its very end (CI keeps only the end of the output, and a lane
# that fails early is printed long before the lane beside it ends).
FAILED_LIST := $(BUILD)/logs/failed-targets

timed-%:
	@start=$$(date +%s); mkdir -p $(BUILD)/logs; rc=0; \
	  $(MAKE) --no-print-directory $* 2>&1 | tee $(BUILD)/logs/make-$*.out || rc=$$?; \
	  if [ $$rc -ne 0 ]; then echo "$*" >> $(FAILED_LIST); \
	    echo "=== make $* FAILED after $$(( $$(date +%s) - start )) s"; exit $$rc; fi; \
	  echo "=== make $* passed in $$(( $$(date +%s) - start )) s"

# The first failed target's last lines (its own summary: pytest's, ansible-lint's or molecule's failed tasks).
failures:
	@test -s $(FAILED_LIST) || exit 0; \
	  first=$$(head -n1 $(FAILED_LIST)); \
	  echo "=== failed: $$(tr '\n' ' ' < $(FAILED_LIST))(innermost first); the end of make $$first (whole: build/logs/make-$$first.out):"; \
	  sed -e 's/\x1b\[[0-9;]*m//g' $(BUILD)/logs/make-$$first.out | grep -a -v -E '^\s*$$' | cut -c1-600 | tail -n 60

# The lane beside site-tp3: LANE_TARGETS one after another; AFTER_LANES run alone before site-tp4.
LANE_TARGETS ?= $(NODE_TEST_TARGETS)
AFTER_LANES ?=

test-lane: setup lab-image
	@for t in $(LANE_TARGETS); do $(MAKE) --no-print-directory timed-$$t; done

# Never more than four lab nodes at once. Each lane's output is printed whole when it ends.
test-labs: setup lab-image ## Every lab scenario: site-tp3 beside the one-node scenarios, then site-tp4, site-sw4
	@$(MAKE) --no-print-directory -j2 --output-sync=target timed-test-site-tp3 timed-test-lane
	@for t in $(AFTER_LANES) test-site-tp4 test-site-sw4; do $(MAKE) --no-print-directory timed-$$t; done

test: ## Run every test (CI): site-tp3 beside the static checks and one-node scenarios, then unit-timing, site-tp4, site-sw4
	@all=$$(date +%s); rm -f $(FAILED_LIST); \
	  $(MAKE) --no-print-directory test-labs LANE_TARGETS="$(TEST_TARGETS) $(NODE_TEST_TARGETS)" AFTER_LANES=unit-timing \
	    || { rc=$$?; $(MAKE) --no-print-directory failures; exit $$rc; }; \
	  echo "make test: $(TEST_TARGETS) $(NODE_TEST_TARGETS) unit-timing test-site-tp3 test-site-tp4 test-site-sw4 passed in $$(( $$(date +%s) - all )) s"

clean: ## Remove build artifacts (keeps .venv)
	rm -rf $(BUILD) .cache .pytest_cache
