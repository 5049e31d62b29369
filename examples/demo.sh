#!/usr/bin/env bash
# The main job on the example package: verify the folder, pack it, verify the archive.
set -euo pipefail
hcpack=${HCPACK:-hcpack}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step hcpack verify examples/chess-openings
"$hcpack" verify "$here/chess-openings"

step "zip the folder (as a server would ship it) and verify the archive"
(cd "$here/chess-openings" && zip -qrX "$work/chess-openings.zip" ContentInfo.plist Contents)
"$hcpack" verify "$work/chess-openings.zip"

step "hcpack verify --json on the archive"
"$hcpack" verify --json "$work/chess-openings.zip"
