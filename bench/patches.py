#!/usr/bin/env python3
"""Issue 32: binary deltas (hcpack delta's Zstandard patches) against xdelta3 -9 and bsdiff, on a corpus this
script builds itself (bench/README.md, "Binary deltas"):

- asset: a 256 MiB packed asset file (incompressible, like packed textures), then 1% of its 4 KiB blocks
  rewritten and 1 MiB inserted in the middle;
- sqlite: a ~20 MiB SQLite database made with Python's sqlite3, then 2% of its rows updated;
- json: 200 JSON files of ~15 KiB, then small edits in 40 of them;
- media: 8 "re-encoded" media files of 2 MiB (new random bytes: nothing to gain).

For each case, in the same run: the delta's size against the full archive of the new version and against
xdelta3 -9 and bsdiff of the changed files (summed); the time to make each; installing the new version over
the old through the delta against the full archive; peak RSS of every command (bench/measure.c). Commands under a second run 5 times, each keeping its best.
BSDIFF=0 skips bsdiff (minutes and gigabytes on the 256 MiB file); CASES=asset,json picks cases.
"""
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time
import zipfile

HCPACK = os.environ.get("HCPACK", "hcpack")
WORK = os.path.join(os.environ.get("BENCH_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")), "patches")
CASES = os.environ.get("CASES", "asset,sqlite,json,media").split(",")
BSDIFF = os.environ.get("BSDIFF", "1") not in ("", "0")
NO_SIZE_LIMIT = ["--max-size", str(1 << 40)]
SHORT_RUNS = 5
MiB = 1 << 20


def measurer():
    """bench/measure.c, compiled once into bench/out (cc, or the Swift toolchain's clang)."""
    here = os.path.dirname(os.path.abspath(__file__))
    binary = os.path.join(os.path.dirname(WORK), "measure")
    source = os.path.join(here, "measure.c")
    if not os.path.exists(binary) or os.path.getmtime(binary) < os.path.getmtime(source):
        os.makedirs(os.path.dirname(binary), exist_ok=True)
        compiler = shutil.which("cc") or shutil.which("clang")
        if compiler is None:
            sys.exit("bench/patches.py needs a C compiler (cc or clang) for bench/measure.c")
        subprocess.run([compiler, "-O2", "-o", binary, source], check=True)
    return binary


def timed(command, cwd=None):
    """Runs a command; returns (wall seconds, peak RSS in KiB, CPU seconds: user + system) of the command itself
    and nothing else (bench/measure.c says why not GNU time). CPU time is the figure to compare on a loaded
    machine, where wall time includes waiting."""
    result = subprocess.run([MEASURE] + command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}): {' '.join(command)}\n{result.stderr.decode(errors='replace')}")
    wall, cpu, rss = result.stderr.decode().strip().splitlines()[-1].split()[1:]
    return float(wall), int(rss), float(cpu)


def best(runs):
    """The best of several (wall, RSS, CPU) runs of one command: least wall and CPU, most RSS."""
    return min(w for w, _, _ in runs), max(m for _, m, _ in runs), min(c for _, _, c in runs)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)


def package(root, version, files):
    """A package folder: ContentInfo.plist and files {relative path: bytes or a source path to copy}."""
    for name, data in files.items():
        target = os.path.join(root, "Contents", name)
        if isinstance(data, str):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(data, target)
        else:
            write(target, data)
    write(os.path.join(root, "ContentInfo.plist"), (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" '
        '"http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n<plist version="1.0">\n<dict>\n'
        '<key>IAPProductIdentifier</key><string>com.example.bench</string>\n'
        f'<key>ContentVersion</key><string>{version}</string>\n</dict>\n</plist>\n').encode())


