#!/usr/bin/env bash
# Regenerates the seed corpora in fuzz/corpus/<target>/ (committed; rerun only to change them).
# Needs python3, bsdtar (libarchive-tools), gzip, bzip2, xz, zstd. Output is deterministic (fixed times),
# except package.xar: bsdtar records the extracted files' ctime in the xar table of contents.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf corpus
mkdir -p corpus/XMLPlistFuzzer corpus/BinaryPlistFuzzer corpus/ArchiveFuzzer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$work" <<'PY'
import datetime, gzip, hashlib, io, os, plistlib, sys, tarfile, zipfile
work = sys.argv[1]
X, B, A = "corpus/XMLPlistFuzzer", "corpus/BinaryPlistFuzzer", "corpus/ArchiveFuzzer"

def write(path, data):
    with open(path, "wb") as f:
        f.write(data)

files = {"levels/1.json": b'{"level":1}\n', "art/logo.txt": b"hcpack\n"}
def content_info(with_integrity=True):
    info = {"IAPProductIdentifier": "com.example.levels", "ContentVersion": "1.0", "Files": sorted(files)}
    if with_integrity:
        info["HCPackIntegrity"] = {p: {"Size": len(d), "SHA256": hashlib.sha256(d).hexdigest()} for p, d in files.items()}
    return info

every_type = {
    "string": "caf\u00e9 \u2603 <&>", "ascii": "plain", "integer": -42, "big": 2**63 - 1, "huge": 2**64 - 1,
    "real": 3.25, "negative real": -0.5, "true": True, "false": False,
    "date": datetime.datetime(2026, 1, 2, 3, 4, 5), "data": bytes(range(20)),
    "array": [1, "two", [3.0, {}], []], "nested": {"a": {"b": {"c": [True]}}},
}

