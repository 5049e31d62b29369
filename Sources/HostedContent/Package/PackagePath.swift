import Foundation

/// Path rules shared by verify, build and install.
public enum PackagePath {
    /// Longest name component, in bytes (common file system limit).
    public static let maxComponentBytes = 255
    /// Longest relative path, in bytes (Apple platforms' PATH_MAX is 1024).
    public static let maxPathBytes = 1024

    /// The problems with a `Files` entry as written, before looking at the package.
    public static func filesEntryProblems(_ entry: String) -> [(Rule, String)] {
        if isPlainRelativePath(entry) { return [] }
        var found: [(Rule, String)] = []
        if entry.isEmpty { return [(.filesEmptyPath, "the entry is empty; remove it from Files")] }
        if entry.hasPrefix("/") || hasDriveLetter(entry) {
            found.append((.filesAbsolutePath, "'\(entry)' is absolute; list paths relative to Contents/, without a leading '/'"))
        }
        if entry.contains("\\") {
            found.append((.filesBackslash, "'\(entry)' contains a backslash; separate folders with '/'"))
        }
        if entry.unicodeScalars.contains(where: isControl) {
            found.append((.filesControlCharacter, "'\(printable(entry))' contains a control character; rename the file"))
        }
        if entry.hasSuffix("/") && entry.count > 1 {
            found.append((.filesTrailingSlash, "'\(entry)' ends with '/'; list files, not folders"))
        }
        var body = Substring(entry)
        while body.hasPrefix("/") { body = body.dropFirst() }
        while body.hasSuffix("/") { body = body.dropLast() }
        let components = body.split(separator: "/", omittingEmptySubsequences: false)
        if components.contains(where: { $0 == "." || $0 == ".." }) {
            found.append((.filesDotComponent, "'\(entry)' has a '.' or '..' component; list the plain path under Contents/"))
        }
        if !body.isEmpty && components.contains(where: \.isEmpty) {
            found.append((.filesEmptyPath, "'\(entry)' has an empty component ('//'); remove the extra '/'"))
        }
        return found
    }

    /// One pass over the bytes for the common case: relative, no backslash or control character, no empty,
    /// "." or ".." component. (Every listed file is checked; splitting each into substrings was a tenth of
    /// verify's rule time.)
    static func isPlainRelativePath(_ path: String) -> Bool {
        var path = path
        return path.withUTF8 { isPlainRelativePath($0) } && !hasDriveLetter(path)
    }

    /// `isPlainRelativePath` over the bytes (a loop over contiguous bytes is several times faster than one over
    /// `utf8`), drive letters aside.
    private static func isPlainRelativePath(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var componentLength = 0
        var dots = 0
        var sawByte = false
        for byte in bytes {
            sawByte = true
            switch byte {
            case UInt8(ascii: "/"):
                if componentLength == 0 || dots == componentLength && dots <= 2 { return false }
                componentLength = 0
                dots = 0
                continue
            case UInt8(ascii: "\\"), 0..<0x20, 0x7f, 0xc2:
                // 0xc2 leads U+0080 to U+00BF, the C1 controls among them: the careful path tells them apart.
                return false
            case UInt8(ascii: "."):
                dots += 1
            default:
                break
            }
            componentLength += 1
        }
        return sawByte && componentLength > 0 && !(dots == componentLength && dots <= 2)
    }

    /// The longest component of `path`, in bytes.
    static func longestComponentBytes(_ path: String) -> Int {
        var path = path
        return path.withUTF8 { bytes in
            var longest = 0
            var current = 0
            for byte in bytes {
                if byte == UInt8(ascii: "/") {
                    current = 0
                } else {
                    current += 1
                    longest = max(longest, current)
                }
            }
            return longest
        }
    }

    /// True when the first component looks like a Windows drive ("C:" or "C:x").
    static func hasDriveLetter(_ path: String) -> Bool {
        let bytes = Array(path.utf8.prefix(2))
        guard bytes.count == 2, bytes[1] == UInt8(ascii: ":") else { return false }
        return (0x41...0x5a).contains(bytes[0]) || (0x61...0x7a).contains(bytes[0])
    }