def asset_case(out, rng):
    size = 256 * MiB
    old = bytearray(b"".join(rng.randbytes(MiB) for _ in range(size // MiB)))
    new = bytearray(old)
    blocks = size // 4096
    for block in rng.sample(range(blocks), blocks // 100):
        new[block * 4096:(block + 1) * 4096] = rng.randbytes(4096)
    new[size // 2:size // 2] = rng.randbytes(MiB)
    return {"assets.pak": bytes(old), "readme.txt": b"assets\n"}, {"assets.pak": bytes(new), "readme.txt": b"assets\n"}


def sqlite_case(out, rng):
    path = os.path.join(out, "levels.db")
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, word TEXT, definition TEXT, score INTEGER)")
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8)) for _ in range(5000)]
    rows = 160_000
    connection.executemany("INSERT INTO entries VALUES (?, ?, ?, ?)", (
        (i, rng.choice(words), " ".join(rng.choice(words) for _ in range(12)), rng.randrange(1000)) for i in range(rows)))
    connection.commit()
    connection.close()
    with open(path, "rb") as handle:
        old = handle.read()
    connection = sqlite3.connect(path)
    updated = rng.sample(range(rows), rows // 50)
    connection.executemany("UPDATE entries SET score = ?, definition = ? WHERE id = ?", (
        (rng.randrange(1000), " ".join(rng.choice(words) for _ in range(12)), i) for i in updated))
    connection.commit()
    connection.close()
    with open(path, "rb") as handle:
        new = handle.read()
    os.remove(path)
    return {"levels.db": old}, {"levels.db": new}


def json_case(out, rng):
    old, new = {}, {}
    for index in range(200):
        entries = [{"id": i, "name": f"level {index}-{i}", "tiles": [rng.randrange(64) for _ in range(24)],
                    "score": rng.randrange(10000)} for i in range(110)]
        text = "[\n" + ",\n".join(repr(e).replace("'", '"') for e in entries) + "\n]\n"
        old[f"levels/{index:03}.json"] = text.encode()
        if index % 5 == 0:
            for entry in rng.sample(entries, 3):
                entry["score"] = rng.randrange(10000)
            text = "[\n" + ",\n".join(repr(e).replace("'", '"') for e in entries) + "\n]\n"
        new[f"levels/{index:03}.json"] = text.encode()
    return old, new


def media_case(out, rng):
    return ({f"media/clip{i}.m4a": rng.randbytes(2 * MiB) for i in range(8)},
            {f"media/clip{i}.m4a": rng.randbytes(2 * MiB) for i in range(8)})


def run_case(name, make):
    out = os.path.join(WORK, name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = random.Random(32)
    old, new = make(out, rng)
    changed = sorted(path for path in new if old.get(path) != new[path])
    src1, src2 = os.path.join(out, "src-1.0"), os.path.join(out, "src-1.1")
    package(src1, "1.0", old)
    package(src2, "1.1", new)
    del old, new
    v1, v2, delta = (os.path.join(out, n) for n in ("v1.zip", "v2.zip", "delta.zip"))
    subprocess.run([HCPACK, "build", src1, "-o", v1, "--quiet"] + NO_SIZE_LIMIT, check=True)
    subprocess.run([HCPACK, "build", src2, "-o", v2, "--quiet"] + NO_SIZE_LIMIT, check=True)
    # Commands under a second run SHORT_RUNS times, hcpack's and the other tools' alike, and keep their best:
    # one run of 30 ms varies by 10% on a shared machine.
    make = [timed([HCPACK, "delta", v1, v2, "-o", delta, "--quiet"] + NO_SIZE_LIMIT)]
    while make[0][0] < 1 and len(make) < SHORT_RUNS:
        os.remove(delta)
        make.append(timed([HCPACK, "delta", v1, v2, "-o", delta, "--quiet"] + NO_SIZE_LIMIT))
    make_s, make_rss, make_cpu = best(make)

    # xdelta3 -9 and bsdiff of each changed file, summed.
    tools = {"xdelta3 -9": lambda a, b, p: ["xdelta3", "-9", "-f", "-e", "-s", a, b, p]}
    if BSDIFF:
        tools["bsdiff"] = lambda a, b, p: ["bsdiff", a, b, p]
    others = {}
    for tool, argv in tools.items():
        # Each file's best of its runs, summed.
        total, seconds, rss, cpu = 0, 0.0, 0, 0.0
        for path in changed:
            a, b = os.path.join(src1, "Contents", path), os.path.join(src2, "Contents", path)
            patch = os.path.join(out, "other.patch")
            runs = [timed(argv(a, b, patch))]
            while runs[0][0] < 1 and len(runs) < SHORT_RUNS:
                runs.append(timed(argv(a, b, patch)))
            wall, peak, used = best(runs)
            total += os.path.getsize(patch)
            seconds += wall
            cpu += used
            rss = max(rss, peak)
            os.remove(patch)
        others[tool] = (total, seconds, rss, cpu)

    base = os.path.join(out, "base")
    os.makedirs(base)
    subprocess.run([HCPACK, "install", v1, "--dest", base, "--quiet"] + NO_SIZE_LIMIT, check=True)
    # Alternating (delta, full, delta, full): the first runs come while the corpus just written is still
    # being flushed, and one kind run first took that alone (asset: 1.85 s against 1.30 s that way, then
    # 0.84 s against 0.75 s alternating, same binary).
    runs = {"delta": [], "full": []}
    for rep in range(2):
        for label, archive in (("delta", delta), ("full", v2)):
            dest = os.path.join(out, f"dest-{label}-{rep}")
            subprocess.run(["cp", "-a", base, dest], check=True)
            os.sync()
            runs[label].append(timed([HCPACK, "install", archive, "--dest", dest, "--quiet"] + NO_SIZE_LIMIT))
    installs = {label: best(r) for label, r in runs.items()}
    # The delta's result is exactly the full install's.
    same = subprocess.run(["diff", "-r", "-x", ".hcpack", os.path.join(out, "dest-delta-0"), os.path.join(out, "dest-full-0")],
                          capture_output=True).returncode == 0
    sizes = {"full": os.path.getsize(v2), "delta": os.path.getsize(delta)}
    # The changed files' bytes in the delta (patches and whole files, as stored), without the plist (NEW's Files
    # and integrity records for every file) and the zip's headers: what compares with xdelta3 and bsdiff.
    with zipfile.ZipFile(delta) as archive:
        sizes["data"] = sum(i.compress_size for i in archive.infolist() if i.filename.startswith("Contents/"))
        sizes["plist"] = archive.getinfo("ContentInfo.plist").compress_size
    changed_bytes = sum(os.path.getsize(os.path.join(src2, "Contents", p)) for p in changed)
    shutil.rmtree(out)
    return {"name": name, "changed": len(changed), "changed_bytes": changed_bytes, "sizes": sizes, "make": (make_s, make_rss, make_cpu),
            "others": others, "installs": installs, "same": same}


def main():
    global MEASURE
    MEASURE = measurer()
    makers = {"asset": asset_case, "sqlite": sqlite_case, "json": json_case, "media": media_case}
    results = [run_case(name, makers[name]) for name in CASES if name in makers]
    print("binary deltas (issue 32): sizes in bytes, times in seconds (wall, then CPU: user + system; best of 5 runs under a second, install best of 2), peak RSS in MiB")
    print()
    print("| case | changed | full archive | delta | of which plist | of which file data | xdelta3 -9 | bsdiff | delta / min | data / min |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        x = r["others"]["xdelta3 -9"][0]
        b = r["others"].get("bsdiff", (None,))[0]
        best = min(v for v in (x, b) if v is not None)
        z = r["sizes"]
        print(f"| {r['name']} | {r['changed']} files, {r['changed_bytes'] / MiB:.1f} MiB | {z['full']} | {z['delta']} | {z['plist']} "
              f"| {z['data']} | {x} | {b if b is not None else '-'} | {z['delta'] / best:.3f} | {z['data'] / best:.3f} |")
    print()
    print("| case | make: hcpack delta s, CPU s (RSS) | xdelta3 -9 s, CPU s (RSS) | bsdiff s, CPU s (RSS) | bsdiff / hcpack, CPU | install: delta s, CPU s (RSS) | full s, CPU s (RSS) | delta / full | same files |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in results:
        ms, mr, mc = r["make"]
        x = r["others"]["xdelta3 -9"]
        b = r["others"].get("bsdiff")
        (ds, dr, dc), (fs, fr, fc) = r["installs"]["delta"], r["installs"]["full"]
        btext = f"{b[1]:.3f}, {b[3]:.3f} ({b[2] / 1024:.0f})" if b else "-"
        bratio = f"{b[3] / mc:.1f}" if b and mc > 0 else "-"
        print(f"| {r['name']} | {ms:.3f}, {mc:.3f} ({mr / 1024:.0f}) | {x[1]:.2f}, {x[3]:.2f} ({x[2] / 1024:.0f}) | {btext} | {bratio} "
              f"| {ds:.2f}, {dc:.2f} ({dr / 1024:.0f}) | {fs:.2f}, {fc:.2f} ({fr / 1024:.0f}) | {ds / fs:.2f} | {'yes' if r['same'] else 'NO'} |")

if __name__ == "__main__":
    main()
