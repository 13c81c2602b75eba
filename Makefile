# llmforge.cluster — `make demo` brings up a Slurm cluster (controller, two GPU nodes, a login node) in local containers,
# `make test` runs every check. Both work on a fresh Debian machine as root.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

VENV ?= .venv
PYTHON ?= python3
# build/tools: promtool, unpacked by scripts/ensure-test-tools.sh.
export PATH := $(CURDIR)/$(VENV)/bin:$(CURDIR)/build/tools/usr/bin:$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/collections
export PYTHONPATH := $(CURDIR)/collections
export MOLECULE_IMAGE ?= llmforge/debian13-systemd:latest
export MOLECULE_IMAGE_DEBIAN12 ?= llmforge/debian12-systemd:latest
SCENARIOS ?= $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))

.PHONY: help venv docker tools image image-debian12 wheelhouse ansible-wheelhouse unit lint sanity build browser molecule test demo demo-down clean

help:
	@echo "make demo       Slurm cluster in local containers (ctl1, gpu1, gpu2, login1; users from ldap1), then a GPU job"
	@echo "make demo-down  remove the demo containers"
	@echo "make test       unit tests, linters, ansible-test sanity, collection build, browser check and every Molecule scenario"
	@echo "make browser    open report.html in headless Chromium: DOM, layout and screenshot checks"

$(VENV)/.installed: requirements-dev.txt requirements.txt
	$(PYTHON) -m venv $(VENV) || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null && $(PYTHON) -m venv $(VENV); }
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

docker:
	bash scripts/ensure-docker.sh

# The programs the tests run from the distribution (fio, shellcheck, promtool; Chromium for the browser check).
tools:
	bash scripts/ensure-test-tools.sh
	bash scripts/ensure-chromium.sh

image: docker
	bash molecule/resources/build-image.sh

# Debian 12 (Slurm 22.05) for the cluster_debian12 scenario; the demo needs only the Debian 13 image.
image-debian12: docker
	MOLECULE_IMAGE=$(MOLECULE_IMAGE_DEBIAN12) LLMFORGE_TEST_SUITE=bookworm bash molecule/resources/build-image.sh

# The Debian 12 cluster scenario's training environment installs offline from here: PyTorch's CPU wheels for
# CPython 3.11 and their dependencies, each file checked against the lock's hash.
WHEELHOUSE_LOCK := molecule/resources/files/training-cp311.lock
build/wheelhouse/.complete: $(WHEELHOUSE_LOCK) | venv
	pip download --quiet --require-hashes --no-deps --only-binary=:all: --python-version 3.11 \
	    --platform manylinux_2_28_x86_64 --platform manylinux_2_5_x86_64 --dest build/wheelhouse --requirement $(WHEELHOUSE_LOCK)
	touch $@

wheelhouse: build/wheelhouse/.complete

# The wheel of the GPU nodes' pinned Ansible in the cluster scenario (pull mode: the ansible_node role's lock), checked
# against the lock's hash; the nodes install it offline from here.
ANSIBLE_NODE_LOCK := roles/ansible_node/files/ansible-node.lock
build/ansible-wheelhouse/.complete: $(ANSIBLE_NODE_LOCK) | venv
	pip download --quiet --require-hashes --no-deps --only-binary=:all: --dest build/ansible-wheelhouse \
	    --requirement $(ANSIBLE_NODE_LOCK)
	touch $@

ansible-wheelhouse: build/ansible-wheelhouse/.complete

# --dist loadfile: each test file's tests on one worker, so a module's fixtures run once (test_rendered_values.py's
# renders every role's preflight for 64 s; with the default distribution both workers did it). The slowest 25 are
# listed at the end: where the unit tests' minutes go.
unit: venv
	bash scripts/ensure-test-tools.sh
	pytest -q -n auto --dist loadfile --durations=25 tests/unit

lint: venv
	yamllint --strict .
	ansible-lint --profile production

sanity: venv
	bash scripts/ensure-test-tools.sh
	bash scripts/sanity.sh

build: venv
	bash scripts/build-collection.sh

browser: venv
	bash scripts/ensure-chromium.sh
	pytest -q tests/browser

# Every scenario runs (see the script for which run beside which; it makes cluster_debian12's image and wheelhouse
# while the cluster scenario runs); the target fails if any failed and ends with a table of results.
molecule: venv image build ansible-wheelhouse
	bash scripts/molecule-all.sh $(SCENARIOS)

# unit, lint, sanity and browser run beside the test image's build, the collection's build and the first scenarios
# (see the script); the target fails if any of them failed.
test: venv
	bash scripts/test-all.sh $(SCENARIOS)

demo: venv image ansible-wheelhouse
	bash scripts/demo.sh

demo-down: venv
	molecule --base-config .config/molecule/config.yml destroy --scenario-name cluster
	docker volume rm --force llmforge-cluster-shared >/dev/null

clean:
	rm -rf build tests/output
