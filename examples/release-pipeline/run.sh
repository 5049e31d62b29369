#!/usr/bin/env bash
# A release pipeline for one hosted-content product, runnable as is:
#
#   keygen -> init -> build --sign-key -> verify --strict --trusted-key -> diff against the previous release
#   -> install --trusted-key into a scratch DEST -> inspect --json
#   -> delta from the previous release --sign-key -> catalog --sign-key -> verify-catalog, then a device at the
#   previous release upgrades through the delta the catalog names, to the same tree as the full install
#
# The signing key is made here for the example; a real pipeline keeps it in a CI secret and passes
# SIGNING_KEY=env:VAR (the PEM in that variable) and TRUSTED_KEY=the committed .pub file (docs/signing.md).
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

signing_key=${SIGNING_KEY:-}
trusted_key=${TRUSTED_KEY:-}
if [[ -z "$signing_key" ]]; then
    step "keygen (set SIGNING_KEY=env:VAR and TRUSTED_KEY=file.pub to use real keys)"
    "$hcpack" keygen --name example.com/levels -o "$work/signing.key"
    signing_key="$work/signing.key"
    trusted_key="$work/signing.key.pub"
fi

previous=${PREVIOUS:-}
if [[ -z "$previous" ]]; then
    step "previous release 1.0 (set PREVIOUS=archive to use a real one)"
    "$hcpack" init "$work/previous" --product-id "$product" --content-version 1.0 --quiet
    fill "$work/previous" 1.0
    "$hcpack" build "$work/previous" -o "$work/dist/$product-1.0.zip" --sign-key "$signing_key" --quiet
    previous="$work/dist/$product-1.0.zip"
fi

step "init $version"
"$hcpack" init "$work/package" --product-id "$product" --content-version "$version"
fill "$work/package" "$version"

step "build --sign-key (writes the archive and its signed note, ARCHIVE.hcsig)"
release="$work/dist/$product-$version.zip"
"$hcpack" build "$work/package" -o "$release" --sign-key "$signing_key" --expires 90d

step "verify --strict --trusted-key"
"$hcpack" verify --strict --trusted-key "$trusted_key" "$release"

step "diff against the previous release (a lower version fails the pipeline)"
"$hcpack" diff --fail-on-downgrade "$previous" "$release"

step "install --trusted-key the previous release, then this one, into a scratch DEST"
"$hcpack" install "$previous" --dest "$work/dest" --trusted-key "$trusted_key" --quiet
"$hcpack" install "$release" --dest "$work/dest" --trusted-key "$trusted_key"
# Contents/levels/2.json in the package is DEST/levels/2.json once installed.
cmp "$work/package/Contents/levels/2.json" "$work/dest/levels/2.json" || {
    echo "run.sh: DEST/levels/2.json is missing or differs from the package's Contents/levels/2.json" >&2
    exit 1
}

step "a tampered copy of the release is refused, DEST untouched"
cp "$release" "$work/tampered.zip"
cp "$release.hcsig" "$work/tampered.zip.hcsig"
printf 'x' >>"$work/tampered.zip"
if "$hcpack" install "$work/tampered.zip" --dest "$work/dest" --trusted-key "$trusted_key"; then
    echo "run.sh: install accepted an archive changed after signing" >&2
    exit 1
fi

step "inspect DEST (the installed version and the key that signed it)"
"$hcpack" inspect "$work/dest"

step "inspect --json"
"$hcpack" inspect --json "$release" >"$work/inspect.json"
cat "$work/inspect.json"
grep -q "\"contentVersion\": \"$version\"" "$work/inspect.json" || {
    echo "run.sh: inspect --json does not report ContentVersion $version" >&2
    exit 1
}

step "delta from the previous release (only the files that changed), signed like a package"
delta="$work/dist/$product-$(basename "$previous" .zip | sed "s/^$product-//")-$version.zip"
"$hcpack" delta "$previous" "$release" -o "$delta" --sign-key "$signing_key" --expires 90d
"$hcpack" verify --trusted-key "$trusted_key" "$delta"

step "catalog: the newest release and its delta, signed (upload the archives first, the catalog last)"
serial=${SERIAL:-2}
"$hcpack" catalog "$previous" "$release" "$delta" --base-url "${BASE_URL:-https://cdn.example.com/levels}" \
    -o "$work/dist/catalog.json" --serial "$serial" --expires 30d --sign-key "$signing_key"
cat "$work/dist/catalog.json"

step "the app's side: verify-catalog, pick the delta for the installed version, check size and SHA-256, install"
"$hcpack" verify-catalog "$work/dist/catalog.json" --trusted-key "$trusted_key" --min-serial "$serial"
mkdir -p "$work/device"
"$hcpack" install "$previous" --dest "$work/device" --trusted-key "$trusted_key" --quiet
installed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
    "$work/device/.hcpack/receipts/$product.json")
read -r name size sha < <(python3 - "$work/dist/catalog.json" "$product" "$installed" <<'PY'
import json, sys
catalog, product, installed = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
entry = next(p for p in catalog["packages"] if p["productIdentifier"] == product)
pick = next((d for d in entry["deltas"] if d["baseVersion"] == installed), entry)
print(pick["url"].rsplit("/", 1)[1], pick["size"], pick["sha256"])
PY
)
download="$work/dist/$name"  # a real app downloads the URL; here the file is in dist/
[[ "$(stat -c %s "$download")" == "$size" && "$(sha256sum "$download" | cut -d' ' -f1)" == "$sha" ]] || {
    echo "run.sh: $download does not have the size and SHA-256 the catalog names" >&2
    exit 1
}
[[ "$download" == "$delta" ]] || { echo "run.sh: the catalog did not offer the delta for $installed" >&2; exit 1; }
"$hcpack" install "$download" --dest "$work/device" --trusted-key "$trusted_key"
diff -r "$work/dest" "$work/device" || {
    echo "run.sh: upgrading through the delta gave another tree than the full install" >&2
    exit 1
}

step "release pipeline passed: $product $version"
