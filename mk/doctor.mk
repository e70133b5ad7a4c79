# Doctor: role sparkfleet.spark.doctor, playbooks/doctor.yml (its README.md in the collection). Read-only; its unit tests
# (tests/doctor/, about 2 s) run in `make unit`.
#   make doctor INV=inventories/tp3-triangle    the doctor against an inventory (default: the TOPOLOGY lab)
#   make doctor DOCTOR_ARGS=--check             extra ansible-playbook options

DOCTOR_ARGS ?=

.PHONY: doctor

doctor: setup ## Read-only cluster doctor: INV=... (default the TOPOLOGY lab); writes build/doctor/doctor.json
	$(BIN)/ansible-playbook -i $(or $(INV),$(LAB_STATE)/$(TOPOLOGY)/inventory) playbooks/doctor.yml \
	  -e spark_doctor_report_dir=$(BUILD)/doctor $(DOCTOR_ARGS)
