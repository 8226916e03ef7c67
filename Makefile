# krb5-exporter: `make demo` runs the exporter against a throwaway realm,
# `make test` runs every test. Both install what they need first.
GO      ?= go
BIN     ?= krb5-exporter
PKG     := github.com/prometheus/common/version
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X $(PKG).Version=$(VERSION) \
           -X $(PKG).Revision=$(shell git rev-parse HEAD 2>/dev/null) \
           -X $(PKG).Branch=$(shell git rev-parse --abbrev-ref HEAD 2>/dev/null) \
           -X $(PKG).BuildUser=$(shell id -un)@$(shell hostname) \
           -X $(PKG).BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
export PATH := $(PATH):/usr/local/go/bin

.PHONY: bpf all build test test-faults test-vm test-vm-kernels test-race test-packaging test-pie unit vet lint fmt-check deps demo bench clean dashboards package

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/krb5-exporter

# Every test, including the integration tests against a real MIT KDC, and
# the packages' (a module of its own: packaging/): built, installed with
# dpkg -i, run as the service user, purged. The packaging tests run without
# -race: what they test is the built package (its scripts, unit and a binary
# built as `make package` builds it, without -race), and their own Go starts
# no goroutine (the only shared state is a locked log buffer written by
# os/exec); under -race a new machine compiled the whole nfpm tree (git,
# OpenPGP, compressors) a second time for nothing.
#
# `go test` runs with -vet=off: `make vet` has just run every analyzer over
# the same packages and their tests. Packages whose code and tests start no
# goroutine (NORACE, each guarded by a test that fails when one appears)
# run without -race, which could find nothing there: dashboards alone made
# a new machine compile the Grafana SDK a second time, with race checks.
# Every step without -race builds as `make package` does (SHIPPED: no cgo,
# -trimpath), as do the tests that build the binary they run
# (testutil.BuildExporter): one compile of the dependencies serves vet,
# those binaries, the packages and the zero-allocation pass, where three
# sets of flags compiled them three times.
NORACE := ./dashboards/...
SHIPPED := CGO_ENABLED=0 GOFLAGS=-trimpath
# The race run and the packaging tests run side by side, and the race run
# keeps 4 packages in flight (-p 4) where go test's default is the number of
# cores: the integration tests spend most of their time waiting for the
# KDCs, kpropd, Prometheus and dpkg they drive (1.4 cores busy on average at
# -p 4 on 2 cores), and the tests are made to hold under load
# (scripts/under-load.sh). Their output comes line by line (-Oline).
test: deps vet fmt-check
	$(MAKE) --no-print-directory -j2 -Oline test-race test-packaging
	$(SHIPPED) $(GO) test -vet=off -count=1 -timeout 5m $(NORACE)
	$(MAKE) --no-print-directory test-pie
	$(SHIPPED) ./scripts/test-alone.sh

# A slow disk and a crowded CPU (a real-time job on the KDC's CPU)
# injected into a KDC traced by the kdcservice collector, and the faults of
# TestAlertFaultsEndToEnd scraped without a realm label (its labelled run
# is make test's), each alert through a real Prometheus and Alertmanager:
# as root, about 5 min; .ci/run runs it after make test (docs/alerts.md).
# TestKDCServiceFaultsEndToEnd holds /tmp/krb5x-bpf.lock, then
# /tmp/krb5x-quiet.lock.
test-faults:
	KRB5X_FAULTS_TEST=1 $(SHIPPED) $(GO) test -count=1 -timeout 15m -v -run '^(TestKDCServiceFaultsEndToEnd|TestAlertFaultsEndToEnd)$$/^(faults|no_realm_label)$$' ./alerts

# The package on a real Debian 12 host: a VM (scripts/vm.sh: Debian's
# kernel, systemd and krb5-kdc, booted with qemu), the README's install
# commands run in it as written, the counts checked against its journal
# (vmtest/, docs/testing.md). Needs root, mmdebstrap and qemu (installed
# here); the image is cached in /var/cache/krb5-exporter-vm.
test-vm:
	./scripts/vm.sh deps
	KRB5X_VM_TEST=1 $(GO) test -count=1 -timeout 45m -v -run '^TestDebian12$$' ./vmtest

