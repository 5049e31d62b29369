#!/usr/bin/env bash
# A release pipeline for one hosted-content product, runnable as is:
#
#   init -> build -> verify --strict -> diff against the previous release -> install into a scratch DEST
#   -> inspect --json
#
# Uses `hcpack` from PATH, or $HCPACK. Everything happens in a temporary folder (kept when KEEP=1).
# PREVIOUS=path/to/last-release.zip compares against a real previous release; without it the script first
# builds a 1.0 release itself, so the example runs anywhere. `make test` runs this script.
set -euo pipefail

hcpack=${HCPACK:-hcpack}
product=${PRODUCT_ID:-com.example.levels}
version=${VERSION:-1.1}
work=$(mktemp -d)
if [[ "${KEEP:-0}" == 1 ]]; then echo "work folder: $work"; else trap 'rm -rf "$work"' EXIT; fi

step() { printf '\n== %s\n' "$*"; }

# Content of a release: one file more in each version, and index.json names the version.
fill() {
    local folder=$1 release=$2
    mkdir -p "$folder/Contents/levels"
    printf '{"title": "Levels", "release": "%s"}\n' "$release" >"$folder/Contents/index.json"
    printf '{"level": 1}\n' >"$folder/Contents/levels/1.json"
    if [[ "$release" != 1.0 ]]; then printf '{"level": 2}\n' >"$folder/Contents/levels/2.json"; fi
}

mkdir -p "$work/dist" "$work/dest"

previous=${PREVIOUS:-}
if [[ -z "$previous" ]]; then
    step "previous release 1.0 (set PREVIOUS=archive to use a real one)"
    "$hcpack" init "$work/previous" --product-id "$product" --content-version 1.0 --quiet
    fill "$work/previous" 1.0
    "$hcpack" build "$work/previous" -o "$work/dist/$product-1.0.zip" --quiet
    previous="$work/dist/$product-1.0.zip"
fi

step "init $version"
"$hcpack" init "$work/package" --product-id "$product" --content-version "$version"
fill "$work/package" "$version"

step "build"
release="$work/dist/$product-$version.zip"
"$hcpack" build "$work/package" -o "$release"

step "verify --strict"
"$hcpack" verify --strict "$release"

step "diff against the previous release (a lower version fails the pipeline)"
"$hcpack" diff --fail-on-downgrade "$previous" "$release"

step "install the previous release, then this one, into a scratch DEST"
"$hcpack" install "$previous" --dest "$work/dest" --quiet
"$hcpack" install "$release" --dest "$work/dest"
# Contents/levels/2.json in the package is DEST/levels/2.json once installed.
cmp "$work/package/Contents/levels/2.json" "$work/dest/levels/2.json" || {
    echo "run.sh: DEST/levels/2.json is missing or differs from the package's Contents/levels/2.json" >&2
    exit 1
}

step "inspect --json"
"$hcpack" inspect --json "$release" >"$work/inspect.json"
cat "$work/inspect.json"
grep -q "\"contentVersion\": \"$version\"" "$work/inspect.json" || {
    echo "run.sh: inspect --json does not report ContentVersion $version" >&2
    exit 1
}

step "release pipeline passed: $product $version"
