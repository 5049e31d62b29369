#!/usr/bin/env python3
"""Pathological inputs of issue 18, generated here: each must end quickly and in little memory.

- one pax path of 500,000 bytes (`a/a/a/...`): verify refuses it (content.long-path);
- 10,000 entries with 1,000-byte paths, all listed: verify accepts it;
- 20,000 empty unlisted entries in 20 folders: install places the one listed file and removes the rest
  (the figures the suite's InstallHostileTests.manyEntries no longer asserts: time belongs here);
- a gzip whose content is a gzip with a 1 GiB file-name field that never ends: verify refuses it
  (archive.nested-compression); bsdtar -tf, which lets libarchive stack filters, is shown for comparison
  and stopped after BSDTAR_TIMEOUT seconds;
- a 60 MiB catalog beside another catalog's note: verify-catalog refuses it on its SHA-256, unparsed (issue 25).

Prints one markdown table: wall seconds, peak RSS (GNU time's %M), exit status and the rules reported.
"""
import io
import os
import plistlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib

HCPACK = os.environ.get("HCPACK", "hcpack")
BSDTAR_TIMEOUT = float(os.environ.get("BSDTAR_TIMEOUT", "10"))


def run(command):
    """(wall seconds, CPU seconds, peak RSS KiB, exit status, output) of one run under GNU time."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        process = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", report.name] + command,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - start
        lines = report.read().strip().splitlines()
    rss, user, system = lines[-1].split()
    return wall, float(user) + float(system), int(rss), process.returncode, process.stdout.decode(errors="replace")


def run_killed(command, timeout):
    """(wall seconds, peak RSS KiB, status) of a command stopped (SIGKILL, by its pid) after `timeout` s; the
    peak is sampled from /proc (VmHWM) every 50 ms, since GNU time cannot report a killed child."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = 0
    while process.poll() is None and time.perf_counter() - start < timeout:
        try:
            with open(f"/proc/{process.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.05)
    status = process.poll()
    if status is None:
        process.kill()
        process.wait()
        status = f"killed at {timeout:g} s"
    return time.perf_counter() - start, peak, status


def plist(files):
    return plistlib.dumps({"IAPProductIdentifier": "com.example.bench", "ContentVersion": "1.0", "Files": files})


def add(t, name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))


def long_path(folder):
    path = os.path.join(folder, "long-path.tar")
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        add(t, "ContentInfo.plist", plist(["a.json"]))
        add(t, "Contents/a.json", b"{}")
        add(t, "Contents/" + "a/" * 249_995 + "a")  # 500,000 bytes with "Contents/"
    return path


def many_long_paths(folder, count=10_000, length=1_000):
    path = os.path.join(folder, "many-long-paths.tar")
    names = []
    for index in range(count):
        # 20 folders of 40 bytes under one of 50 top folders, then a file name that pads to `length`.
        stem = f"{index % 50:02d}/" + "/".join([f"{level:02d}" + "f" * 38 for level in range(20)]) + f"/{index:05d}-"
        names.append(stem + "n" * (length - len("Contents/") - len(stem)))
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        add(t, "ContentInfo.plist", plist(names))
        for name in names:
            add(t, "Contents/" + name, b"{}")
    assert all(len("Contents/" + name) == length for name in names)
    return path


