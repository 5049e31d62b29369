import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A package archive made by Python's zipfile/tarfile, so tests control every entry (including hostile ones)
/// without depending on hcpack's own writer. ContentInfo.plist (with HCPackIntegrity) is written by plistlib.
public struct PackageArchive {
    /// One raw archive entry besides the package's own.
    public struct Entry {
        /// What the entry is.
        public enum Kind: String { case file, dir, symlink, hardlink, fifo, chardev }
        /// The name exactly as stored.
        public var name: String
        public var kind: Kind
        /// Data of a file entry.
        public var data: [UInt8]
        /// Target of a symlink or hard link.
        public var target: String?

        /// An entry; a file by default.
        public init(_ name: String, _ kind: Kind = .file, data: [UInt8] = [], target: String? = nil) {
            self.name = name
            self.kind = kind
            self.data = data
            self.target = target
        }
    }

    /// The archive format written.
    public enum Format: String, Sendable {
        case zip, tar
        case tgz = "tar.gz"
    }

    public var format: Format = .zip
    /// IAPProductIdentifier.
    public var product = "com.example.levels"
    /// ContentVersion.
    public var version = "1.0"
    /// Files under Contents/, in archive order.
    public var files: [(String, [UInt8])] = []
    /// The Files list; nil lists every file in `files`.
    public var listed: [String]?
    /// False leaves the Files key out.
    public var filesKey = true
    /// Keys of the app's own, added to ContentInfo.plist as strings (Xcode-built packages may carry some).
    public var appKeys: [String: String] = [:]
    /// False leaves HCPackIntegrity out.
    public var integrity = true
    /// True writes HCPackIntegrity (for `listed`, or every file) even when the Files key is left out.
    public var recordsWithoutFiles = false
    /// Replaces the recorded {Size, SHA256} of a path.
    public var integrityOverrides: [String: (size: Int64, sha256: String)] = [:]
    /// The single top-level folder holding the package, or "" for the archive root.
    public var root = ""
    /// Entries added after the package's (names as given, not under `root`).
    public var extra: [Entry] = []
    /// Generated files under Contents/ ("PREFIX<n/50>/file-<n>.bin": `count` files of `size` incompressible
    /// bytes, the same for the same `seed`), listed too.
    public var generated: (prefix: String, count: Int, size: Int, seed: Int)?

    /// A package of `files` (path under Contents/, text), all listed, with integrity records.
    public init(format: Format = .zip, version: String = "1.0", files: [(String, String)] = sampleFiles) {
        self.format = format
        self.version = version
        self.files = files.map { ($0.0, Array($0.1.utf8)) }
    }

    /// Writes the archive to `path`; records a test failure when Python fails.
    @discardableResult
    public func write(to path: String) -> String {
        func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
        var spec: [String: Any] = [
            "format": format.rawValue, "output": path, "product": product, "version": version,
            "files": files.map { [$0.0, base64($0.1)] }, "filesKey": filesKey, "integrity": integrity, "recordsWithoutFiles": recordsWithoutFiles, "root": root, "appKeys": appKeys,
            "overrides": Dictionary(
                uniqueKeysWithValues: integrityOverrides.map { ($0.key, ["Size": $0.value.size, "SHA256": $0.value.sha256]) }),
            "extra": extra.map {
                ["name": $0.name, "type": $0.kind.rawValue, "data": base64($0.data), "target": $0.target ?? ""]
            },
        ]
        if let listed { spec["listed"] = listed }
        if let generated {
            spec["generated"] = [
                "prefix": generated.prefix, "count": generated.count, "size": generated.size, "seed": generated.seed,
            ]
        }
        let specPath = path + ".spec.json"
        if let data = try? JSONSerialization.data(withJSONObject: spec) {
            _ = FileManager.default.createFile(atPath: specPath, contents: data)
        }
        // The system interpreter when there is one: a version-manager shim costs half a second per call.
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
        let result = run(python, ["-c", Self.script, specPath])
        try? FileManager.default.removeItem(atPath: specPath)
        if result.status != 0 { Issue.record("making \(path) failed: \(result.output)") }
        return path
    }

