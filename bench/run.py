#!/usr/bin/env python3
"""hcpack against zip, unzip, bsdtar and sha256sum, side by side on one corpus.

Each pair runs alternately, REPS times; the table shows median wall seconds, peak RSS (GNU time's %M, what
/usr/bin/time -v reports as "Maximum resident set size") and the ratio hcpack / baseline.
"""
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HCPACK = os.environ.get("HCPACK", "hcpack")
REPS = int(os.environ.get("REPS", "5"))
WORK = os.environ.get("BENCH_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
SCALE = os.environ.get("SCALE", "1")
MANY_SMALL = os.environ.get("MANY_SMALL", "") not in ("", "0")
# BENCH_TMPFS=1: outputs and install folders on a tmpfs mounted for the run (the corpus stays on disk, read into
# the page cache before every timed run), so what is timed is the commands' own work, not the disk's.
TMPFS = os.environ.get("BENCH_TMPFS", "") not in ("", "0")
# ONLY=delta runs only the delta figures (issue 14); ONLY=main only the comparisons with zip, unzip, bsdtar.
ONLY = os.environ.get("ONLY", "")
# SCALE=8 is just over hosted content's 2 GB default limit.
NO_SIZE_LIMIT = ["--max-size", str(1 << 40)]


def warm(paths):
    """Reads files (folders recursively) so that they are in the page cache.

    This machine's kernel pages out memory untouched for about a minute (DAMON), so without this the first
    command of a pair, or any after a pause, would read its input from disk and the other from memory.
    """
    for path in paths:
        files = [path] if os.path.isfile(path) else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
        for name in files:
            with open(name, "rb", buffering=0) as handle:
                while handle.read(1 << 20):
                    pass


def timed(command, cwd=None, before=None, inputs=()):
    """Runs a command once; returns (wall seconds, peak RSS in KiB).

    `before` may return a folder, which replaces "{dir}" in the command. Untimed first: `inputs` are read
    into the page cache, and `sync` makes sure no command waits for the writeback of the one before it.
    """
    folder = before() if before else None
    if folder:
        command = [a.replace("{dir}", folder) for a in command]
    warm(inputs)
    os.sync()
    # GNU time reports the command's own peak RSS: a child forked from Python would start with Python's.
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        process = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", report.name] + command, cwd=cwd,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, _ = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        report_text = report.read().strip()
    stderr = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"command failed ({code}): {' '.join(command)}\n{stderr}")
    return wall, int(report_text.splitlines()[-1])


def fresh(path):
    def reset():
        shutil.rmtree(path, ignore_errors=True)
        if not path.endswith((".zip", ".gz")):
            os.makedirs(path)
        elif os.path.exists(path):
            os.remove(path)
    return reset


def unique(path):
    """A new empty folder per run, `path-1`, `path-2`, ...: nothing is deleted between timed runs.

    On ext4 without a journal (this machine), deleting thousands of files and creating thousands right
    after makes every new inode skip the "recently deleted" ones (60 s or more), which costs whichever
    command runs next more than the command itself.
    """
    counter = [0]
    def reset():
        counter[0] += 1
        os.makedirs(f"{path}-{counter[0]}")
        return f"{path}-{counter[0]}"
    return reset


def remove_all(*prefixes):
    """Removes the folders `unique` made, then waits out ext4's "recently deleted" window (60 s)."""
    removed = False
    for prefix in prefixes:
        parent, name = os.path.split(prefix)
        for entry in os.listdir(parent):
            if entry.startswith(name + "-"):
                shutil.rmtree(os.path.join(parent, entry))
                removed = True
    if removed and not TMPFS:  # tmpfs has no inode table to wait for
        os.sync()
        time.sleep(61)


