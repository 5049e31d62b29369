/// The folders that entry paths imply, each stored once as (parent folder, name).
///
/// Adding or finding a path costs its length: each component is hashed once, against its parent's number.
/// A set of whole prefixes ("a", "a/b", "a/b/c", ...) hashes every prefix again, which costs the square of
/// the length: one 444,749-byte path took 69 s that way (issue 18). Names compare byte for byte, as
/// `ExactPath` does.
struct FolderTree {
    /// A folder: its parent's number (0 for the root) and its own name.
    private struct Key: Hashable {
        let parent: Int
        let name: ExactPath
    }

    private var numbers: [Key: Int] = [:]
    /// The longest folder path stored, in bytes: a longer path cannot be a folder.
    private var longestFolder = 0
    /// Numbers of folders that `mark` flagged.
    private var marked: Set<Int> = []
    /// The folder part of the last path added ("a/b" for "a/b/c") and its number: archives list a folder's
    /// entries together, so the next path mostly starts with it.
    private var lastFolder: (path: Substring, number: Int)?

    /// How many folders are stored.
    var count: Int { numbers.count }

    /// Adds every folder above `path` ("a" and "a/b" for "a/b/c").
    mutating func addAncestors(of path: String) {
        guard let slash = path.utf8.lastIndex(of: slashByte) else { return }
        let folder = path[..<slash]
        var start = folder.startIndex
        var number: Int = 0
        if let lastFolder, ExactPath.starts(folder, with: lastFolder.path) {
            let end = folder.utf8.index(folder.startIndex, offsetBy: lastFolder.path.utf8.count)
            if end == folder.endIndex {
                return
            }
            if folder.utf8[end] == slashByte {
                number = lastFolder.number
                start = folder.utf8.index(after: end)
            }
        }
        let remaining = folder[start...]
        // Room for every new component at once: a path of 200,000 folders otherwise regrows the table 15 times.
        let components = remaining.utf8.reduce(into: 1) { count, byte in if byte == slashByte { count += 1 } }
        if numbers.count + components > numbers.capacity {
            numbers.reserveCapacity(max(numbers.count + components, 2 * numbers.count))
        }
        number = insertPath(remaining, under: number)
        lastFolder = (folder, number)
        longestFolder = max(longestFolder, folder.utf8.count)
    }

    /// Flags the folder `path` for `firstMarkedAncestor`; nothing happens when no added path lies in it.
    mutating func mark(_ path: String) {
        if let number = number(of: path[...]) { marked.insert(number) }
    }

    /// Whether `path` is a folder some added path lies in.
    func contains(_ path: Substring) -> Bool { number(of: path) != nil }

    func contains(_ path: String) -> Bool { contains(path[...]) }

    /// The first folder above `path`, outermost first, that `mark` flagged.
    func firstMarkedAncestor(of path: String) -> Substring? {
        guard !marked.isEmpty else { return nil }
        var number: Int = 0
        var start = path.startIndex
        while let slash = path.utf8[start...].firstIndex(of: slashByte) {
            guard let next = numbers[Key(parent: number, name: ExactPath(path[start..<slash]))] else { return nil }
            if marked.contains(next) { return path[..<slash] }
            number = next
            start = path.utf8.index(after: slash)
        }
        return nil
    }

    /// The number of folder `path`, or nil when no added path implies it.
    private func number(of path: Substring) -> Int? {
        guard !path.isEmpty, path.utf8.count <= longestFolder else { return nil }
        var number: Int = 0
        var start = path.startIndex
        while true {
            let slash = path.utf8[start...].firstIndex(of: slashByte) ?? path.endIndex
            guard let next = numbers[Key(parent: number, name: ExactPath(path[start..<slash]))] else { return nil }
            number = next
            if slash == path.endIndex { return number }
            start = path.utf8.index(after: slash)
        }
    }

    /// Stores each component of `path` under the folder numbered `parent`; returns the last one's number.
    private mutating func insertPath(_ path: Substring, under parent: Int) -> Int {
        var number = parent
        var start = path.startIndex
        while start < path.endIndex {
            let slash = path.utf8[start...].firstIndex(of: slashByte) ?? path.endIndex
            let key = Key(parent: number, name: ExactPath(path[start..<slash]))
            if let existing = numbers[key] {
                number = existing
            } else {
                number = numbers.count + 1
                numbers[key] = number
            }
            if slash == path.endIndex { break }
            start = path.utf8.index(after: slash)
        }
        return number
    }
}

private let slashByte = UInt8(ascii: "/")