    /// Why an archive entry name is unsafe to extract, or nil when it is a plain relative path.
    /// Expects the name after `normalizeArchiveName`.
    public static func unsafeArchiveNameReason(_ name: String) -> String? {
        if isPlainRelativePath(name) { return nil }
        if name.isEmpty { return "empty name" }
        if name.hasPrefix("/") { return "absolute path" }
        if hasDriveLetter(name) { return "drive-letter path" }
        if name.utf8.contains(UInt8(ascii: "\\")) { return "backslash in name" }
        if name.utf8.contains(0) { return "NUL in name" }
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        if components.contains("..") { return "'..' component" }
        if components.contains(where: \.isEmpty) { return "empty component" }
        if components.contains(".") { return "'.' component" }
        return nil
    }

    /// Strips the leading "./" tar writes and a directory's trailing "/".
    public static func normalizeArchiveName(_ name: String) -> String {
        var result = Substring(name)
        while result.hasPrefix("./") { result = result.dropFirst(2) }
        if result.utf8.count > 1 { while result.hasSuffix("/") { result = result.dropLast() } }
        return String(result)
    }

    /// Key under which two names collide on a case-insensitive, normalization-insensitive file system.
    public static func foldKey(_ path: String) -> String {
        let keys = collisionKeys(path)
        return keys.folded ?? keys.normalized
    }

    /// `normalizationKey` and `foldKey` of one path (nil when the same as the first), its bytes read once:
    /// this runs for every entry and every listed file.
    static func collisionKeys(_ path: String) -> (normalized: String, folded: String?) {
        var path = path
        let (ascii, upper) = path.withUTF8 { bytes in
            var upper = false
            for byte in bytes {
                if byte >= 0x80 { return (false, upper) }
                if (0x41...0x5a).contains(byte) { upper = true }
            }
            return (true, upper)
        }
        guard ascii else {
            let normalized = path.precomposedStringWithCanonicalMapping
            return (normalized, normalized.lowercased())
        }
        // ASCII is already NFC and lowercases byte by byte; Foundation's Unicode path is far slower. Already
        // lower case (most names): the same string, sharing its storage.
        guard upper else { return (path, nil) }
        let folded = path.withUTF8 { bytes in
            String(unsafeUninitializedCapacity: bytes.count) { buffer in
                for (index, byte) in bytes.enumerated() { buffer[index] = (0x41...0x5a).contains(byte) ? byte | 0x20 : byte }
                return bytes.count
            }
        }
        return (path, folded)
    }

    /// `folder/name` in a string of exactly that size: `+` leaves room to grow, 50 bytes a path at 26,000 files.
    public static func joined(_ folder: String, _ name: String) -> String {
        var folder = folder
        var name = name
        let count = folder.utf8.count + 1 + name.utf8.count
        return folder.withUTF8 { head in
            name.withUTF8 { tail in
                String(unsafeUninitializedCapacity: count) { buffer in
                    _ = buffer.initialize(fromContentsOf: head)
                    buffer[head.count] = UInt8(ascii: "/")
                    _ = buffer[(head.count + 1)...].initialize(fromContentsOf: tail)
                    return count
                }
            }
        }
    }

    /// Key under which two names differ only in Unicode normalization.
    public static func normalizationKey(_ path: String) -> String {
        isASCII(path) ? path : path.precomposedStringWithCanonicalMapping
    }

