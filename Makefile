# Two commands do all the set-up on a fresh machine:  `make demo`  and  `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-quick setup clean checkpoint

$(BIN)/.installed: requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --no-compile -r requirements-dev.txt
	# pip compiles what it installs to bytecode one file at a time, most of the install's time: compileall does it on
	# every core, leaving out the torch test helper written in newer Python that pip skips too. Should that pass fail
	# (another such file, no process pool), a serial one compiles what it left undone; a file that will not compile
	# is left to Python, as pip leaves it.
	$(BIN)/python -m compileall -q -j 0 -x 'py31[2-9]_' $(VENV)/lib > /dev/null \
		|| $(BIN)/python -m compileall -q $(VENV)/lib > /dev/null || true
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
