#!/usr/bin/env python3
"""hcpack fetch against curl -o plus hcpack install, from a loopback nginx (issue 30).

1. One archive (FETCH_MB of incompressible content, default 256) fetched into an empty folder, against
   `curl -o` followed by `hcpack install` of the same archive, unthrottled and with nginx's limit_rate at
   20 MB/s; alternating, REPS times (default 3); median wall seconds, median CPU seconds (user + system,
   GNU time's %U + %S: steadier than wall time on a shared machine) and peak RSS (%M).
2. `fetch --check` of a catalog of 50 small products with --jobs 4, against 50 sequential `curl -o`.
3. FETCH_BIG=1: peak RSS of fetch for a 2 GiB archive (2048 MiB of content: past hosted content's 2 GB
   limit, so build, catalog and fetch get --max-size).

Needs nginx (nginx-light) and curl; HCPACK names the binary (make bench passes the release build).
"""
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HCPACK = os.environ.get("HCPACK", "hcpack")
REPS = int(os.environ.get("REPS", "3"))
FETCH_MB = int(os.environ.get("FETCH_MB", "256"))
BIG = os.environ.get("FETCH_BIG", "") not in ("", "0")
WORK = os.environ.get("BENCH_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")) + "/fetch"
NO_LIMIT = ["--max-size", str(1 << 40)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(command):
    """(wall seconds, peak RSS KiB, CPU seconds) of one run."""
    os.sync()
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        result = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", report.name] + command,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - start
        if result.returncode != 0:
            sys.exit("failed: %s\n%s" % (" ".join(command), result.stderr.decode()[-2000:]))
        fields = ((report.read().strip().splitlines() or ["0 0 0"])[-1] + " 0 0").split()
        return wall, int(fields[0]), float(fields[1]) + float(fields[2])


def shell(script):
    return ["bash", "-c", script]


def build(folder, name, product, megabytes, files=8):
    """A package of `files` files of random bytes (stored: incompressible), built by hcpack."""
    source = os.path.join(WORK, "src-" + name)
    shutil.rmtree(source, ignore_errors=True)
    os.makedirs(source + "/Contents")
    listed = []
    each = max(1, megabytes * (1 << 20) // files)
    for index in range(files):
        path = "Contents/part-%03d.bin" % index
        with open(os.path.join(source, path), "wb") as handle:
            left = each
            while left:
                chunk = min(left, 1 << 24)
                handle.write(os.urandom(chunk))
                left -= chunk
        listed.append(path[len("Contents/"):])
    with open(source + "/ContentInfo.plist", "w") as plist:
        plist.write('<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict>'
                    "<key>IAPProductIdentifier</key><string>%s</string><key>ContentVersion</key><string>1.0</string>"
                    "<key>Files</key><array>%s</array></dict></plist>\n"
                    % (product, "".join("<string>%s</string>" % f for f in listed)))
    output = os.path.join(folder, name)
    subprocess.run([HCPACK, "build", source, "-o", output, "--quiet", "--compression", "store"] + NO_LIMIT, check=True)
    shutil.rmtree(source)
    return output


class Nginx:
    def __init__(self, root, rate=None):
        self.port = free_port()
        self.prefix = tempfile.mkdtemp(prefix="hcpack-bench-nginx-")
        os.makedirs(self.prefix + "/tmp")
        user = "user root;" if os.getuid() == 0 else ""
        limit = "limit_rate %s;" % rate if rate else ""
        with open(self.prefix + "/nginx.conf", "w") as conf:
            conf.write("""%s
daemon off; worker_processes 2; pid %s/nginx.pid; error_log %s/error.log;
events { worker_connections 256; }
http { access_log off; sendfile on; client_body_temp_path %s/tmp; proxy_temp_path %s/tmp;
  fastcgi_temp_path %s/tmp; uwsgi_temp_path %s/tmp; scgi_temp_path %s/tmp;
  server { listen 127.0.0.1:%d; root %s; location ~ \\.zip$ { %s } } }
""" % ((user,) + (self.prefix,) * 7 + (self.port, root, limit)))
        self.process = subprocess.Popen(["nginx", "-c", self.prefix + "/nginx.conf", "-p", self.prefix,
                                         "-e", self.prefix + "/error.log"])
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.1).close()
                return
            except OSError:
                time.sleep(0.05)
        sys.exit("nginx did not start")

    def stop(self):
        self.process.terminate()
        self.process.wait()
        shutil.rmtree(self.prefix, ignore_errors=True)


def catalog(www, archives, base, extra=(), serial=1):
    key = os.path.join(WORK, "bench.key")
    if not os.path.exists(key):
        subprocess.run([HCPACK, "keygen", "--name", "bench.example/fetch", "-o", key], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([HCPACK, "catalog"] + archives + ["--base-url", base, "-o", www + "/catalog.json", "--serial", str(serial),
                    "--sign-key", key, "--quiet"] + list(extra), check=True)
    return key + ".pub"


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def one_archive(rate):
    www = fresh(os.path.join(WORK, "www"))
    archive = build(www, "content.zip", "com.example.bench", FETCH_MB)
    size = os.path.getsize(archive)
    server = Nginx(www, rate)
    base = "http://127.0.0.1:%d" % server.port
    pub = catalog(www, [archive], base)
    ours, theirs = [], []
    try:
        for _ in range(REPS):
            dest = fresh(os.path.join(WORK, "dest-fetch"))
            ours.append(timed([HCPACK, "fetch", base + "/catalog.json", "--trusted-key", pub, "--dest", dest,
                               "--product", "com.example.bench", "--quiet"]))
            dest = fresh(os.path.join(WORK, "dest-curl"))
            download = os.path.join(WORK, "download.zip")
            theirs.append(timed(shell("curl -sf -o %s %s/content.zip && %s install %s --dest %s --quiet %s"
                                      % (download, base, HCPACK, download, dest, " ".join(NO_LIMIT)))))
            os.remove(download)
    finally:
        server.stop()
    report("fetch %d MiB archive%s" % (size >> 20, " at limit_rate " + rate if rate else ", unthrottled"),
           ours, theirs, "curl -o + hcpack install", 1.0)


def check_many():
    www = fresh(os.path.join(WORK, "www"))
    archives = [build(www, "small-%02d.zip" % i, "com.example.small%02d" % i, 1, files=2) for i in range(50)]
    server = Nginx(www)
    base = "http://127.0.0.1:%d" % server.port
    pub = catalog(www, archives, base)
    names = [os.path.basename(a) for a in archives]
    ours, theirs = [], []
    try:
        for _ in range(REPS):
            out = fresh(os.path.join(WORK, "check"))
            ours.append(timed([HCPACK, "fetch", base + "/catalog.json", "--trusted-key", pub, "--check", out, "--jobs", "4", "--quiet"]))
            out = fresh(os.path.join(WORK, "curls"))
            theirs.append(timed(shell(" && ".join("curl -sf -o %s/%s %s/%s" % (out, n, base, n) for n in names))))
    finally:
        server.stop()
    report("fetch --check, 50 products of 1 MiB, --jobs 4", ours, theirs, "50 sequential curl -o", 0.5)


def big_rss():
    global FETCH_MB
    FETCH_MB = 2048
    www = fresh(os.path.join(WORK, "www"))
    archive = build(www, "big.zip", "com.example.big", FETCH_MB, files=16)
    server = Nginx(www)
    base = "http://127.0.0.1:%d" % server.port
    pub = catalog(www, [archive], base, NO_LIMIT)
    try:
        dest = fresh(os.path.join(WORK, "dest-big"))
        wall, rss, _ = timed([HCPACK, "fetch", base + "/catalog.json", "--trusted-key", pub, "--dest", dest,
                           "--product", "com.example.big", "--quiet"] + NO_LIMIT)
    finally:
        server.stop()
    print("fetch of a %d MiB archive: %.2f s, peak RSS %.1f MiB (target: under 64 MiB: %s)"
          % (os.path.getsize(archive) >> 20, wall, rss / 1024, "met" if rss < 64 * 1024 else "NOT met"))


def report(label, ours, theirs, baseline, target):
    wall = statistics.median(w for w, _, _ in ours)
    other = statistics.median(w for w, _, _ in theirs)
    ratio = wall / other if other else float("inf")
    print("%s: hcpack %.2f s (CPU %.2f s, peak RSS %.1f MiB), %s %.2f s (CPU %.2f s, peak RSS %.1f MiB): %.2fx "
          "(target at most %.1fx: %s)"
          % (label, wall, statistics.median(c for _, _, c in ours), max(r for _, r, _ in ours) / 1024, baseline, other,
             statistics.median(c for _, _, c in theirs), max(r for _, r, _ in theirs) / 1024, ratio, target,
             "met" if ratio <= target else "NOT met"))


def main():
    os.makedirs(WORK, exist_ok=True)
    try:
        one_archive(None)
        one_archive("20m")
        check_many()
        if BIG:
            big_rss()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
