# Serve. Unit tests (tests/serve/) run with `make unit`; this adds the lab scenario.
#   make test-serve    molecule test -s serve: a private 3-node lab (serve-dgx1..3, 10.0.47.0/24; lab/lab.py) serves the TP3
#                      profile with the stand-in image (TEST DOUBLE); idempotence, status, the faults (broken-image
#                      replace, interrupted controller, dead worker, guard trip), supervised mode (a killed worker is
#                      restarted with its group, a second kill beyond the rate limit is not), stop. Measured on the
#                      2-core build machine, nothing else running, on 2026-12-08 (faults: replace 56 s, failed
#                      rollback 35 s, interrupt 46 s, dead worker 42 s, guard trip 24 s, supervised 68 s).

# Not in `make test` itself: site-tp3 runs the same faults (molecule/site/serve-faults.yml runs faults.py) on the
# shared triangle lab; this scenario keeps a private lab for working on serve alone.

.PHONY: test-serve

test-serve: setup lab-image ## molecule: serve/status/stop, idempotence and the start faults on a private TP3 lab
	$(call lab_scenario,serve,$(MOLECULE_TEST) serve)

.PHONY: bench-start

# Benchmark (not a test): serve.yml start -> ready against a fixed stand-in startup time S on the tp4 site lab
# (site.yml converged, so the group runs exactly as site.yml leaves it). Prints the figures (last line one JSON
# object). BENCH_LAB=reuse measures on the tp4 lab that is already up and converged and leaves it up;
# otherwise the target converges it first and removes it afterwards.
BENCH_START_S ?= 5
bench-start: setup lab-image ## Figures: serve.yml start-to-ready, orchestration overhead, readiness detection latency (tp4)
	$(call bench_lab_converge,tp4) \
	  && $(PY) $(ROOT)/molecule/serve/bench_start.py --inventory $(LAB_STATE)/tp4/inventory --head dgx1 \
	    --startup-s $(BENCH_START_S); \
	  rc=$$?; $(call bench_lab_down); exit $$rc