# XML: a real ContentInfo.plist, the minimal one, every type, and encodings libxml2 handles.
info_xml = plistlib.dumps(content_info(), fmt=plistlib.FMT_XML, sort_keys=False)
write(f"{X}/contentinfo.plist", info_xml)
write(f"{X}/minimal.plist", plistlib.dumps({"IAPProductIdentifier": "a", "ContentVersion": "1"}, fmt=plistlib.FMT_XML))
write(f"{X}/every-type.plist", plistlib.dumps(every_type, fmt=plistlib.FMT_XML, sort_keys=False))
write(f"{X}/utf16.plist", info_xml.decode().replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16"))
write(f"{X}/no-doctype.plist", b'<plist version="1.0"><array><string>x</string><real>nan</real>'
      b'<real>-infinity</real><integer>0x1F</integer><date>2001-01-01T00:00:00.5Z</date>'
      b'<data>AAEC\nAw==</data><true/><dict/></array></plist>\n')
write(f"{X}/comments-cdata.plist", b'\xef\xbb\xbf\n<?xml version="1.0"?>\n<!-- c --><plist><dict><?pi x?>'
      b'<key>k</key><string><![CDATA[a<b]]>&amp;&#x41;&#13;</string></dict></plist>')

# Binary: the same documents as bplist00.
write(f"{B}/contentinfo.bplist", plistlib.dumps(content_info(), fmt=plistlib.FMT_BINARY, sort_keys=False))
write(f"{B}/minimal.bplist", plistlib.dumps({"IAPProductIdentifier": "a", "ContentVersion": "1"}, fmt=plistlib.FMT_BINARY))
write(f"{B}/every-type.bplist", plistlib.dumps(every_type, fmt=plistlib.FMT_BINARY, sort_keys=False))
shared = ["same"] * 3 + [{"k": ["same"]}] * 2
write(f"{B}/shared-refs.bplist", plistlib.dumps(shared, fmt=plistlib.FMT_BINARY))

# Nesting past the depth limit (64): 70 arrays inside each other; the binary one by hand, to keep it tiny.
DEEP = 70
objects = [bytes([0xA1, k + 1]) for k in range(DEEP)] + [b"\x09"]
body, offsets = b"bplist00", []
for o in objects:
    offsets.append(len(body)); body += o
table = len(body)
body += bytes(offsets) + bytes(6) + bytes([1, 1]) + len(objects).to_bytes(8, "big") + bytes(8) + table.to_bytes(8, "big")
write(f"{B}/deep.bplist", body)
write(f"{X}/deep.plist", b"<plist>" + b"<array>" * DEEP + b"<true/>" + b"</array>" * DEEP + b"</plist>")

# Archives: one small valid package in every format hcpack reads, plus a few oddities.
MTIME = 1767225600  # 2026-01-01
def package_files(root=""):
    out = [(root + "ContentInfo.plist", info_xml)]
    out += [(root + "Contents/" + p, d) for p, d in sorted(files.items())]
    return out

def gzipped_tar(path, fill):
    """Writes a .tar.gz whose gzip header carries no time (tarfile's "w:gz" stamps the current one)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as t:
        fill(t)
    write(path, gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0))

def make_tar(path, mode, root="", extras=()):
    if mode == "w:gz":
        return gzipped_tar(path, lambda t: fill_tar(t, root, extras))
    with tarfile.open(path, mode, format=tarfile.PAX_FORMAT) as t:
        fill_tar(t, root, extras)

def fill_tar(t, root, extras):
    dirs = sorted({os.path.dirname(n) for n, _ in package_files(root)} - {""})
    for d in dirs:
        ti = tarfile.TarInfo(d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755; ti.mtime = MTIME; t.addfile(ti)
    for n, d in package_files(root):
        ti = tarfile.TarInfo(n); ti.size = len(d); ti.mode = 0o644; ti.mtime = MTIME; t.addfile(ti, io.BytesIO(d))
    for ti in extras:
        ti.mtime = MTIME; t.addfile(ti)

make_tar(f"{work}/pkg.tar", "w")
with open(f"{work}/pkg.tar", "rb") as f: write(f"{A}/package.tar", f.read())
link = tarfile.TarInfo("Contents/link"); link.type = tarfile.SYMTYPE; link.linkname = "../ContentInfo.plist"
hard = tarfile.TarInfo("Contents/hard"); hard.type = tarfile.LNKTYPE; hard.linkname = "Contents/art/logo.txt"
make_tar(f"{A}/links.tar.gz", "w:gz", root="Levels/", extras=[link, hard])

for name, method in [("package-deflate.zip", zipfile.ZIP_DEFLATED), ("package-stored.zip", zipfile.ZIP_STORED)]:
    with zipfile.ZipFile(f"{A}/{name}", "w", method) as z:
        for n, d in package_files("Levels/" if method == zipfile.ZIP_STORED else ""):
            z.writestr(zipfile.ZipInfo(n, (2026, 1, 1, 0, 0, 0)), d, compress_type=method)

# A binary ContentInfo.plist and a junk entry, in a zip.
with zipfile.ZipFile(f"{A}/binary-plist.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr(zipfile.ZipInfo("ContentInfo.plist", (2026, 1, 1, 0, 0, 0)), plistlib.dumps(content_info(False), fmt=plistlib.FMT_BINARY))
    z.writestr(zipfile.ZipInfo("Contents/levels/1.json", (2026, 1, 1, 0, 0, 0)), files["levels/1.json"])
    z.writestr(zipfile.ZipInfo("__MACOSX/._x", (2026, 1, 1, 0, 0, 0)), b"\0\5\26\7")

# Sparse entries (GNU sparse 0.1 in pax headers): a hole, data, and a trailing hole.
def fill_sparse(t):
    for n, d in package_files():
        ti = tarfile.TarInfo(n); ti.size = len(d); ti.mtime = MTIME; t.addfile(ti, io.BytesIO(d))
    sp = tarfile.TarInfo("Contents/sparse.bin"); sp.size = 2; sp.mtime = MTIME
    sp.pax_headers = {"GNU.sparse.size": "4096", "GNU.sparse.map": "1000,1,3000,1"}
    t.addfile(sp, io.BytesIO(b"ab"))
gzipped_tar(f"{A}/sparse.tar.gz", fill_sparse)

# Encrypted entries (traditional PKWARE flag), one with a zip64 extra field; made by hand, as no
# deterministic tool writes them.
import struct, zlib
def zip_with_encrypted_entries():
    out, central = b"", b""
    for name, zip64 in [(b"Contents/a.bin", False), (b"Contents/b.bin", True)]:
        data = bytes(12) + b"secret"
        size = len(data) - 12
        extra = struct.pack("<HHQQ", 1, 16, size, len(data)) if zip64 else b""
        sizes = (0xFFFFFFFF, 0xFFFFFFFF) if zip64 else (len(data), size)
        crc = zlib.crc32(b"secret")
        offset = len(out)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 1, 0, 0, 0x21, crc, *sizes, len(name), len(extra)) + name + extra + data
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 1, 0, 0, 0x21, crc, *sizes, len(name), len(extra),
                               0, 0, 0, 0o100644 << 16, offset) + name + extra
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(central), len(out), 0)
    return out + central + end
write(f"{A}/encrypted.zip", zip_with_encrypted_entries())

# A delta whose patch record claims a base and a result of 2^63-1 bytes each: their sum overflowed and trapped in
# verify's window check (outside review, finding 04; pinned in Tests/HostedContentTests/FuzzRegressionTests.swift).
# The patch is a zstd frame of RLE blocks (4096 zero bytes), written by hand; every entry stored.
def zero_frame(n, window_log):
    out = b"\x28\xb5\x2f\xfd" + bytes([3 << 6, (window_log - 10) << 3]) + n.to_bytes(8, "little")
    left = n
    while left:
        size = min(128 << 10, left); left -= size
        out += ((size << 3) | 2 | (left == 0)).to_bytes(3, "little") + b"\0"
    return out
patch, huge = zero_frame(4096, 20), 2**63 - 1
delta_info = {"IAPProductIdentifier": "com.example.levels", "ContentVersion": "1.1", "Files": ["big.bin"],
              "HCPackIntegrity": {"big.bin": {"Size": huge, "SHA256": hashlib.sha256(b"").hexdigest()}},
              "HCPackDeltaBase": {"ContentVersion": "1.0", "PlistSHA256": "a" * 64, "TargetPlistSHA256": "b" * 64},
              "HCPackPatches": {"big.bin": {"BaseSize": huge, "BaseSHA256": "c" * 64, "PatchSize": len(patch),
                                            "PatchSHA256": hashlib.sha256(patch).hexdigest(), "WindowLog": 31}}}
with zipfile.ZipFile(f"{A}/delta-patch-overflow.zip", "w") as z:
    z.writestr(zipfile.ZipInfo("ContentInfo.plist", (2026, 1, 1, 0, 0, 0)), plistlib.dumps(delta_info, sort_keys=False))
    z.writestr(zipfile.ZipInfo("Contents/.hcpack-patches/big.bin", (2026, 1, 1, 0, 0, 0)), patch)
PY

# Compressed tars and xar from the plain tar, with the system tools (libarchive reads what they write).
gzip -9n -c "$work/pkg.tar" >corpus/ArchiveFuzzer/package.tar.gz
bzip2 -9 -c "$work/pkg.tar" >corpus/ArchiveFuzzer/package.tar.bz2
xz -9 -c "$work/pkg.tar" >corpus/ArchiveFuzzer/package.tar.xz
zstd -q -19 -c "$work/pkg.tar" >corpus/ArchiveFuzzer/package.tar.zst
mkdir "$work/x" && (cd "$work/x" && bsdtar -xf ../pkg.tar && bsdtar --format xar -cf "$OLDPWD/corpus/ArchiveFuzzer/package.xar" ContentInfo.plist Contents)

du -cb corpus/*/* | tail -1
