# The lab: systemd containers standing in for DGX Sparks, cabled by Docker networks (lab/README.md).
#   make lab-up TOPOLOGY=tp4      nodes + networks from inventories/tp4-ring's plan; prints the lab inventory
#   make lab-up TOPOLOGY=sw4      four nodes on one switch, two serving groups (lab/inventories/sw4-two-pairs)
#   make lab-down                 removes every container, network and volume labelled sparkfleet.lab

LAB_DIR := $(ROOT)/lab
LAB_BUILD := $(BUILD)/lab
LAB_STATE := $(ROOT)/.lab
# Lab sessions sharing one Docker engine must not overlap (container names are host names): each scenario runs
# as a session holding the machine's one lab lock (lab/lab.py), and the bring-ups and teardowns inside it
# go ahead; outside a session (lab-up, lab-down, the benchmarks' converges) each operation takes the same lock.
LAB_SESSION = $(PY) $(LAB_DIR)/lab.py session --
# The shipped inventories, and the lab's own switched site (lab/inventories: a test double, not a serving shape).
lab_inventory_tp2 := $(ROOT)/inventories/tp2-pair
lab_inventory_tp3 := $(ROOT)/inventories/tp3-triangle
lab_inventory_tp4 := $(ROOT)/inventories/tp4-ring
lab_inventory_sw4 := $(ROOT)/lab/inventories/sw4-two-pairs
lab_inventory_of = $(or $(lab_inventory_$(strip $(1))),$(error TOPOLOGY=$(1): expected tp2, tp3, tp4 or sw4))
LAB_ARGS = --topology $(TOPOLOGY) --inventory $(call lab_inventory_of,$(TOPOLOGY)) --state-dir $(LAB_STATE)/$(TOPOLOGY)

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

lab-down: setup engine ## Remove every container, network and volume the lab created
	$(PY) $(LAB_DIR)/lab.py down --state-root $(LAB_STATE)

lab-leftovers: setup engine ## Fail when any container, network or volume labelled for the lab remains
	$(PY) $(LAB_DIR)/lab.py leftovers
