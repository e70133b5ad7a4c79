# site.yml end to end on the lab: the scenario molecule/site, run once per topology.
#   make site-lab TOPOLOGY=tp4       lab-up + the test doubles site.yml needs (molecule/site/prepare.yml)
#   make site-converge TOPOLOGY=tp4  site-lab, then site.yml against the lab inventory
#   make test-site                   molecule test -s site on tp3 (every stage, operator check and failure test), on
#                                    tp4 (what the ring does differently; host stage and quick bench left out) and
#                                    on sw4 (two serving groups on a switch behind the router; molecule/site/README.md);
#                                    docs/testing.md says where each behaviour runs

SITE_TOPOLOGIES := tp3 tp4 sw4
SITE_ARGS ?=
# What each topology's run covers (molecule/site/molecule.yml reads them): the triangle every check and failure test,
# the ring its stages and serving checks without the host stage, whose code does not read the topology.
site_env_tp3 := SPARK_LAB_TOPOLOGY=tp3 SPARK_LAB_SITE_CHECKS=full
site_env_tp4 := SPARK_LAB_TOPOLOGY=tp4 SPARK_LAB_SITE_CHECKS=serving SPARK_LAB_SITE_SKIP_TAGS=host
# Two serving groups on one switch: their stages and serving checks, then the router in front of both (router.yml).
site_env_sw4 := SPARK_LAB_TOPOLOGY=sw4 SPARK_LAB_SITE_CHECKS=serving SPARK_LAB_SITE_SKIP_TAGS=host SPARK_LAB_SITE_ROUTER=true
# One lab session (mk/lab.mk), logged as site-<topology>.
site_scenario = start=$$(date +%s) && $(call lab_scenario,$(1),env $(site_env_$(1)) $(MOLECULE_TEST) site site-$(1)) \
	&& echo "test-site: site-$(1) passed in $$(( $$(date +%s) - start ))s"

.PHONY: site-lab site-converge test-site test-site-tp3 test-site-tp4 test-site-sw4

# The lab benchmarks (bench-start, bench-converge) measure on a converged site lab. BENCH_LAB=reuse takes the
# lab that is up (make site-converge TOPOLOGY=tp4 first) and leaves it up; by default each benchmark converges
# its own and removes it (and every other topology lab of the engine) afterwards. The quick bench stays off in these
# converges: its minutes are stand-in requests, not what is measured.
BENCH_LAB ?= own
# Make runs a recipe line that names $(MAKE) directly even under `make -n`; through this variable the line
# is only printed, so a dry run never converges, measures or removes a lab.
BENCH_LAB_MAKE = $(MAKE) --no-print-directory
bench_lab_converge = $(if $(filter reuse,$(BENCH_LAB)),test -f $(LAB_STATE)/$(1)/inventory/hosts.yml,\
	$(BENCH_LAB_MAKE) site-converge TOPOLOGY=$(1) SITE_ARGS='-e spark_site_bench=false')
# (the fleet slot: a one-node scenario lab beside it stays)
bench_lab_down = $(if $(filter reuse,$(BENCH_LAB)),true,$(BENCH_LAB_MAKE) lab-down TOPOLOGY=tp4)

site-lab: lab-up ## Start the TOPOLOGY lab and add the test doubles site.yml needs on it
	SPARK_IMAGE_LAB_INVENTORY=$(LAB_STATE)/$(TOPOLOGY)/inventory \
	  $(BIN)/ansible-playbook -i $(LAB_STATE)/$(TOPOLOGY)/inventory molecule/site/prepare.yml

site-converge: site-lab ## site-lab, then site.yml against the lab (SITE_ARGS adds ansible-playbook options)
	$(BIN)/ansible-playbook -i $(LAB_STATE)/$(TOPOLOGY)/inventory site.yml $(SITE_ARGS)

test-site: setup lab-image ## molecule test of site.yml on the tp3 and tp4 labs
	@$(foreach t,$(SITE_TOPOLOGIES),$(call site_scenario,$(t)) && ) true
	$(PY) $(LAB_DIR)/lab.py leftovers --slot fleet

# One topology each (make test's test-labs runs them in its lanes).
test-site-tp3 test-site-tp4 test-site-sw4: setup lab-image
	@$(MAKE) --no-print-directory test-site SITE_TOPOLOGIES=$(@:test-site-%=%)
