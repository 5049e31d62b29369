# hcpack: `make demo` and `make test` work on a fresh Debian machine with only the Swift toolchain.
PREFIX ?= /usr/local
SWIFT ?= swift
# Release builds link the Swift runtime and Foundation in: the binary then runs on machines without a Swift
# toolchain (CI images), starts in 10 ms instead of 22 and has 5 MiB less resident (bench/README.md).
# No $ORIGIN run path either: a library dropped beside /usr/bin/hcpack must not be loaded (the packages check it).
BUILD_FLAGS ?= -c release --static-swift-stdlib --disable-local-rpath
# Libraries hcpack links, plus the tools the tests and demo use to make and check archives (and the zip readers
# the interop tests compare install with: unzip, miniunzip from minizip), and to check the generated man page
# (groff-base) and completions (zsh, fish); GNU time for make bench; openssl and Go's
# golang.org/x/mod/sumdb/note for the signing interop tests; a JDK (jar, javac) and 7-Zip (7zz) for the zip
# producers' corpus (ZipProducersTests); libcurl for fetch, nginx-light for its tests;
# libzstd for binary patches, xdelta3 and bsdiff as the delta bench's peers.
DEBIAN_PACKAGES := pkg-config libarchive-dev libxml2-dev libssl-dev zip unzip minizip libarchive-tools xz-utils zstd bzip2 strace groff-base zsh fish time \
  openssl golang-go golang-golang-x-mod-dev default-jdk-headless 7zip libcurl4-openssl-dev nginx-light libzstd-dev xdelta3 bsdiff
BIN_DIR = $(shell $(SWIFT) build $(BUILD_FLAGS) --show-bin-path)
# Release artifacts (make deb, make dist, make package-check, make deb-check): Debian's packaging tools, and
# debootstrap for the bare-Debian install check.
DEBIAN_PACKAGES += dpkg-dev lintian binutils debootstrap

# The commit `hcpack --version` names (Package.swift reads it): HEAD, "-dirty" when the checkout has
# uncommitted changes; empty ("unknown") without git. Set HCPACK_COMMIT=... to build a source tarball.
ifndef HCPACK_COMMIT
HCPACK_COMMIT := $(shell git rev-parse -q --verify HEAD 2>/dev/null)$(shell git status --porcelain 2>/dev/null | grep -q . && echo -dirty)
endif
export HCPACK_COMMIT
# The version, from its one place in the source.
VERSION := $(shell sed -n 's/^ *public static let version = "\(.*\)"$$/\1/p' Sources/HCPackCLI/HCPack.swift)
DIST_DIR ?= .build/dist

.PHONY: all deps build demo test install-check bench bench-pathological fuzz fuzz-smoke install uninstall clean
.PHONY: deb dist package-check deb-check

all: build

# Installs only the Debian packages that are missing (needs root or sudo).
deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

build: deps
	$(SWIFT) build $(BUILD_FLAGS) --product hcpack

demo: build
	@HCPACK="$(BIN_DIR)/hcpack" bash examples/demo.sh

# After the suite: the release pipeline example (so it never rots) and a scratch `make install`, both with the
# debug binary `swift test` has just built.
test: deps
	$(SWIFT) test
	HCPACK="$$($(SWIFT) build --show-bin-path)/hcpack" bash examples/release-pipeline/run.sh
	@$(MAKE) --no-print-directory install-check

# `make install` into a scratch prefix with the debug build (already built by `swift test`): every file lands.
INSTALLED_FILES := bin/hcpack share/hcpack/Templates/transporter-metadata.xml share/bash-completion/completions/hcpack \
  share/zsh/site-functions/_hcpack share/fish/vendor_completions.d/hcpack.fish share/man/man1/hcpack.1
install-check:
	@prefix="$$(mktemp -d)"; trap 'rm -rf "$$prefix"' EXIT; \
	$(MAKE) --no-print-directory install PREFIX="$$prefix" BUILD_FLAGS= >/dev/null || exit 1; \
	for f in $(INSTALLED_FILES); do \
	  test -s "$$prefix/$$f" || { echo "install-check: make install did not write $$f"; exit 1; }; \
	done; \
	bash -n "$$prefix/share/bash-completion/completions/hcpack" || exit 1; \
	"$$prefix/bin/hcpack" --version >/dev/null || exit 1; \
	echo "install-check: make install wrote $(words $(INSTALLED_FILES)) files, completions parse"