    static let script = #"""
        import base64, hashlib, io, json, plistlib, sys, tarfile, zipfile
        spec = json.load(open(sys.argv[1]))
        pre = spec["root"] + "/" if spec["root"] else ""
        files = [(p, base64.b64decode(b)) for p, b in spec["files"]]
        gen = spec.get("generated")
        if gen:
            import random
            for i in range(gen["count"]):
                data = random.Random(gen["seed"] * 1000003 + i).randbytes(gen["size"])
                files.append(("%s%d/file-%d.bin" % (gen["prefix"], i // 50, i), data))
        info = {"IAPProductIdentifier": spec["product"], "ContentVersion": spec["version"]}
        info.update(spec["appKeys"])
        listed = spec.get("listed")
        if listed is None:
            listed = [p for p, _ in files]
        if spec["filesKey"]:
            info["Files"] = listed
        if spec["integrity"] and (spec["filesKey"] or spec["recordsWithoutFiles"]):
            data = dict(files)
            records = {p: {"Size": len(data[p]), "SHA256": hashlib.sha256(data[p]).hexdigest()} for p in listed if p in data}
            records.update(spec["overrides"])
            info["HCPackIntegrity"] = records
        entries = [(pre + "ContentInfo.plist", "file", plistlib.dumps(info), "")]
        entries += [(pre + "Contents/" + p, "file", d, "") for p, d in files]
        entries += [(e["name"], e["type"], base64.b64decode(e["data"]), e["target"]) for e in spec["extra"]]
        out = spec["output"]
        if spec["format"] == "zip":
            with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
                for name, kind, data, target in entries:
                    zi = zipfile.ZipInfo(name + ("/" if kind == "dir" else ""), (2020, 1, 1, 0, 0, 0))
                    zi.create_system = 3
                    if kind == "symlink":
                        zi.external_attr = (0o120777 << 16)
                        data = target.encode()
                    elif kind == "dir":
                        zi.external_attr = (0o40755 << 16) | 0x10
                    else:
                        zi.external_attr = (0o100644 << 16)
                    zi.compress_type = zipfile.ZIP_DEFLATED
                    import warnings
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        z.writestr(zi, data)
        else:
            mode = "w:gz" if spec["format"] == "tar.gz" else "w"
            with tarfile.open(out, mode, format=tarfile.PAX_FORMAT) as t:
                for name, kind, data, target in entries:
                    ti = tarfile.TarInfo(name)
                    ti.mtime = 1577836800
                    ti.mode = 0o644
                    types = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                             "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE, "chardev": tarfile.CHRTYPE}
                    ti.type = types[kind]
                    if kind == "file":
                        ti.size = len(data)
                        t.addfile(ti, io.BytesIO(data))
                    else:
                        if kind == "dir":
                            ti.mode = 0o755
                        ti.linkname = target
                        if kind == "chardev":
                            ti.devmajor, ti.devminor = 1, 3
                        t.addfile(ti)
        """#
}

/// Every path under `root` (never following symlinks) with its kind, mode and, for files, a content
/// fingerprint, one line each, sorted: two equal listings mean equal trees.
public func treeListing(_ root: String) -> [String] {
    var lines: [String] = []
    func walk(_ relative: String) {
        let full = relative.isEmpty ? root : root + "/" + relative
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: full) else { return }
        for name in names.sorted() {
            let path = relative.isEmpty ? name : relative + "/" + name
            var info = stat()
            guard lstat(root + "/" + path, &info) == 0 else { continue }
            let mode = String(info.st_mode & 0o7777, radix: 8)
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                lines.append("d \(path) \(mode)")
                walk(path)
            case S_IFREG:
                let data = FileManager.default.contents(atPath: root + "/" + path) ?? Data()
                lines.append("f \(path) \(mode) \(data.count) \(data.base64EncodedString().hashValue) \(Array(data.prefix(64)))")
            case S_IFLNK:
                lines.append(
                    "l \(path) -> \((try? FileManager.default.destinationOfSymbolicLink(atPath: root + "/" + path)) ?? "?")")
            default:
                lines.append("? \(path) \(info.st_mode)")
            }
        }
    }
    walk("")
    return lines
}
