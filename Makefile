# Two commands set everything up on a fresh machine with only Python: `make quickstart` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch/torchvision are pinned as a pair (see docs/getting-started.md: the CPU 2.13.0 file breaks PyPI's torchvision).
TORCH_PIN ?= torch==2.14.1 torchvision==0.29.1
# rl (verl + TRL), torchcodec and lmms (lmms-eval) install beside the rest, so the tests prove every extra works with the others.
EXTRAS ?= all,dev,rl,torchcodec,lmms,docs,minilm
# lmms-eval's own pins clash with the rest (pyproject's `lmms` extra says which): it installs without them.
LMMS_EVAL ?= lmms-eval==0.7.3
OUT ?= outputs/quickstart
PYTEST_ARGS ?=

.PHONY: venv quickstart test test-slow test-all lint bench docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Reinstall only when the dependency declaration changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e ".[$(EXTRAS)]" $(TORCH_PIN)
	$(BIN)/pip install -q --no-deps "$(LMMS_EVAL)"
	touch $@

venv: $(VENV)/.installed

quickstart: venv
	$(BIN)/vidlab synth $(OUT)/synthetic.mp4 --frames 240 --fps 24 --width 320 --height 180 --seed 0
	$(BIN)/vidlab contact-sheet $(OUT)/synthetic.mp4 --out $(OUT)/contact_sheet.png --frames 16
	# Comp-Attn on the small Wan trained on the coloured-shapes world (generation/toyworld/weights)
	# four seeds, each judged by the exact detector: two subjects are the hard case (both drawn in about a quarter)
	$(BIN)/vidlab generate "a red circle to the left of a blue square" --preset generate/toyworld-calibrated --num-videos 4 --out $(OUT)/generate --attention-maps --overwrite
	# the same seeds with Comp-Attn off: the control
	$(BIN)/vidlab generate "a red circle to the left of a blue square" --preset generate/toyworld-calibrated --num-videos 4 --no-sci --no-lam --out $(OUT)/generate-off --overwrite
	# VideoBrain's default toy policy toy:where + its toy CLIP (understanding/toyworld/weights/where) on synthetic
	# long videos of the default toy world (toy:shipped, the default world's own policy, runs by name)
	$(BIN)/vidlab toyworld-data $(OUT)/toyworld 4
	$(BIN)/vidlab qa --video $(OUT)/toyworld/test/videos/200000.mp4 --question "What colour was the triangle?" \
		--options magenta white blue yellow --truth magenta --policy toy:where \
		episode.frame_resize=fit --json $(OUT)/toyworld-qa.json
	$(BIN)/vidlab eval-qa --benchmark jsonl --data $(OUT)/toyworld/test/questions.jsonl --policy toy:where \
		--strategies agent uniform:16 uniform:56 \
		episode.frame_resize=fit --out $(OUT)/toyworld-eval --overwrite
	# the where-to-look world (the same policy, toy:where): a coarse call, then a zoom
	$(BIN)/vidlab toyworld-data $(OUT)/toyworld-where 4 --world where
	$(BIN)/vidlab qa --video $(OUT)/toyworld-where/test/videos/200000.mp4 --question "What colour did the triangle flash?" \
		--options magenta white blue yellow --truth magenta --policy toy:where episode.frame_resize=fit \
		--json $(OUT)/toyworld-where-qa.json
	$(BIN)/vidlab eval-qa --benchmark jsonl --data $(OUT)/toyworld-where/test/questions.jsonl --policy toy:where \
		--strategies agent uniform:16 uniform:56 episode.frame_resize=fit --out $(OUT)/toyworld-where-eval --overwrite
	@echo "quickstart outputs in $(OUT)/ (contact sheet, toy-world generation with Comp-Attn on and off + layout/attention PNGs, toy agent trajectory, QA accuracy-vs-frames plot)"

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check vidlab generation understanding tests benchmarks demos
	$(BIN)/mypy   # settings and the per-module debt list: [tool.mypy] in pyproject.toml

# `make test`: lint + every test not marked `slow` (about 2.5 min on 2 cores); `make test-slow`: the 42 `slow`
# end-to-end tests (Ray clusters, a browser, real CLIs, kill/resume runs); CI (.ci/run) runs both, so all of them.
test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not slow" $(PYTEST_ARGS)

test-slow: venv
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup -m slow $(PYTEST_ARGS)

test-all: test test-slow

# `make bench`: every script in benchmarks/ end to end at its quick size, one after another; figures appended to
# outputs/bench.jsonl (a benchmark this machine cannot run, e.g. gpu_overhead without a GPU, is listed as skipped).
# `vidlab bench --smoke` runs each on its smallest inputs (the `slow` test tests/benchmarks/test_smoke.py does).
bench: venv
	$(BIN)/vidlab bench --quick

# the documentation site into site/ (mkdocs.yml): strict, so a broken link, a bad reference or a missing API object
# fails; the configuration reference is generated from the config dataclasses (docs/hooks/vidlab_docs.py)
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) outputs site .pytest_cache .ruff_cache
