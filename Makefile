# Two entry points, both self-contained on a machine with only Python 3.11 and pip
# (Debian and Ubuntu split `venv` out of Python: apt install python3.11-venv):
#   make serve   install tensorwire and what the served example needs into .venv, serve it
#   make test    install everything (the development install) into .venv, run the suite
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
SERVICE   ?= examples.quickstart:Quickstart
HTTP_PORT ?= 3000
GRPC_PORT ?= 50051
# `make serve` installs the base package plus the extras the service imports (torch,
# image, ...), read from its source by tools/extras.py; set EXTRAS=a,b for your own.
EXTRAS ?= $(shell $(PYTHON) tools/extras.py $(SERVICE))
# torch, where it is installed here (`make test`, examples that use it), is the version
# this project is tested with, on the CPU: PyPI's Linux wheel of torch is the multi-GB
# CUDA build, so pip also reads PyTorch's CPU index when it answers (TORCH_INDEX_URL=auto;
# a machine that reaches PyPI only gets the pin from its configured indexes, as CI here
# does). TORCH_INDEX_URL= (empty) never asks it; TORCH_INDEX_URL=<url> asks another.
# The pin is the development install's: users get the `torch>=2.1` floor of the extra.
TORCH_PIN       ?= torch==2.13.0
TORCH_INDEX_URL ?= auto
CPU_TORCH_INDEX := https://download.pytorch.org/whl/cpu
PYTEST_ARGS ?=

# "--extra-index-url <PyTorch's CPU index>" when it answers within 5 s, else nothing.
probe_cpu_index = $$($(PYTHON) -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5); print("--extra-index-url", sys.argv[1])' $(CPU_TORCH_INDEX) 2>/dev/null)
torch_index = $(if $(filter auto,$(TORCH_INDEX_URL)),$(probe_cpu_index),$(if $(TORCH_INDEX_URL),--extra-index-url $(TORCH_INDEX_URL)))
comma := ,
SERVE_STAMP := $(VENV)/.serve-$(or $(subst $(comma),-,$(EXTRAS)),base)

.PHONY: serve test venv docs lint proto bench clean

$(PY):
	@test -n "$(PYTHON)" || { echo "need python3.11 (or python3) on PATH"; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); echo "python -m venv failed: on Debian \
	and Ubuntu install the python3.11-venv package (apt install python3.11-venv)"; exit 1; }

# The development install: every extra, the test and docs tools.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[all,dev]' $(TORCH_PIN) $(torch_index)
	@touch $@

# The light install of `make serve`: nothing to do when the development install is there.
$(SERVE_STAMP): pyproject.toml | $(PY)
	@if [ -f $(VENV)/.installed ] && [ $(VENV)/.installed -nt pyproject.toml ]; then :; \
	else echo "installing tensorwire$(if $(EXTRAS),[$(EXTRAS)]) into $(VENV)"; \
	$(PY) -m pip install -q -e '.$(if $(EXTRAS),[$(EXTRAS)])' \
		$(if $(findstring torch,$(EXTRAS)),$(TORCH_PIN) $(torch_index)); fi
	@touch $@

venv: $(VENV)/.installed

# The server prints its URLs itself once it listens ("tensorwire serving ...").
serve: $(SERVE_STAMP)
	exec $(VENV)/bin/tensorwire serve $(SERVICE) --http-port $(HTTP_PORT) --grpc-port $(GRPC_PORT)

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n auto --dist loadfile $(PYTEST_ARGS)

# The documentation site (MkDocs + Material) into build/site; warnings are errors.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site

lint: venv
	$(VENV)/bin/ruff check .

# Regenerate the descriptor sets of the fixed vocabularies after editing their .proto:
# tensorwire's own (types.proto) and the Open Inference Protocol's (grpc_service.proto).
proto: venv
	$(PY) -m grpc_tools.protoc -Iproto --descriptor_set_out=proto/tensorwire/v1/types.binpb \
		proto/tensorwire/v1/types.proto
	$(PY) -m grpc_tools.protoc -Iproto --include_imports \
		--descriptor_set_out=proto/inference/grpc_service.binpb \
		proto/inference/grpc_service.proto

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
