# Memory guard. Unit tests (tests/unit/test_spark_memguard*.py, test_spark_memory_guard_module.py) run
# with `make unit`; this adds the molecule scenario on a lab node with real systemd and a nested Docker engine.
#   make test-memguard    molecule test -s memguard (~2-3 min)

NODE_TEST_TARGETS += test-memguard

.PHONY: test-memguard

test-memguard: setup lab-image ## molecule: arm/switch/stale/proof-test/absent of spark_memory_guard on a lab node
	cd $(ROOT) && SPARK_LAB_NODE_IMAGE=$$(cat $(BUILD)/lab/node-image.tag) \
	  SPARK_LAB_BASE_IMAGE=$$(cat $(BUILD)/lab/base-image.tag) \
	  $(MOLECULE_TEST) memguard
