# Fabric: role sparkfleet.spark.fabric, playbooks/fabric.yml, playbooks/fabric-restore.yml (its README.md).
#   make test-fabric-lab TOPOLOGY=tp3   molecule test -s fabric on one topology lab: check mode on fresh nodes,
#                                       converge, idempotence, check mode, verify, and the topology's faults: on
#                                       cables swapped ports, device policy, restore and the serving guard; on a
#                                       switch (TOPOLOGY=sw4, two serving groups) a port on the wrong rail
#                                       (molecule/fabric/). A lab session of the fleet slot (mk/lab.mk): it waits
#                                       for another session to end, then replaces any topology lab left up.
# Unit tests (tests/unit/test_fabric_*.py) run in `make unit`. In `make test` the site scenarios run the same
# steps: the site scenario's verify imports molecule/fabric/*.yml (molecule/site/README.md).

.PHONY: test-fabric-lab

test-fabric-lab: setup lab-image ## molecule test of the fabric stage alone on one lab (TOPOLOGY=tp3|tp4|sw4)
	@start=$$(date +%s); $(call lab_scenario,$(TOPOLOGY),env SPARK_LAB_TOPOLOGY=$(TOPOLOGY) $(MOLECULE_TEST) fabric fabric-$(TOPOLOGY)) \
	  && echo "test-fabric-lab: $(TOPOLOGY) passed in $$(( $$(date +%s) - start ))s"
