# Image and model: roles image_build, image_distribute, model, transfer_ssh; playbooks image.yml and
# model.yml; docs/image-and-model.md.
#   make test-image           molecule/image on the tp3 lab: build, distribution, identity assertion with a
#                             mismatched node, memory-floor refusal, model sync, corrupted/short file failure,
#                             idempotence. A lab session of the fleet slot (mk/lab.mk): it waits for another
#                             session to end, then replaces any topology lab left up.
#   make bench-distribution   tp4 lab: our distribution vs sequential `docker save | ssh docker load`, first
#                             distribution of a >= 500 MB multi-layer image and a one-small-layer update.
#                             BENCH_LAB=reuse measures on the tp4 lab that is up (site-converge or lab-up + overlay)
#                             and leaves it up. BENCH_LAYER_MB sizes each of the image's five data layers (110).
# Unit tests (tests/image/) run in `make unit`.

# Not in `make test` itself: site-tp3 runs the same build, distribution, identity and model checks on the shared
# triangle lab (molecule/site imports them); this scenario keeps them runnable alone (130 s on 2026-12-07).

.PHONY: test-image bench-distribution image-bench-session

BENCH_LAYER_MB ?= 110

test-image: setup lab-image ## molecule test of the image and model roles on the tp3 lab
	@start=$$(date +%s); $(call lab_scenario,tp3,$(MOLECULE_TEST) image) \
	  && echo "test-image: scenario image passed in $$(( $$(date +%s) - start ))s"

bench-distribution: setup lab-image ## Time our image distribution against sequential save|load on the tp4 lab
ifeq ($(BENCH_LAB),reuse)
	test -f $(LAB_STATE)/tp4/inventory/hosts.yml && \
	$(PY) $(ROOT)/molecule/image/bench_distribution.py --inventory $(LAB_STATE)/tp4/inventory --layer-mb $(BENCH_LAYER_MB)
else
	$(LAB_SESSION) $(MAKE) --no-print-directory image-bench-session
endif

# A lab session of the fleet slot, as every scenario: it waits for another session to end, then replaces any
# topology lab left up.
image-bench-session:
	@trap '$(MAKE) --no-print-directory lab-down TOPOLOGY=tp4 >/dev/null 2>&1' EXIT; \
	$(MAKE) --no-print-directory lab-up TOPOLOGY=tp4 >/dev/null && \
	SPARK_IMAGE_LAB_INVENTORY=$(LAB_STATE)/tp4/inventory $(BIN)/ansible-playbook molecule/image/overlay.yml >/dev/null && \
	$(PY) $(ROOT)/molecule/image/bench_distribution.py --inventory $(LAB_STATE)/tp4/inventory --layer-mb $(BENCH_LAYER_MB)
