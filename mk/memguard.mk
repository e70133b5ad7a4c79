# Memory guard. Unit tests (tests/unit/test_spark_memguard*.py, test_spark_memory_guard_module.py) run
# with `make unit`; this adds the molecule scenario on a lab node with real systemd and a nested Docker engine.
#   make test-memguard    molecule test -s memguard (~2-3 min)

NODE_TEST_TARGETS += test-memguard

.PHONY: test-memguard

test-memguard: setup lab-image ## molecule: arm/switch/stale/proof-test/absent of spark_memory_guard on a lab node
	$(call lab_scenario,memguard,$(MOLECULE_TEST) memguard)
