#!/usr/bin/env python3
"""Start-up CPU of two hcpack binaries side by side (bench/README.md, "start-up: libcurl loaded only for fetch").

    HCPACK_OLD=/path/to/old/hcpack HCPACK=/path/to/new/hcpack python3 bench/startup.py

Mean CPU (user + system, from getrusage of the children) over RUNS runs (default 100) of `hcpack --version`,
`hcpack verify` of examples/chess-openings built as a zip, `hcpack delta` of the json case of bench/patches.py
(200 files, 40 changed), and a `hcpack fetch` of a catalog that is not there (exit 3 once its HTTP client is
made: start-up and loading libcurl). The two binaries alternate run by run, so both see the same load.
"""
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile

import patches

OLD = os.environ.get("HCPACK_OLD")
NEW = os.environ.get("HCPACK", "hcpack")
RUNS = int(os.environ.get("RUNS", "100"))
HERE = os.path.dirname(os.path.abspath(__file__))


def cpu(command, status=0):
    """CPU seconds (user + system) of one run of `command`, which must exit with `status`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != status:
        sys.exit(f"command failed ({result.returncode}): {' '.join(command)}\n{result.stderr.decode(errors='replace')}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    if not OLD:
        sys.exit("set HCPACK_OLD to the binary to compare with (and HCPACK to the new one)")
    with tempfile.TemporaryDirectory() as work:
        chess = os.path.join(work, "chess.zip")
        subprocess.run([NEW, "build", os.path.join(HERE, "..", "examples", "chess-openings"), "-o", chess, "--quiet"], check=True)
        old, new = patches.json_case(work, random.Random(32))
        versions = []
        for version, files in (("1.0", old), ("1.1", new)):
            source = os.path.join(work, f"src-{version}")
            patches.package(source, version, files)
            archive = os.path.join(work, f"v{version}.zip")
            subprocess.run([NEW, "build", source, "-o", archive, "--quiet"], check=True)
            versions.append(archive)
        delta = os.path.join(work, "delta.zip")
        key, dest = os.path.join(work, "release.key"), os.path.join(work, "dest")
        subprocess.run([NEW, "keygen", "--name", "example.com/startup", "-o", key], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.makedirs(dest)
        commands = {
            "--version": (["--version"], 0),
            "verify chess.zip": (["verify", chess], 0),
            "delta (json case)": (["delta", *versions, "-o", delta, "--force", "--quiet"], 0),
            "fetch (no catalog)": (["fetch", os.path.join(work, "none.json"), "--trusted-key", key + ".pub", "--dest", dest], 3),
        }
        binaries = {"old": OLD, "new": NEW}
        print(f"mean CPU seconds (user + system) over {RUNS} runs each, old and new alternating; median in brackets")
        print()
        print("| command | old | new | new - old |")
        print("| --- | ---: | ---: | ---: |")
        for label, (arguments, status) in commands.items():
            times = {name: [] for name in binaries}
            for _ in range(RUNS):
                for name, binary in binaries.items():
                    times[name].append(cpu([binary, *arguments], status))
            means = {name: statistics.mean(values) for name, values in times.items()}
            medians = {name: statistics.median(values) for name, values in times.items()}
            print(f"| `hcpack {label}` | {means['old']:.4f} ({medians['old']:.4f}) | {means['new']:.4f} ({medians['new']:.4f}) "
                  f"| {means['new'] - means['old']:+.4f} |")


if __name__ == "__main__":
    main()
