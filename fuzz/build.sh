#!/usr/bin/env bash
# Builds the libFuzzer targets into fuzz/out/bin (see docs/fuzzing.md).
#
# SwiftPM cannot link libFuzzer targets, so each library module is compiled here with swiftc, instrumented
# for coverage and AddressSanitizer (-sanitize=fuzzer,address on compile-only steps adds the coverage
# counters without linking libFuzzer), then each fuzz target is linked against the objects it needs.
# The system libraries (libxml2, libarchive, libcrypto, libzstd) are not instrumented: their crashes are still
# caught, but libFuzzer gets no coverage feedback from inside them. libcurl is not linked: HTTPTransport opens it
# with dlopen when a client is made, which no fuzz target does.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${FUZZ_OUT:-$ROOT/fuzz/out}
OBJ=$OUT/obj
BIN=$OUT/bin
SWIFTC=${SWIFTC:-swiftc}
mkdir -p "$OBJ" "$BIN"

# -O keeps Swift's bounds and overflow checks (only -Ounchecked drops them); -g for readable stacks.
# -package-name: the modules use `package` access across each other (PositionIndex), as SwiftPM builds them.
COMMON=(-O -g -swift-version 6 -parse-as-library -package-name hcpack -sanitize=fuzzer,address -I "$OBJ" -use-ld=lld)
for c in CLibXML2 CArchive CCrypto CCurl CZstd; do
    COMMON+=(-Xcc "-fmodule-map-file=$ROOT/Sources/$c/module.modulemap")
done
for flag in $(pkg-config --cflags-only-I libxml-2.0 libarchive libcrypto libcurl libzstd); do
    COMMON+=(-Xcc "$flag")
done

# Compiles Sources/<module>/**/*.swift (the domain has a folder per capability) into one object and a
# .swiftmodule for the targets to import.
module() {
    local name=$1
    local sources=()
    mapfile -t sources < <(find "$ROOT/Sources/$name" -name '*.swift' | sort)
    echo "swiftc: module $name" >&2
    "$SWIFTC" "${COMMON[@]}" -wmo -module-name "$name" -emit-module -emit-module-path "$OBJ/$name.swiftmodule" \
        -c -o "$OBJ/$name.o" "${sources[@]}"
}

# Links one fuzz target (fuzz/<Target>.swift) with the module objects it names.
target() {
    local name=$1; shift
    local objects=()
    for m in "$@"; do objects+=("$OBJ/$m.o"); done
    local sources=("$ROOT/fuzz/$name.swift")
    # The plist targets share their round-trip oracle.
    [[ $name == *PlistFuzzer ]] && sources+=("$ROOT/fuzz/PlistRoundTrip.swift")
    echo "swiftc: target $name" >&2
    "$SWIFTC" "${COMMON[@]}" -module-name "$name" "${sources[@]}" "${objects[@]}" \
        -lxml2 -larchive -lcrypto -lzstd -o "$BIN/$name"
}

want=${*:-XMLPlistFuzzer BinaryPlistFuzzer ArchiveFuzzer}
module PropertyList
if [[ " $want " == *" ArchiveFuzzer "* ]]; then
    module FileSystemIO
    module ArchiveIO
    module Digest
    module HTTPTransport
    module PatchCodec
    module HostedContent
fi
for t in $want; do
    case $t in
    XMLPlistFuzzer | BinaryPlistFuzzer) target "$t" PropertyList ;;
    ArchiveFuzzer) target "$t" PropertyList FileSystemIO ArchiveIO Digest HTTPTransport PatchCodec HostedContent ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
    esac
done
echo "built: $(cd "$BIN" && ls | tr '\n' ' ')" >&2