def pair(label, ours, theirs, inputs, reps=REPS):
    """Alternates the two commands, each (argv, cwd, reset), with `inputs` in the page cache.

    Which one goes first changes every repetition: on this disk the command right after the other one's
    large write (synced, but the virtual disk still busy) ran up to 15% slower.
    """
    results = {"ours": [], "theirs": []}
    for rep in range(reps):
        order = (("ours", ours), ("theirs", theirs))
        for key, (argv, cwd, reset) in (order if rep % 2 == 0 else order[::-1]):
            results[key].append(timed(argv, cwd, reset, inputs))
    row = []
    for key, (argv, _, _) in (("ours", ours), ("theirs", theirs)):
        walls = [w for w, _ in results[key]]
        rss = max(r for _, r in results[key])
        row.append((" ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv[:3])), statistics.median(walls), rss))
    ratio = row[0][1] / row[1][1] if row[1][1] > 0 else float("nan")
    return label, row, ratio


def copies(source, path):
    """A fresh copy of the folder `source` per run, `path-1`, `path-2`, ... (see `unique`)."""
    counter = [0]
    def reset():
        counter[0] += 1
        target = f"{path}-{counter[0]}"
        subprocess.run(["cp", "-a", source, target], check=True)
        return target
    return reset


def delta_bench(corpus):
    """Issue 14: version 1.1 of the corpus with 5% of its files changed (same sizes, new bytes), as a full
    archive and as a delta from 1.0; the delta's size against the full archive and against the changed files
    zipped alone, and installing 1.1 over 1.0 through the delta against the full archive."""
    out = os.path.join(WORK, "delta")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    newer = os.path.join(out, "corpus-1.1")
    shutil.copytree(corpus, newer)
    contents = os.path.join(newer, "Contents")
    files = sorted(os.path.relpath(os.path.join(d, f), contents) for d, _, fs in os.walk(contents) for f in fs)
    rng = random.Random(14)
    changed = files[::20]
    for name in changed:
        path = os.path.join(contents, name)
        size = os.path.getsize(path)
        with open(path, "wb") as handle:
            handle.write(rng.randbytes(size) if name.endswith((".mp4", ".jpg")) else
                         bytes(rng.choice(b"abcdefghij {}:,\n") for _ in range(size)))
    plist = os.path.join(newer, "ContentInfo.plist")
    with open(plist) as handle:
        text = handle.read().replace("<string>1.0</string>", "<string>1.1</string>")
    with open(plist, "w") as handle:
        handle.write(text)
    v1, v2, patch = (os.path.join(out, name) for name in ("v1.zip", "v2.zip", "delta.zip"))
    subprocess.run([HCPACK, "build", corpus, "-o", v1, "--quiet"] + NO_SIZE_LIMIT, check=True)
    subprocess.run([HCPACK, "build", newer, "-o", v2, "--quiet"] + NO_SIZE_LIMIT, check=True)
    start = time.perf_counter()
    subprocess.run([HCPACK, "delta", v1, v2, "-o", patch, "--quiet"] + NO_SIZE_LIMIT, check=True)
    delta_seconds = time.perf_counter() - start
    alone = os.path.join(out, "changed-alone.zip")
    subprocess.run(["zip", "-q", "-X", alone, "-@"], cwd=contents, input="\n".join(changed).encode(), check=True)
    base = os.path.join(out, "base")
    os.makedirs(base)
    subprocess.run([HCPACK, "install", v1, "--dest", base, "--quiet"] + NO_SIZE_LIMIT, check=True)
    through, full = os.path.join(out, "through-delta"), os.path.join(out, "full")
    reps = min(REPS, 3)
    row = pair("install 1.1 over 1.0: delta vs full archive",
               ([HCPACK, "install", patch, "--dest", "{dir}", "--quiet"] + NO_SIZE_LIMIT, None, copies(base, through)),
               ([HCPACK, "install", v2, "--dest", "{dir}", "--quiet"] + NO_SIZE_LIMIT, None, copies(base, full)),
               [patch, v2], reps=reps)
    changed_bytes = sum(os.path.getsize(os.path.join(contents, name)) for name in changed)
    sizes = {name: os.path.getsize(path) for name, path in (("full", v2), ("delta", patch), ("alone", alone))}
    shutil.rmtree(out)
    os.sync()
    (_, w1, r1), (_, w2, r2) = row[1]
    ratio = row[2]
    print(f"delta (issue 14): {len(changed)} of {len(files)} files changed ({changed_bytes / 2**20:.1f} MiB); "
          f"{reps} alternating runs each, medians")
    print()
    print("| archive | bytes | vs full |")
    print("| --- | ---: | ---: |")
    print(f"| full 1.1 archive (`hcpack build`) | {sizes['full']} | 1.000 |")
    print(f"| delta 1.0 -> 1.1 (`hcpack delta`, {delta_seconds:.2f} s to make) | {sizes['delta']} | {sizes['delta'] / sizes['full']:.3f} |")
    print(f"| the changed files alone (`zip -q`) | {sizes['alone']} | {sizes['alone'] / sizes['full']:.3f} |")
    print()
    print("| install 1.1 over 1.0 | s | peak RSS MiB |")
    print("| --- | ---: | ---: |")
    print(f"| through the delta | {w1:.2f} | {r1 / 1024:.1f} |")
    print(f"| full archive | {w2:.2f} | {r2 / 1024:.1f} |")
    print(f"| ratio | {ratio:.2f} | |")


def main():
    corpus = os.path.join(WORK, "corpus")
    if not os.path.isdir(corpus):
        args = [sys.executable, os.path.join(os.path.dirname(__file__), "corpus.py"), corpus, "--scale", SCALE]
        if MANY_SMALL:
            args.append("--many-small")
        subprocess.run(args, check=True)
    if ONLY == "delta":
        delta_bench(corpus)
        return
    contents = os.path.join(corpus, "Contents")
    out = os.path.join(WORK, "tmp")
    ram = os.path.join(WORK, "ram")
    if TMPFS:
        os.makedirs(ram, exist_ok=True)
        if not os.path.ismount(ram):
            subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12g", "hcpack-bench", ram], check=True)
        out = os.path.join(ram, "tmp")
    if os.path.exists(out):
        # Outputs of an earlier run: removed, then the "recently deleted" window waited out (see unique).
        shutil.rmtree(out)
        os.sync()
        time.sleep(61)
    os.makedirs(out)
    ours_zip, theirs_zip = os.path.join(out, "hc.zip"), os.path.join(out, "zip.zip")
    rows = []
    rows.append(pair("build (auto) vs zip -qr",
                     ([HCPACK, "build", corpus, "-o", ours_zip, "--force", "--quiet"] + NO_SIZE_LIMIT, None, fresh(ours_zip)),
                     (["zip", "-qr", theirs_zip, "ContentInfo.plist", "Contents"], corpus, fresh(theirs_zip)),
                     [corpus]))
    sizes = (os.path.getsize(ours_zip), os.path.getsize(theirs_zip))
    ours_store, theirs_store = os.path.join(out, "hc-store.zip"), os.path.join(out, "zip-store.zip")
    rows.append(pair("build (store) vs zip -qr -0",
                     ([HCPACK, "build", corpus, "-o", ours_store, "--compression", "store", "--force", "--quiet"] + NO_SIZE_LIMIT,
                      None, fresh(ours_store)),
                     (["zip", "-qr", "-0", theirs_store, "ContentInfo.plist", "Contents"], corpus, fresh(theirs_store)),
                     [corpus]))
    # Rebuild the archive the later rows read (the timed runs above leave the last one in place).
    subprocess.run([HCPACK, "build", corpus, "-o", ours_zip, "--force", "--quiet"] + NO_SIZE_LIMIT, check=True)
    unpacked = os.path.join(out, "unpacked")
    fresh(unpacked)()
    subprocess.run(["unzip", "-q", ours_zip, "-d", unpacked], check=True)
    listing = sorted(os.path.relpath(os.path.join(d, f), unpacked) for d, _, fs in os.walk(unpacked) for f in fs)
    # Through xargs: 100,000 names (MANY_SMALL) are more than one command line holds.
    names = os.path.join(out, "names")
    with open(names, "w") as handle:
        handle.write("".join(name + "\0" for name in listing))
    rows.append(pair("verify archive vs sha256sum",
                     ([HCPACK, "verify", "--quiet", ours_zip] + NO_SIZE_LIMIT, None, None),
                     (["xargs", "-0", "-a", names, "sha256sum", "--"], unpacked, None),
                     [ours_zip, unpacked]))
    dest, plain = os.path.join(out, "dest"), os.path.join(out, "plain")
    rows.append(pair("install vs unzip -q",
                     ([HCPACK, "install", ours_zip, "--dest", "{dir}", "--quiet"] + NO_SIZE_LIMIT, None, unique(dest)),
                     (["unzip", "-q", ours_zip, "-d", "{dir}"], None, unique(plain)),
                     [ours_zip]))
    remove_all(dest, plain)
    rows.append(pair("install vs bsdtar -xf",
                     ([HCPACK, "install", ours_zip, "--dest", "{dir}", "--quiet"] + NO_SIZE_LIMIT, None, unique(dest)),
                     (["bsdtar", "-xf", ours_zip, "-C", "{dir}"], None, unique(plain)),
                     [ours_zip]))
    shutil.rmtree(out)  # gigabytes of runs; the next `make bench` starts clean
    if TMPFS:
        subprocess.run(["umount", ram], check=True)
    os.sync()

    total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(contents) for f in fs)
    count = sum(len(fs) for _, _, fs in os.walk(contents))
    print(f"corpus: {count} files, {total / 2**20:.0f} MiB; {REPS} alternating runs each, medians; "
          f"{os.cpu_count()} cores; outputs on {'tmpfs (RAM disk)' if TMPFS else 'disk'}")
    print()
    print("| pair | hcpack command | s | peak RSS MiB | baseline | s | peak RSS MiB | ratio |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for label, ((c1, w1, r1), (c2, w2, r2)), ratio in rows:
        print(f"| {label} | `{c1}` | {w1:.2f} | {r1 / 1024:.1f} | `{c2}` | {w2:.2f} | {r2 / 1024:.1f} | {ratio:.2f} |")
    print()
    growth = sizes[0] / sizes[1] - 1
    print(f"archive sizes: hcpack {sizes[0]} bytes, zip {sizes[1]} bytes ({growth * 100:+.2f}%)")
    print()
    if ONLY != "main" and not TMPFS:  # once per `make bench`, with the disk mode
        delta_bench(corpus)
        print()
    if MANY_SMALL:
        # Issue 5's ratios are for the default and SCALE=8 corpora; this one checks growth with the file count.
        print(f"per file: build {rows[0][1][0][1] / count * 1000:.3f} ms, verify {rows[2][1][0][1] / count * 1000:.3f} ms, "
              f"install {rows[3][1][0][1] / count * 1000:.3f} ms (compare with the default corpus for linear growth)")
        return
    # The targets in row order: issue 5 on disk, issue 16 on the RAM disk; every hcpack command's peak RSS too.
    ratios = [ratio for _, _, ratio in rows]
    peak = max(r1 for _, ((_, _, r1), _), _ in rows) / 1024
    if TMPFS:
        # The targets of issue 16, for the RAM-disk mode.
        targets = [
            ("build (auto) <= 0.15 x zip -qr", f"{ratios[0]:.2f}", ratios[0] <= 0.15),
            ("build (store) <= 0.6 x zip -qr -0", f"{ratios[1]:.2f}", ratios[1] <= 0.6),
            ("verify <= 0.25 x sha256sum", f"{ratios[2]:.2f}", ratios[2] <= 0.25),
            ("install <= 0.4 x unzip -q", f"{ratios[3]:.2f}", ratios[3] <= 0.4),
            ("install <= 1.0 x bsdtar -xf", f"{ratios[4]:.2f}", ratios[4] <= 1.0),
            ("peak RSS of every hcpack command < 48 MiB", f"{peak:.1f} MiB", peak < 48),
        ]
    else:
        targets = [
            ("build (auto) <= 0.35 x zip -qr, archive <= +2%", f"{ratios[0]:.2f}, {growth * 100:+.2f}%", ratios[0] <= 0.35 and growth <= 0.02),
            ("build (store) <= 0.8 x zip -qr -0", f"{ratios[1]:.2f}", ratios[1] <= 0.8),
            ("verify <= 0.3 x sha256sum", f"{ratios[2]:.2f}", ratios[2] <= 0.3),
            ("install <= 0.7 x unzip -q", f"{ratios[3]:.2f}", ratios[3] <= 0.7),
            ("install <= 1.3 x bsdtar -xf", f"{ratios[4]:.2f}", ratios[4] <= 1.3),
            ("peak RSS of every hcpack command < 64 MiB", f"{peak:.1f} MiB", peak < 64),
        ]
    print(f"| target{' (RAM disk)' if TMPFS else ''} | measured | met |")
    print("| --- | ---: | --- |")
    for target, measured, met in targets:
        print(f"| {target} | {measured} | {'yes' if met else 'no'} |")


if __name__ == "__main__":
    main()
