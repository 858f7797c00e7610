# Two commands do all the set-up on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-quick setup clean checkpoint

$(BIN)/.installed: requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	# transformers' test mixins from its sdist, checked against a pinned sha256; under CI=true, failing to fetch fails.
	$(BIN)/python tests/model/transformers_test_suite.py
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/sharedbert demo

# The Hub-ready sharedbert-all-MiniLM-L6-v2 folder with the published recipe and budget (`sharedbert build-minilm`'s
# defaults); resumable.
checkpoint: setup
	$(BIN)/sharedbert build-minilm runs/sharedbert-all-MiniLM-L6-v2

# Everything, the tests marked slow included (what CI runs: .ci/run).
test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist worksteal --durations=15

# The developer's loop: every test but those marked slow (kill and resume, wheels, real-data training, long exports),
# under 3 minutes on 2 cores (docs/testing.md).
test-quick: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist worksteal -m "not slow" --durations=15

clean:
	rm -rf $(VENV) runs
