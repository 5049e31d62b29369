# hcpack: `make demo` and `make test` work on a fresh Debian machine with only the Swift toolchain.
PREFIX ?= /usr/local
SWIFT ?= swift
BUILD_FLAGS ?= -c release
# Libraries hcpack links, plus the tools the tests and demo use to make and check archives.
DEBIAN_PACKAGES := pkg-config libarchive-dev libxml2-dev libssl-dev zip unzip libarchive-tools xz-utils zstd bzip2 strace
BIN_DIR = $(shell $(SWIFT) build $(BUILD_FLAGS) --show-bin-path)

.PHONY: all deps build demo test bench fuzz install uninstall clean

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

test: deps
	$(SWIFT) test

# Not part of `make test`: times hcpack against zip/unzip/bsdtar/sha256sum (SCALE=8, MANY_SMALL=1, REPS=N).
bench: build
	HCPACK="$(BIN_DIR)/hcpack" python3 bench/run.py

# Not part of `make test`: builds the libFuzzer targets and runs each for FUZZ_SECONDS (docs/fuzzing.md).
FUZZ_SECONDS ?= 60
fuzz: deps
	fuzz/build.sh
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh

install: build
	install -d "$(DESTDIR)$(PREFIX)/bin" "$(DESTDIR)$(PREFIX)/share/hcpack/Templates"
	install -m 0755 "$(BIN_DIR)/hcpack" "$(DESTDIR)$(PREFIX)/bin/hcpack"
	cp -R Templates/. "$(DESTDIR)$(PREFIX)/share/hcpack/Templates/"

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/hcpack"
	rm -rf "$(DESTDIR)$(PREFIX)/share/hcpack"

clean:
	rm -rf .build
