# `sam build` (template.yaml: BuildMethod makefile, CodeUri .; samconfig.toml:
# build_in_source) runs `make build-<function's logical id>` here, once per function,
# with ARTIFACTS_DIR set to that function's output directory.
#
# Every target first runs the one `cargo lambda build` of all five bootstraps, in this
# workspace's target/: the first compiles the workspace once, the others find cargo's
# fingerprints current and return in seconds. Cargo decides what is stale (an edit in
# shared/ rebuilds every function that links it), so nothing here caches on its own.
#
# The functions are built together, so cargo unifies their dependencies' features across
# them, as for the Terraform module's artifacts (docs/DEPLOY.md, "1. Build").
#
#   make lambdas                                      # what sam build runs first
#   make lambdas LAMBDA_FLAGS="--release --x86-64"    # another profile or architecture

LAMBDA_FLAGS ?= --profile lambda --arm64
PACKAGES := -p wisp-fn-piped-api -p wisp-fn-api -p wisp-fn-web-api -p wisp-fn-http -p wisp-fn-jobs
# cargo lambda's output: <target dir>/lambda/<binary>/bootstrap.
LAMBDA_DIR := $(or $(CARGO_TARGET_DIR),target)/lambda

.PHONY: lambdas build-PipedApiFunction build-ApiFunction build-WebApiFunction build-HttpFunction build-JobsFunction

lambdas:
	cargo lambda build $(LAMBDA_FLAGS) $(PACKAGES)

# function logical id (template.yaml) -> cargo binary
build-PipedApiFunction: BINARY = wisp-piped-api
build-ApiFunction: BINARY = wisp-api
build-WebApiFunction: BINARY = wisp-web-api
build-HttpFunction: BINARY = wisp-http
build-JobsFunction: BINARY = wisp-jobs

build-PipedApiFunction build-ApiFunction build-WebApiFunction build-HttpFunction build-JobsFunction: lambdas
	test -n "$(ARTIFACTS_DIR)" || { echo "ARTIFACTS_DIR is not set: run sam build" >&2; exit 1; }
	cp $(LAMBDA_DIR)/$(BINARY)/bootstrap $(ARTIFACTS_DIR)/bootstrap
