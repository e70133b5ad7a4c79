# sparkfleet — developer and CI entry points.
# `make demo` runs the main job on the lab; `make test` runs every test (what CI calls).
# Area-specific targets live in mk/*.mk; each appends its test target to TEST_TARGETS.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
VENV := $(ROOT)/.venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
STAMP := $(VENV)/.sparkfleet-setup
PYTHON ?= python3
TOPOLOGY ?= tp3
INVENTORIES := $(sort $(wildcard inventories/*/hosts.yml))
BUILD := $(ROOT)/build
export ANSIBLE_CONFIG := $(ROOT)/ansible.cfg
export PATH := $(BIN):$(PATH)

TEST_TARGETS := lint unit syntax render-check

.PHONY: help setup test lint unit syntax render-check render validate demo demo-down clean

help: ## List the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | sort | awk -F':.*## ' '{printf "  %-22s %s\n", $$1, $$2}'

setup: $(STAMP) ## Create .venv/ with the pinned toolchain (idempotent)

$(STAMP): requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	@touch $@

lint: setup ## yamllint + ansible-lint (production profile, offline)
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --offline -q

unit: setup ## pytest: filters, modules, module_utils, stand-in server, bench
	$(PY) -m pytest -q tests --ignore=tests/render

syntax: setup ## --syntax-check of every playbook against every shipped inventory
	@for inv in $(INVENTORIES); do \
	  $(BIN)/ansible-playbook -i $$(dirname $$inv) --syntax-check site.yml playbooks/*.yml >/dev/null \
	    || { echo "syntax check failed with $$(dirname $$inv)"; exit 1; }; \
	  echo "syntax ok: $$(dirname $$inv): site.yml and $$(ls playbooks/*.yml | wc -l) playbooks"; \
	done

render-check: setup ## validate + render every shipped and test inventory and check the files
	$(PY) -m pytest -q tests/render

validate: setup ## Validate one inventory: make validate INV=inventories/tp3-triangle
	$(BIN)/ansible-playbook -i $(or $(INV),inventories/tp3-triangle) playbooks/validate.yml

render: setup ## Render the plan of one inventory: make render INV=... DIR=...
	$(BIN)/ansible-playbook -i $(or $(INV),inventories/tp3-triangle) playbooks/render.yml \
	  -e spark_render_dir=$(or $(DIR),$(BUILD)/render/$(notdir $(or $(INV),inventories/tp3-triangle)))
	@echo "rendered: $(or $(DIR),$(BUILD)/render/$(notdir $(or $(INV),inventories/tp3-triangle)))"

DEMO_INVENTORY = inventories/$(patsubst tp2,tp2-pair,$(patsubst tp3,tp3-triangle,$(patsubst tp4,tp4-ring,$(TOPOLOGY))))

demo: setup lab-image ## The main job on the lab: render the TOPOLOGY (tp3|tp4) plan, start the lab, converge the fabric
	@echo "== sparkfleet demo: $(DEMO_INVENTORY) -> the lab"
	$(BIN)/ansible-playbook -i $(DEMO_INVENTORY) playbooks/render.yml -e spark_render_dir=$(BUILD)/demo/$(TOPOLOGY)/render
	@echo "== starting the lab ($(TOPOLOGY))"
	$(MAKE) --no-print-directory lab-up TOPOLOGY=$(TOPOLOGY)
	@echo "== converging the fabric on $$(grep -c 'spark_rank:' $(LAB_STATE)/$(TOPOLOGY)/inventory/hosts.yml) nodes"
	$(BIN)/ansible-playbook -i $(LAB_STATE)/$(TOPOLOGY)/inventory playbooks/fabric.yml \
	  -e spark_fabric_report_dir=$(BUILD)/demo/$(TOPOLOGY)/reports
	@echo "== plan and per-node files: $(BUILD)/demo/$(TOPOLOGY)/render"
	@echo "== path matrix: $(BUILD)/demo/$(TOPOLOGY)/reports/fabric-paths.json"
	@echo "== lab inventory: $(LAB_STATE)/$(TOPOLOGY)/inventory (make demo-down removes the lab)"

demo-down: lab-down ## Remove everything make demo started

-include $(sort $(wildcard mk/*.mk))

test: ## Run every test (CI)
	@for t in $(TEST_TARGETS); do echo "=== make $$t"; $(MAKE) --no-print-directory $$t; done
	@echo "make test: all of $(TEST_TARGETS) passed"

clean: ## Remove build artifacts (keeps .venv)
	rm -rf $(BUILD) .cache .pytest_cache
