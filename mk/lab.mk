# The lab: systemd containers standing in for DGX Sparks, cabled by Docker networks (lab/README.md).
#   make lab-up TOPOLOGY=tp4      nodes + networks from inventories/tp4-ring's plan; prints the lab inventory
#   make lab-up TOPOLOGY=sw4      four nodes on one switch, two serving groups (lab/inventories/sw4-two-pairs)
#   make lab-up TOPOLOGY=host     a scenario's own lab (host, memguard, bench_schedule, serve: molecule/<s>/inventory)
#   make lab-down                 removes every container, network and volume labelled sparkfleet.lab
#   make lab-down TOPOLOGY=host   only that lab's slot (a scenario's destroy: the topology lab beside it stays)

LAB_DIR := $(ROOT)/lab
LAB_BUILD := $(BUILD)/lab
LAB_STATE := $(ROOT)/.lab
# Lab sessions sharing one Docker engine must not overlap (container names are host names): each topology
# scenario runs as a session holding the fleet slot's lab lock (lab/lab.py), and the bring-ups and teardowns
# inside it go ahead; outside a session (lab-up, lab-down, the benchmarks' converges) each operation takes the
# same lock. A scenario lab (its own host names and management /24) has a slot and lock of its own, so it runs
# beside a topology lab (make test's lanes).
LAB_SESSION = $(PY) $(LAB_DIR)/lab.py session --
# The labs of the fleet slot: the topologies (host names dgx1...) and the serve scenario's triangle (its cables are
# the triangle's subnets, which one Docker engine holds once).
FLEET_LABS := tp2 tp3 tp4 sw4 serve
# The shipped inventories, and the lab's own switched site (lab/inventories: a test double, not a serving shape).
lab_inventory_tp2 := $(ROOT)/inventories/tp2-pair
lab_inventory_tp3 := $(ROOT)/inventories/tp3-triangle
lab_inventory_tp4 := $(ROOT)/inventories/tp4-ring
lab_inventory_sw4 := $(ROOT)/lab/inventories/sw4-two-pairs
# The scenarios' own labs: inventories without a plan (one node each, management network only), and the serve
# scenario's private triangle.
lab_inventory_host := $(ROOT)/molecule/host/inventory
lab_inventory_memguard := $(ROOT)/molecule/memguard/inventory
lab_inventory_bench_schedule := $(ROOT)/molecule/bench_schedule/inventory
lab_inventory_serve := $(ROOT)/molecule/serve/inventory
lab_inventory_of = $(or $(lab_inventory_$(strip $(1))),$(error TOPOLOGY=$(1): expected tp2, tp3, tp4, sw4 or a \
	scenario lab: host, memguard, bench_schedule, serve))
lab_slot_of = $(if $(filter $(FLEET_LABS),$(strip $(1))),fleet,$(strip $(1)))
LAB_ARGS = --topology $(TOPOLOGY) --inventory $(call lab_inventory_of,$(TOPOLOGY)) --state-dir $(LAB_STATE)/$(TOPOLOGY) \
	--slot $(call lab_slot_of,$(TOPOLOGY))
# lab-down and lab-leftovers act on every lab unless TOPOLOGY is given on the command line.
LAB_SLOT_ARG = $(if $(filter command line,$(origin TOPOLOGY)),--slot $(call lab_slot_of,$(TOPOLOGY)))

# A molecule scenario on a lab, as one session of the lab's slot: the lab inventory first (molecule links it before
# create), then $(2), a command (molecule test -s ... with its environment), with the lab's base image named (the
# scenarios that run it read SPARK_LAB_BASE_IMAGE). $(1) is the lab: a topology or a scenario's own.
lab_scenario = $(PY) $(LAB_DIR)/lab.py inventory --topology $(1) --inventory $(call lab_inventory_of,$(1)) \
	  --state-dir $(LAB_STATE)/$(1) --slot $(call lab_slot_of,$(1)) >/dev/null \
	&& cd $(ROOT) && SPARK_LAB_BASE_IMAGE=$$(cat $(LAB_BUILD)/base-image.tag) \
	  $(PY) $(LAB_DIR)/lab.py session --slot $(call lab_slot_of,$(1)) -- $(2)

.PHONY: engine lab-image lab-up lab-down lab-inventory lab-leftovers

engine: ## Ensure a Docker engine answers (installs docker.io, starts dockerd when needed)
	$(LAB_DIR)/engine.sh

lab-image: engine ## Build (or reuse) the lab node image and the nodes' base image
	$(LAB_DIR)/build-image.sh node $(LAB_BUILD)
	$(LAB_DIR)/build-image.sh base $(LAB_BUILD)

lab-up: setup lab-image ## Start the lab for TOPOLOGY=tp2|tp3|tp4|sw4 and write .lab/<topology>/inventory
	$(PY) $(LAB_DIR)/lab.py up $(LAB_ARGS) \
	  --node-image $$(cat $(LAB_BUILD)/node-image.tag) --base-image $$(cat $(LAB_BUILD)/base-image.tag) \
	  --base-archive $(LAB_BUILD)/base-image-$$(cut -d: -f2 $(LAB_BUILD)/base-image.tag).tar

lab-inventory: setup ## Write .lab/<TOPOLOGY>/inventory without starting anything (molecule links it)
	$(PY) $(LAB_DIR)/lab.py inventory $(LAB_ARGS)

lab-down: setup engine ## Remove every lab's containers, networks and volumes (TOPOLOGY=x: only that lab's slot)
	$(PY) $(LAB_DIR)/lab.py down --state-root $(LAB_STATE) $(LAB_SLOT_ARG)

lab-leftovers: setup engine ## Print (JSON) and fail on what is left labelled for a lab (TOPOLOGY=x: its slot only)
	@$(PY) $(LAB_DIR)/lab.py leftovers $(LAB_SLOT_ARG)
