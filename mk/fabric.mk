# Fabric: role sparkfleet.spark.fabric, playbooks/fabric.yml, playbooks/fabric-restore.yml (its README.md).
#   make test-fabric-lab TOPOLOGY=tp3   one lab session: converge, idempotence, check mode, verify, faults (swapped
#                                       cables, device policy, restore) and serving-guard tests (molecule/fabric/), then
#                                       lab-down. TOPOLOGY=sw4: two serving groups on one switch, verify and a port
#                                       on the wrong rail (switched.yml). A lab session (the one lab lock, mk/lab.mk); waits (never tears
#                                       down) while a lab someone else started is up (FABRIC_LAB_WAIT s).
# Unit tests (tests/unit/test_fabric_*.py) run in `make unit`. In `make test` the site scenarios run the same
# steps: the site scenario's verify imports molecule/fabric/*.yml on tp3 (molecule/site/README.md).

# Seconds to wait (polling every 30 s) for a lab someone else started to go away.
FABRIC_LAB_WAIT ?= 1800
FABRIC_LAB_INV = $(LAB_STATE)/$(TOPOLOGY)/inventory
FABRIC_PLAYBOOK = $(BIN)/ansible-playbook -i $(FABRIC_LAB_INV)
# The checks after converge, idempotence and check mode (molecule/fabric/<step>.yml). The switched lab (two
# serving groups on one switch) has no cable to swap: its fault is a port on the wrong rail.
FABRIC_LAB_STEPS := verify faults serving-guard
FABRIC_LAB_STEPS_sw4 := verify switched

.PHONY: test-fabric-lab fabric-lab-session

test-fabric-lab: setup lab-image ## Fabric converge/idempotence/verify/swap/restore on one lab (TOPOLOGY=tp3|tp4|sw4)
	$(LAB_SESSION) $(MAKE) --no-print-directory fabric-lab-session TOPOLOGY=$(TOPOLOGY)

fabric-lab-session:
	@waited=0; while [ -n "$$(docker ps -aq --filter label=sparkfleet.lab)" ]; do \
	  if [ $$waited -ge $(FABRIC_LAB_WAIT) ]; then \
	    echo "test-fabric-lab: another lab is still up after $${waited}s ($$(docker ps -a --filter label=sparkfleet.lab --format '{{.Names}}' | tr '\n' ' ')); not touching it"; exit 1; fi; \
	  echo "test-fabric-lab: another lab is up; waiting ($${waited}s)"; sleep 30; waited=$$((waited + 30)); done
	@mkdir -p $(BUILD); start=$$(date +%s); trap '$(MAKE) --no-print-directory lab-down >/dev/null' EXIT; \
	$(MAKE) --no-print-directory lab-up TOPOLOGY=$(TOPOLOGY) >/dev/null; \
	echo "=== fabric check mode on fresh nodes"; $(FABRIC_PLAYBOOK) playbooks/fabric.yml --check --skip-tags verify >$(BUILD)/fabric-check-fresh.log || { tail -40 $(BUILD)/fabric-check-fresh.log; exit 1; }; \
	for node in $$(docker ps --filter label=sparkfleet.lab --format '{{.Names}}'); do \
	  if docker exec $$node test -e /etc/netplan/40-cx7.yaml; then echo "fabric: check mode wrote $$node:/etc/netplan/40-cx7.yaml"; exit 1; fi; done; \
	echo "=== fabric converge"; $(FABRIC_PLAYBOOK) playbooks/fabric.yml >$(BUILD)/fabric-converge.log || { tail -40 $(BUILD)/fabric-converge.log; exit 1; }; \
	echo "=== fabric idempotence"; $(FABRIC_PLAYBOOK) playbooks/fabric.yml >$(BUILD)/fabric-idempotence.log || { tail -40 $(BUILD)/fabric-idempotence.log; exit 1; }; \
	if grep -E '^(dgx|localhost).*changed=[1-9]' $(BUILD)/fabric-idempotence.log; then \
	  grep -E '^(changed|TASK)' $(BUILD)/fabric-idempotence.log | grep -B1 '^changed' ; echo "fabric: second run changed something"; exit 1; fi; \
	echo "=== fabric check mode"; $(FABRIC_PLAYBOOK) playbooks/fabric.yml --check --diff >$(BUILD)/fabric-check.log || { tail -40 $(BUILD)/fabric-check.log; exit 1; }; \
	if grep -E '^(dgx|localhost).*changed=[1-9]' $(BUILD)/fabric-check.log; then echo "fabric: check mode reported changes"; exit 1; fi; \
	for step in $(or $(FABRIC_LAB_STEPS_$(TOPOLOGY)),$(FABRIC_LAB_STEPS)); do \
	  echo "=== fabric $$step"; \
	  $(FABRIC_PLAYBOOK) molecule/fabric/$$step.yml >$(BUILD)/fabric-$$step.log || { tail -60 $(BUILD)/fabric-$$step.log; exit 1; }; \
	done; \
	echo "test-fabric-lab: $(TOPOLOGY) passed in $$(( $$(date +%s) - start ))s"
