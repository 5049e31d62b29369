#!/usr/bin/env python3
"""Deterministic benchmark corpus that looks like hosted content.

A few large incompressible media files, a few hundred mid-size incompressible images, thousands of small
compressible JSON/text files in nested folders, some non-ASCII names. About 250 MiB at SCALE=1.
`--many-small` makes the 100,000-file variant instead.
"""
import argparse
import json
import os
import random


def incompressible(rng, size):
    # randbytes is fast and as incompressible as real media.
    return rng.randbytes(size)


def text_blob(rng, size):
    words = ["opening", "gambit", "defence", "variation", "knight", "bishop", "castle", "endgame", "tempo", "pawn"]
    parts = []
    total = 0
    while total < size:
        record = {"id": rng.randrange(1 << 30), "name": " ".join(rng.choice(words) for _ in range(4)),
                  "moves": [rng.choice("abcdefgh") + str(rng.randrange(1, 9)) for _ in range(12)]}
        line = json.dumps(record) + "\n"
        parts.append(line)
        total += len(line)
    return "".join(parts)[:size].encode()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make(root, scale, many_small):
    rng = random.Random(20261129)
    contents = os.path.join(root, "Contents")
    files = []
    if many_small:
        for i in range(100_000):
            rel = f"cards/{i % 100:02d}/{(i // 100) % 10}/card-{i:06d}.json"
            write(os.path.join(contents, rel), text_blob(rng, 200 + rng.randrange(600)))
            files.append(rel)
    else:
        for i in range(max(1, int(4 * scale))):
            rel = f"media/video-{i:02d}.mp4"
            write(os.path.join(contents, rel), incompressible(rng, 40 << 20))
            files.append(rel)
        for i in range(int(300 * scale)):
            rel = f"images/set-{i % 12:02d}/image-{i:04d}.jpg"
            write(os.path.join(contents, rel), incompressible(rng, 150_000 + rng.randrange(200_000)))
            files.append(rel)
        for i in range(int(3000 * scale)):
            rel = f"data/level-{i % 30:02d}/chapter-{(i // 30) % 10}/entry-{i:05d}.json"
            write(os.path.join(contents, rel), text_blob(rng, 2_000 + rng.randrange(12_000)))
            files.append(rel)
        for name in ["Défense française.json", "Königsindisch.json", "日本語.json", "Ruy López.json"]:
            rel = "openings/" + name
            write(os.path.join(contents, rel), text_blob(rng, 4000))
            files.append(rel)
    plist = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
             '<plist version="1.0">', "<dict>",
             "\t<key>IAPProductIdentifier</key>", "\t<string>com.example.bench</string>",
             "\t<key>ContentVersion</key>", "\t<string>1.0</string>", "</dict>", "</plist>", ""]
    write(os.path.join(root, "ContentInfo.plist"), "\n".join(plist).encode())
    return files


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--many-small", action="store_true")
    args = parser.parse_args()
    files = make(args.root, args.scale, args.many_small)
    print(f"corpus: {len(files)} files in {args.root}")