def many_entries(folder, count=20_000):
    path = os.path.join(folder, "many-entries.tar.gz")
    with tarfile.open(path, "w:gz", compresslevel=1) as t:
        add(t, "ContentInfo.plist", plist(["a.json"]))
        add(t, "Contents/a.json", b"{}")
        for k in range(count):
            add(t, "Contents/many/%d/%d" % (k // 1000, k), b"")
    return path


def gzip_in_gzip(folder, name_bytes=1 << 30):
    """A gzip member whose content is a gzip header with FNAME set and `name_bytes` of name, no NUL."""
    path = os.path.join(folder, "gzip-in-gzip.gz")
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip wrapper
    chunk = b"a" * (1 << 24)
    with open(path, "wb") as out:
        out.write(compressor.compress(b"\x1f\x8b\x08\x08" + bytes(6)))
        for _ in range(name_bytes // len(chunk)):
            out.write(compressor.compress(chunk))
        out.write(compressor.flush())
    return path


def catalog_wrong_note(folder, size=60 << 20):
    """A 60 MiB JSON catalog beside the validly signed note of another catalog (issue 25): verify-catalog must
    refuse it on its SHA-256, before parsing. Returns the verify-catalog command."""
    def quiet(*arguments):
        subprocess.run([HCPACK, *arguments], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    quiet("init", os.path.join(folder, "pkg"), "--product-id", "com.example.levels")
    quiet("build", os.path.join(folder, "pkg"), "-o", os.path.join(folder, "a.zip"))
    quiet("keygen", "--name", "example.com/bench", "-o", os.path.join(folder, "k.key"))
    small = os.path.join(folder, "small.json")
    quiet("catalog", os.path.join(folder, "a.zip"), "--base-url", "https://x", "-o", small, "--serial", "1",
          "--sign-key", os.path.join(folder, "k.key"))
    big = os.path.join(folder, "catalog.json")
    item = b'"' + b"a" * 63 + b'",'
    with open(big, "wb") as out:
        out.write(b'{"format":"hcpack-catalog-1","serial":1,"packages":[' + item * (size // len(item)) + b'"x"]}')
    os.replace(small + ".hcsig", big + ".hcsig")
    return big, ["verify-catalog", big, "--trusted-key", os.path.join(folder, "k.key.pub")]


def main():
    folder = tempfile.mkdtemp(prefix="hcpack-pathological-")
    cases = [
        ("500 kB pax path", long_path(folder)),
        ("10,000 entries with 1,000-byte paths", many_long_paths(folder)),
        ("gzip in gzip, 1 GiB name field", gzip_in_gzip(folder)),
    ]
    # CPU seconds as well as wall: on a shared machine the wall time also measures the neighbours.
    print("| input | archive bytes | command | wall s | CPU s | peak RSS MiB | exit | rules |")
    print("| --- | ---: | --- | ---: | ---: | ---: | --- | --- |")
    for label, path in cases:
        wall, cpu, rss, status, output = run([HCPACK, "verify", path])
        rules = sorted(set(re.findall(r"\[([a-z]+\.[a-z-]+)\]", output))) or ["none"]
        print(f"| {label} | {os.path.getsize(path)} | `hcpack verify` | {wall:.2f} | {cpu:.2f} | {rss / 1024:.1f} | {status} | "
              f"{', '.join(rules)} |")
    many = many_entries(folder)
    dest = os.path.join(folder, "dest")
    os.mkdir(dest)
    wall, cpu, rss, status, output = run([HCPACK, "install", many, "--dest", dest, "--quiet"])
    print(f"| 20,000 empty unlisted entries | {os.path.getsize(many)} | `hcpack install` | {wall:.2f} | {cpu:.2f} | "
          f"{rss / 1024:.1f} | {status} | |")
    subprocess.run(["rm", "-rf", dest, many], check=True)
    wall, rss, status = run_killed(["bsdtar", "-tf", cases[2][1]], BSDTAR_TIMEOUT)
    print(f"| {cases[2][0]} | {os.path.getsize(cases[2][1])} | `bsdtar -tf` | {wall:.2f} | | {rss / 1024:.1f} | "
          f"{status} | |")
    catalog, command = catalog_wrong_note(folder)
    wall, cpu, rss, status, output = run([HCPACK] + command)
    verdict = "SHA-256 refused" if "is not the catalog signed in" in output else "unexpected"
    print(f"| 60 MiB catalog, another catalog's note | {os.path.getsize(catalog)} | `hcpack verify-catalog` | {wall:.2f} | "
          f"{cpu:.2f} | {rss / 1024:.1f} | {status} | {verdict} |")
    for _, path in cases:
        os.remove(path)
    shutil.rmtree(folder)


if __name__ == "__main__":
    sys.exit(main())
