# Converge benchmark (figures, not a test): the wall time of a no-change site.yml run on the tp4 lab,
# on all 4 nodes, on the head alone (--limit <head>,localhost) and on all nodes with pipelining and connection
# reuse off; the last line printed is one JSON object (molecule/site/bench_converge.py says how it is measured).
#   make bench-converge                          converges the tp4 lab, measures, removes the lab (every lab of the engine);
#                                                one converge plus four no-change runs, about 25 min on the 2-core
#                                                build machine (figures in docs/decisions.md)
#   make bench-converge BENCH_LAB=reuse          measures on the tp4 lab that is up and converged, leaves it up
#   make bench-converge BENCH_CONVERGE_ARGS='-e @extra.yml'   extra ansible-playbook arguments for every run
# The runs leave out the quick bench (spark_site_bench=false; the lab turns it on): its minutes are the
# stand-in serving requests, not Ansible converging nodes, and would hide the ratios.
# Its unit tests (tests/site/) run with `make unit`. site-converge (mk/site.mk) starts and converges the lab.

BENCH_CONVERGE_ARGS ?=

.PHONY: bench-converge

bench-converge: setup lab-image ## Figures: no-change site.yml on 4 lab nodes vs 1 node vs no pipelining/reuse (tp4 lab)
	$(call bench_lab_converge,tp4) \
	  && $(PY) $(ROOT)/molecule/site/bench_converge.py --root $(ROOT) --inventory $(LAB_STATE)/tp4/inventory \
	    --log-dir $(BUILD)/bench-converge -- -e spark_site_bench=false $(BENCH_CONVERGE_ARGS); \
	  rc=$$?; $(call bench_lab_down); exit $$rc
