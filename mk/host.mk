# Host layer: roles host_baseline, kernel, nvidia_driver, memory_saver on one lab node.
#   make test-host        molecule test -s host (stand-in packages, real apt/dpkg/GRUB/DKMS; see molecule/host)
#   make host-converge    converge only and keep the node (molecule login -s host to look around)
# The node is the scenario's own lab (lab/lab.py from molecule/host/inventory), beside any topology lab.

NODE_TEST_TARGETS += test-host

.PHONY: test-host host-converge host-destroy

test-host: setup lab-image ## molecule test of the host roles (stand-in packages, real apt/GRUB/DKMS) on one node
	$(call lab_scenario,host,$(MOLECULE_TEST) host)

host-converge: setup lab-image ## Converge the host scenario and keep the node
	$(call lab_scenario,host,$(BIN)/molecule converge -s host)

host-destroy: setup ## Remove the host scenario's node
	$(call lab_scenario,host,$(BIN)/molecule destroy -s host)