# The same guest booted with the kernels of other KDCs (scripts/vm.sh
# KRB5X_VM_KERNEL): the kdcservice collector's hooks and counts there
# (vmtest/kernel_test.go, docs/testing.md). KERNELS to choose, COST=1 to
# run TestKDCServiceCost in each guest too.
KERNELS ?= bullseye jammy focal514
test-vm-kernels:
	./scripts/vm.sh deps
	set -e; for k in $(KERNELS); do \
		KRB5X_VM_TEST=1 KRB5X_VM_KERNEL=$$k KRB5X_VM_COST=$(COST) $(GO) test -count=1 -timeout 45m -v -run '^TestKernel$$' ./vmtest; \
	done

test-race:
	$(GO) test -race -vet=off -count=1 -p 4 -timeout 15m $$($(GO) list ./... | grep -v -x -F "$$($(GO) list $(NORACE))")

# The daemon's tests that start it, scrape it and probe a real KDC, once
# more against a -buildmode=pie build, as distributions package Go programs
# (go-rpm-macros, hardened Debian builds): a daemon that only worked as the
# default static build crashed at start as a PIE (issue #36). TestBuildMode
# checks that the binary is one.
PIE_TESTS := ^(TestBuildMode|TestVersionAndPlaceholders|TestDaemonAgainstRealm|TestDaemonReload)$$
test-pie:
	$(SHIPPED) KRB5_EXPORTER_BUILDMODE=pie $(GO) test -vet=off -count=1 -timeout 5m -run '$(PIE_TESTS)' ./cmd/krb5-exporter

test-packaging:
	cd packaging && $(SHIPPED) $(GO) test -vet=off -count=1 -timeout 10m ./...

# Tests without the default-size realm (quick feedback while editing).
unit:
	$(GO) test -short -count=1 ./...

vet:
	$(SHIPPED) $(GO) vet ./...
	cd packaging && $(SHIPPED) $(GO) vet ./...

lint: vet fmt-check

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

deps:
	./scripts/deps.sh

demo: deps build
	./scripts/demo.sh ./$(BIN)

# Mutation testing (gremlins) of the pure, fast packages with their unit
# tests only; not part of `make test`. Scores: docs/testing.md.
.PHONY: mutation
mutation:
	./scripts/mutation.sh

# Go benchmarks (not part of `make test`).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# .deb and .rpm in dist/ (nfpm, as a Go library: packaging/main.go). The
# binary has no cgo, so one build serves Debian 12 and RHEL 9; it is a
# position-independent executable, as the distributions build theirs
# (address space layout randomization of its code too; test-pie runs the
# daemon's tests against one). The version comes from git; outside a git
# tree: make package PKG_VERSION=1.2.3.
package:
	CGO_ENABLED=0 $(GO) build -trimpath -buildmode=pie -ldflags "$(LDFLAGS)" -o dist/krb5-exporter ./cmd/krb5-exporter
	cd packaging && $(GO) run . -binary ../dist/krb5-exporter -out ../dist -repo .. $(if $(PKG_VERSION),-version $(PKG_VERSION))

# docs/commands.md from the command line model (TestCommandsDoc checks it).
.PHONY: docs
docs:
	$(GO) run ./cmd/krb5-exporter man --format=markdown > docs/commands.md

# The Grafana dashboards' JSON from their Go source (dashboards/).
# The BPF program of --collector.kdcservice, compiled with clang by bpf2go
# (internal/kdcbpf): the object and its Go are committed, so a build
# needs no clang; internal/kdcbpf's TestObjectIsSource checks they are
# what the C source compiles to.
bpf:
	cd internal/kdcbpf && $(GO) generate

dashboards:
	$(GO) run ./dashboards/gen -dir dashboards

clean:
	rm -f $(BIN)
	rm -rf dist
	rm -rf .demo
