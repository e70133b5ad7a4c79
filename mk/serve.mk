# Serve (issue 7). Unit tests (tests/serve/) run with `make unit`; this adds the lab scenario.
#   make test-serve    molecule test -s serve: a private 3-node lab (serve-dgx1..3, 10.0.47.0/24) serves the TP3
#                      profile with the stand-in image (TEST DOUBLE); idempotence, status, faults, stop. Measured
#                      on the 2-core build machine at load 15-18: create+prepare ~3.5 min, converge 1.7 min,
#                      idempotence 1.2 min, verify ~14 min (the four faults are 9 serve/stop/status runs) = ~21 min

# Not yet in `make test`: the scenario has run step by step (create, converge, idempotence, verify, destroy)
# but never as one uninterrupted `molecule test`, and at ~21 min on a loaded box it would push CI past its
# budget. It joins TEST_TARGETS once it shares a topology lab with the fabric and image scenarios.

.PHONY: test-serve

test-serve: setup lab-image ## molecule: serve/status/stop, idempotence and the start faults on a private TP3 lab
	cd $(ROOT) && SPARK_LAB_NODE_IMAGE=$$(cat $(BUILD)/lab/node-image.tag) \
	  SPARK_LAB_BASE_IMAGE=$$(cat $(BUILD)/lab/base-image.tag) \
	  PATH=$(BIN):$$PATH $(BIN)/molecule test -s serve

.PHONY: bench-start

# Benchmark (not a test): serve.yml start -> ready against a fixed stand-in startup time S on the serve lab
# (three nodes; the issue asks for the tp4 lab, see roles/serve/README.md). Creates the lab, prints the figures
# (last line one JSON object), destroys the lab.
BENCH_START_S ?= 5
bench-start: setup lab-image ## Figures: serve.yml start-to-ready, orchestration overhead, readiness detection latency
	cd $(ROOT) && export SPARK_LAB_NODE_IMAGE=$$(cat $(BUILD)/lab/node-image.tag) \
	  SPARK_LAB_BASE_IMAGE=$$(cat $(BUILD)/lab/base-image.tag) SERVE_LAB_BASE_IMAGE=$$(cat $(BUILD)/lab/base-image.tag) \
	  MOLECULE_PROJECT_DIRECTORY=$(ROOT) PATH=$(BIN):$$PATH ANSIBLE_ROLES_PATH=$(ROOT)/roles \
	  ANSIBLE_LIBRARY=$(ROOT)/library ANSIBLE_MODULE_UTILS=$(ROOT)/module_utils ANSIBLE_FILTER_PLUGINS=$(ROOT)/filter_plugins \
	  && $(BIN)/molecule create -s serve \
	  && $(PY) molecule/serve/bench_start.py --inventory molecule/serve/inventory --head serve-dgx1 --startup-s $(BENCH_START_S); \
	  rc=$$?; $(BIN)/molecule destroy -s serve; exit $$rc