    /// Whether every byte of `text` is ASCII; over the contiguous bytes, several times faster than
    /// iterating `utf8` (this runs for every entry and every listed file, twice).
    static func isASCII(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in bytes.allSatisfy { $0 < 0x80 } }
    }

    /// Resolves a symlink target lexically against the link's folder; nil when it leaves the package root.
    public static func resolveLink(target: String, from linkPath: String) -> String? {
        if target.hasPrefix("/") || hasDriveLetter(target) { return nil }
        var parts = linkPath.split(separator: "/").dropLast().map(String.init)
        for component in target.split(separator: "/", omittingEmptySubsequences: true) {
            switch component {
            case ".": continue
            case "..":
                if parts.isEmpty { return nil }
                parts.removeLast()
            default: parts.append(String(component))
            }
        }
        return parts.joined(separator: "/")
    }

    /// True for operating-system junk: .DS_Store, __MACOSX/, AppleDouble "._" files, Thumbs.db.
    public static func isJunk(_ path: String) -> Bool {
        // Byte by byte: this runs for every entry, and splitting into substrings allocated each time.
        var path = path
        return path.withUTF8 { bytes in
            var start = 0
            for index in 0...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "/") {
                if isJunkName(UnsafeBufferPointer(rebasing: bytes[start..<index])) { return true }
                start = index + 1
            }
            return false
        }
    }

    private static let junkNames: [[UInt8]] = ["__MACOSX", ".DS_Store", "Thumbs.db"].map { Array($0.utf8) }

    private static func isJunkName(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        if name.count >= 2 && name[0] == UInt8(ascii: ".") && name[1] == UInt8(ascii: "_") { return true }
        return junkNames.contains { $0.count == name.count && $0.elementsEqual(name) }
    }

    /// C0 and C1 control characters and DEL (Unicode's Cc): a terminal acts on them (ESC and CSI start
    /// escape sequences), so no name may hold one and none is printed as it is.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value)
    }

    /// Control characters shown as escapes so messages stay on one line and cannot drive the terminal.
    public static func printable(_ text: String) -> String {
        // Most names have no control character (in UTF-8 a C0 control is one byte below 0x20, or 0x7f; a C1
        // control, U+0080 to U+009F, starts with 0xc2): those are returned as they are, without a copy.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f || $0 == 0xc2 }) { return text }
        var result = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                result += String(format: scalar.value < 0x80 ? "\\x%02x" : "\\u{%04x}", scalar.value)
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

/// A path compared byte for byte. Swift's `String ==` treats NFC and NFD spellings as equal; file systems
/// and archives do not, so lookups of entries by name use this key.
///
/// It shares the storage of the string (or substring) it was made from: a key per entry costs no copy of the
/// name (a byte array per key was 4 MB of verify's peak with 26,000 files).
public struct ExactPath: Hashable, Sendable {
    private let text: Substring
    public init(_ path: String) { text = path[...] }
    public init(_ path: Substring) { text = path }
    public init<S: StringProtocol>(_ path: S) { text = String(path)[...] }

    /// The path's UTF-8 bytes.
    public var bytes: [UInt8] { Array(text.utf8) }

    public static func == (lhs: ExactPath, rhs: ExactPath) -> Bool {
        var left = lhs.text
        var right = rhs.text
        return left.withUTF8 { a in right.withUTF8 { b in a.count == b.count && bytesEqual(a, b) } }
    }

    /// Whether the bytes of `text` begin with those of `prefix` (over the contiguous bytes: a generic
    /// `utf8.starts(with:)` walked them one index at a time, once per archive entry).
    static func starts(_ text: Substring, with prefix: Substring) -> Bool {
        var text = text
        var prefix = prefix
        return text.withUTF8 { a in
            prefix.withUTF8 { b in a.count >= b.count && bytesEqual(UnsafeBufferPointer(rebasing: a[..<b.count]), b) }
        }
    }

    /// Whether `bytes` are `head` followed by `tail`: a key looked up as two pieces (PositionIndex).
    static func bytes(
        _ bytes: UnsafeBufferPointer<UInt8>, are head: UnsafeBufferPointer<UInt8>, then tail: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        bytes.count == head.count + tail.count && bytesEqual(UnsafeBufferPointer(rebasing: bytes[..<head.count]), head)
            && bytesEqual(UnsafeBufferPointer(rebasing: bytes[head.count...]), tail)
    }

    /// `memcmp` of two buffers of the same length.
    private static func bytesEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = a.baseAddress, let second = b.baseAddress else { return true }  // both empty
        return memcmp(first, second, a.count) == 0
    }

    public func hash(into hasher: inout Hasher) {
        var copy = text
        copy.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