# Not part of `make test`: times hcpack against zip/unzip/bsdtar/sha256sum (SCALE=8, MANY_SMALL=1, REPS=N), with
# outputs on disk, then on a RAM disk (tmpfs, needs root); BENCH_TMPFS=0 or 1 runs only one mode.
bench: build
	@if [ "$(BENCH_TMPFS)" != "1" ]; then HCPACK="$(BIN_DIR)/hcpack" BENCH_TMPFS=0 python3 bench/run.py; fi
	@if [ "$(BENCH_TMPFS)" != "0" ]; then HCPACK="$(BIN_DIR)/hcpack" BENCH_TMPFS=1 python3 bench/run.py; fi
	@HCPACK="$(BIN_DIR)/hcpack" python3 bench/pathological.py
	@HCPACK="$(BIN_DIR)/hcpack" python3 bench/fetch.py
	@HCPACK="$(BIN_DIR)/hcpack" python3 bench/patches.py

# Only the pathological inputs of issue 18 (a few seconds; bench/README.md).
bench-pathological: build
	HCPACK="$(BIN_DIR)/hcpack" python3 bench/pathological.py

# Not part of `make test`: builds the libFuzzer targets and runs each for FUZZ_SECONDS (docs/fuzzing.md).
FUZZ_SECONDS ?= 60
fuzz: deps
	fuzz/build.sh
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

# CI (.ci/run): the same build, then each target for 20 s (a minute in all), so the harnesses cannot rot.
fuzz-smoke: deps
	fuzz/build.sh
	FUZZ_SECONDS=20 fuzz/run.sh

SHARE = $(DESTDIR)$(PREFIX)/share
BASH_COMPLETION = $(SHARE)/bash-completion/completions/hcpack
ZSH_COMPLETION = $(SHARE)/zsh/site-functions/_hcpack
FISH_COMPLETION = $(SHARE)/fish/vendor_completions.d/hcpack.fish
MAN_PAGE = $(SHARE)/man/man1/hcpack.1

# The completions and the man page are generated by the built binary from the same specs as --help.
install: build
	install -d "$(DESTDIR)$(PREFIX)/bin" "$(SHARE)/hcpack/Templates" "$(SHARE)/bash-completion/completions" \
	  "$(SHARE)/zsh/site-functions" "$(SHARE)/fish/vendor_completions.d" "$(SHARE)/man/man1"
	install -m 0755 "$(BIN_DIR)/hcpack" "$(DESTDIR)$(PREFIX)/bin/hcpack"
	cp -R Templates/. "$(SHARE)/hcpack/Templates/"
	"$(BIN_DIR)/hcpack" completions bash > "$(BASH_COMPLETION)"
	"$(BIN_DIR)/hcpack" completions zsh > "$(ZSH_COMPLETION)"
	"$(BIN_DIR)/hcpack" completions fish > "$(FISH_COMPLETION)"
	"$(BIN_DIR)/hcpack" man > "$(MAN_PAGE)"

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/hcpack" "$(BASH_COMPLETION)" "$(ZSH_COMPLETION)" "$(FISH_COMPLETION)" "$(MAN_PAGE)"
	rm -rf "$(SHARE)/hcpack"

clean:
	rm -rf .build

# Release artifacts from the release binary (docs/install.md): scripts under .ci/ so CI and developers run the
# same recipe. HCPACK_SIGN_KEY=env:VAR (or a key file) signs the tarball (hcpack sign-file).
deb: build
	VERSION="$(VERSION)" .ci/package deb "$(BIN_DIR)/hcpack" "$(DIST_DIR)"

dist: build
	VERSION="$(VERSION)" .ci/package dist "$(BIN_DIR)/hcpack" "$(DIST_DIR)"

# CI (.ci/run): builds the .deb and the tarball from one release build and checks what they hold and that
# their binaries run without a Swift toolchain; lintian; two dists byte-identical.
package-check: build
	VERSION="$(VERSION)" .ci/package-check "$(BIN_DIR)/hcpack"

# Not in CI (needs network for Debian's packages): apt-get install the .deb into a debootstrapped Debian 12
# root without Swift and run the release pipeline, man hcpack and the bash completion there (needs root).
deb-check: deb
	.ci/deb-check "$(DIST_DIR)/hcpack_$(VERSION)_$$(dpkg --print-architecture).deb"
