# The two commands a fresh machine needs:
#   make demo   apply an HA cluster on the local simulator (ha-sim)
#   make test   run every test (what CI runs)
# and `make release` writes the installable artefacts to dist/<version>/ (docs/guides/install.md).
# Both install their prerequisites first (scripts/setup is idempotent).

SHELL := /bin/bash
CARGO ?= cargo
# One release build of the provider and the simulator, shared by the acceptance tests, demo and benchmarks.
RELEASE_BINS := -p terraform-provider-ha -p ha-sim

.PHONY: setup build fmt-check lint test unit acceptance demo bench release clean-work

setup:
	@bash scripts/setup

build:
	$(CARGO) build --release $(RELEASE_BINS)

fmt-check:
	$(CARGO) fmt --all -- --check

lint: fmt-check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Unit, property, HTTP-level and acceptance tests, all on the one test build (scripts/run-tests says why), which
# also lints: clippy runs inside it with -D warnings (scripts/with-clippy), so `make test` fails as `make lint` does.
test: setup fmt-check
	@bash scripts/run-tests

demo: setup build
	@bash scripts/demo

# The plan-time floor is measured with the smallest plugin the repository has (tfplugin/examples/echo_provider.rs).
bench: setup build
	$(CARGO) build --release -p tfplugin --example echo_provider
	$(CARGO) run --release -p acceptance-tests --bin bench

# Zips, SHA256SUMS, its signature (HA_RELEASE_GPG_KEY), the registry manifest and a network mirror; the inputs
# are described at the top of scripts/release.
release:
	@python3 scripts/release

# The acceptance tests' scratch: .work, and its twin in memory when /dev/shm has room (work_dir() in
# acceptance-tests/src/paths.rs names it after this checkout's path).
clean-work:
	rm -rf .work /dev/shm/ha-acceptance-$$(printf %s "$$(pwd -P)" | sha256sum | cut -c1-12)
