# Two entry points, both self-contained on a machine with only Python 3.11 and pip:
#   make serve   install everything into .venv and serve the example service
#   make test    install everything into .venv and run the whole test suite
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
SERVICE ?= examples.quickstart:Quickstart
# The dev/test install pins torch to the CPU wheel this project is tested with; users
# get the plain `torch>=2.1` floor from the `torch` extra.
TEST_PINS ?= torch==2.13.0
PYTEST_ARGS ?=

.PHONY: serve test venv lint proto bench clean

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "need python3.11 (or python3) on PATH"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install -e '.[all,dev]' $(TEST_PINS)
	@touch $@

venv: $(VENV)/.installed

serve: venv
	@echo "serving $(SERVICE): HTTP http://127.0.0.1:3000 (docs at /docs), gRPC 127.0.0.1:50051"
	$(VENV)/bin/tensorwire serve $(SERVICE) --http-port 3000 --grpc-port 50051

test: venv
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n auto --dist loadfile $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .

# Regenerate the descriptor sets of the fixed vocabularies after editing their .proto:
# tensorwire's own (types.proto) and the Open Inference Protocol's (grpc_service.proto).
proto: venv
	$(PY) -m grpc_tools.protoc -Iproto --descriptor_set_out=proto/tensorwire/v1/types.binpb \
		proto/tensorwire/v1/types.proto
	$(PY) -m grpc_tools.protoc -Iproto --descriptor_set_out=proto/inference/grpc_service.binpb \
		proto/inference/grpc_service.proto

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
