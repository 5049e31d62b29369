#!/usr/bin/env bash
# The main job on the example package: scaffold, build, verify, install.
set -euo pipefail
hcpack=${HCPACK:-hcpack}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step hcpack init new-pack --product-id com.example.chess.puzzles
"$hcpack" init new-pack --product-id com.example.chess.puzzles
find new-pack | LC_ALL=C sort

step hcpack verify examples/chess-openings
"$hcpack" verify "$here/chess-openings"

step hcpack build examples/chess-openings -o chess-openings-1.2.zip
"$hcpack" build "$here/chess-openings" -o chess-openings-1.2.zip

step "hcpack build again: byte-identical (reproducible)"
"$hcpack" build "$here/chess-openings" -o again.zip --quiet
cmp chess-openings-1.2.zip again.zip && echo "identical: $(sha256sum again.zip | cut -c1-16)..."

step hcpack verify chess-openings-1.2.zip
"$hcpack" verify chess-openings-1.2.zip

step hcpack verify --json chess-openings-1.2.zip
"$hcpack" verify --json chess-openings-1.2.zip

step hcpack install chess-openings-1.2.zip --dest app-documents
mkdir app-documents
echo "a note the user wrote" > app-documents/my-notes.txt
"$hcpack" install chess-openings-1.2.zip --dest app-documents

step "what was installed (the user's my-notes.txt is untouched)"
find app-documents -not -path '*/.hcpack*' | LC_ALL=C sort

step "install again: the same version is a no-op"
"$hcpack" install chess-openings-1.2.zip --dest app-documents
