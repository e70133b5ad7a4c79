# Host layer: roles host_baseline, kernel, nvidia_driver, memory_saver on one lab node.
#   make test-host        molecule test -s host (stand-in packages, real apt/dpkg/GRUB/DKMS; see molecule/host)
#   make host-converge    converge only and keep the node (molecule login -s host to look around)

HOST_MOLECULE_ENV = SPARK_LAB_NODE_IMAGE=$$(cat $(BUILD)/lab/node-image.tag)

NODE_TEST_TARGETS += test-host

.PHONY: test-host host-converge host-destroy

test-host: setup lab-image ## molecule test of the host roles (stand-in packages, real apt/GRUB/DKMS) on one node
	cd $(ROOT) && $(HOST_MOLECULE_ENV) $(MOLECULE_TEST) host

host-converge: setup lab-image ## Converge the host scenario and keep the node
	cd $(ROOT) && $(HOST_MOLECULE_ENV) $(BIN)/molecule converge -s host

host-destroy: setup ## Remove the host scenario's node
	cd $(ROOT) && $(HOST_MOLECULE_ENV) $(BIN)/molecule destroy -s host
