import Synchronization

/// A private folder inside `DEST/.hcpack/` that receives archive data as it streams.
///
/// Only regular files that may lie under a package's Contents/ are written ("Contents/..." or
/// "ROOT/Contents/...": the root is known only once the whole archive was read). Files are created with
/// `O_CREAT|O_EXCL|O_NOFOLLOW` and folders with `mkdirat`, all relative to the staging folder's descriptor,
/// so no entry can write outside it. Names were already checked by `PackagePath.unsafeArchiveNameReason`.
///
/// Files and folders are created by the pipeline's writing worker, just before their first bytes
/// (`beginFile`), or for large stored entries by the threads that copy them (`opener(forFile:)`); the
/// caller's thread only decides what is staged.
public final class StagingArea: @unchecked Sendable {
    // @unchecked: `openFolders` is the openers' while files stream (they run one at a time, behind `creating`),
    // the caller's again once writing is done; conflicts sit behind a mutex.
    /// Prefix of staging folder names in `DEST/.hcpack/`; leftovers with it are removed by the next install.
    public static let namePrefix = "staging-"

    /// The staging folder.
    public let directory: DirectoryHandle
    /// Its name inside the parent.
    public let name: String
    private let parent: DirectoryHandle
    /// Conflicts found while writing (names the file system treats as one, a file where a folder must go).
    public var problems: ProblemList { conflicts.withLock { $0 } }
    private let conflicts = Mutex(ProblemList())
    /// Bytes written so far.
    public private(set) var writtenBytes: Int64 = 0
    /// Files written so far.
    public private(set) var writtenFiles = 0
    private let progress: ProgressHandler?
    /// Says, for a ContentInfo.plist read from the archive, which archive names DEST already holds with exactly
    /// the bytes the plist records: those are hashed as they stream but not written (see `plistRead`).
    public var inPlaceNames: ((_ plistName: String, _ plist: [UInt8]) -> Set<String>)?
    private var skippable: Set<String> = []
    /// Says, for a ContentInfo.plist read from the archive, which archive names the caller needs nothing of:
    /// their data is neither read nor checked nor staged (hcpack delta leaves the files both versions share).
    /// Only names whose size the entry header declares are left unread, so the size is still held to the
    /// plist's record.
    public var unreadNames: ((_ plistName: String, _ plist: [UInt8]) -> Set<String>)?
    private var unread: Set<String> = []
    /// Says, for a ContentInfo.plist read from the archive, which archive names the caller wants in memory
    /// (`kept`) instead of staged: those whose header declares at most `largestKeptBytes`. Hashed and checked
    /// like every file read.
    public var keptNames: ((_ plistName: String, _ plist: [UInt8]) -> Set<String>)?
    private var keep: Set<String> = []
    /// The data of the `keptNames` files read, by archive name.
    public private(set) var kept: [String: [UInt8]] = [:]
    /// The largest file `keptNames` holds in memory.
    public static let largestKeptBytes: Int64 = 1 << 20
    /// At most this many bytes are held in memory in all; the `keptNames` files read after that are staged.
    public var keptBudgetBytes: Int64 = 64 << 20
    private var keptTotal: Int64 = 0
    /// Content files not written because DEST already held them.
    public private(set) var skipped: Set<String> = []
    /// The folders of the previous file, outermost first: archives list a folder's files together, and a
    /// new folder mostly shares its parents with the last one, so only the folders that differ are made.
    private var openFolders: [(name: Substring, handle: DirectoryHandle)] = []
    /// Held while a staged file and its folders are made: the pipeline's writing worker and the threads that
    /// write large stored entries (`StoredDataHashing`) make them.
    private let creating = Mutex(())
    /// What each folder right under a Contents/ holds ("Contents/media", or "ROOT/Contents/media").
    private var topFolders: [String: FolderSummary] = [:]

    /// The files staged in one folder, told apart from any other set of names by their count and a sum of
    /// their names' hashes (seeded per process, so a hostile archive cannot aim at a collision).
    struct FolderSummary: Equatable, Sendable {
        private(set) var files = 0
        private var nameHashes: UInt64 = 0

        init() {}

        /// Adds a file by its path below the Contents/ folder, compared byte for byte.
        mutating func add(_ relativePath: Substring) {
            var path = relativePath
            var hasher = Hasher()
            path.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            files += 1
            nameHashes &+= UInt64(bitPattern: Int64(hasher.finalize()))
        }
    }

    /// What was staged in `folder` (an archive path like "Contents/media"); nil when nothing was.
    func summary(ofTopFolder folder: String) -> FolderSummary? { topFolders[folder] }

    /// Creates a fresh, uniquely named folder in `parent` (like `mkdtemp`, but with `mkdirat` on a descriptor).
    public init(in parent: DirectoryHandle, progress: ProgressHandler? = nil) throws(HCPackError) {
        self.parent = parent
        self.progress = progress
        var attempt = 0
        while true {
            let candidate = Self.namePrefix + Self.randomSuffix()
            if try parent.createDirectory(candidate, mode: 0o700) {
                name = candidate
                break
            }
            attempt += 1
            guard attempt < 100 else {
                throw HCPackError(
                    .io,
                    "\(parent.path): 100 staging folder names in a row were taken; remove the \(Self.namePrefix)* folders in it",
                    path: parent.path)
            }
        }
        guard let opened = try parent.openDirectory(name) else {
            throw HCPackError(.io, "\(parent.describe(name)) vanished right after it was created", path: parent.describe(name))
        }
        directory = opened
    }

    private static func randomSuffix() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<8).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    /// True when an archive entry may turn out to be a content file, whichever root the package has:
    /// "Contents/..." or "ROOT/Contents/..." (ROOT not junk).
    public static func mayBeContent(_ name: String) -> Bool {
        let bytes = name.utf8
        let contents = "Contents/".utf8
        if bytes.starts(with: contents) { return true }
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")),
            bytes[bytes.index(after: slash)...].starts(with: contents)
        else { return false }
        return !PackagePath.isJunk(String(name[..<slash]))
    }

    /// Called by the scanner with each ContentInfo.plist candidate as soon as it is read. Archives made by
    /// hcpack list the plist before Contents/, so a same-version reinstall or an upgrade that keeps most files
    /// stages only what changed, and needs no free space for the rest.
    func plistRead(_ name: String, _ bytes: [UInt8]) {
        if let inPlaceNames { skippable.formUnion(inPlaceNames(name, bytes)) }
        if let unreadNames { unread.formUnion(unreadNames(name, bytes)) }
        if let keptNames { keep.formUnion(keptNames(name, bytes)) }
    }

    /// True when the file `archivePath`, `declaredSize` bytes, is to be read into memory (`keptNames`), not
    /// staged; counts it against `keptBudgetBytes`. Called once per entry.
    func keepsInMemory(_ archivePath: String, declaredSize: Int64?) -> Bool {
        guard !keep.isEmpty, let declaredSize, declaredSize <= Self.largestKeptBytes,
            keptTotal + declaredSize <= keptBudgetBytes, keep.contains(archivePath)
        else { return false }
        keptTotal += declaredSize
        return true
    }

    /// Holds the data read of a `keepsInMemory` file.
    func keep(_ archivePath: String, _ bytes: [UInt8]) { kept[archivePath] = bytes }

    /// True when the data of `archivePath` is not needed (`unreadNames`).
    func leavesUnread(_ archivePath: String) -> Bool { !unread.isEmpty && unread.contains(archivePath) }

    /// True when `archivePath` was not staged because DEST already held its bytes.
    public func wasSkipped(_ archivePath: String) -> Bool { skipped.contains(archivePath) }

    /// Starts writing the entry `name` (an archive name), whose data `pipeline` will hash and write; nil when
    /// it need not be staged or is already in place in DEST (recorded in `skipped`). The pipeline's writing
    /// worker creates the file: a conflict with an entry already staged is recorded in `problems`, a file
    /// system failure (disk full, permission, I/O) fails the pipeline.
    func beginFile(_ name: String, through pipeline: HashPipeline) -> StagedFileWriter? {
        guard let open = opener(forFile: name) else { return nil }
        let file = pipeline.adopt(opening: open)
        return StagedFileWriter(file: file, area: self, pipeline: pipeline)
    }

    /// What creates the staged file `name` (on whichever thread writes it), when it is to be staged: the
    /// checks and records of `beginFile`. nil when it need not be staged or is already in place in DEST.
    func opener(forFile name: String) -> HashPipeline.Opener? {
        guard Self.mayBeContent(name) else { return nil }
        // A name verify refuses as too long (content.long-path) is not staged: the file system would refuse it,
        // and a path of 400 kB would otherwise be 200,000 nested folders. Room for the root folder's name.
        if name.utf8.count > PackagePath.maxPathBytes + PackagePath.maxComponentBytes + 1
            || PackagePath.longestComponentBytes(name) > PackagePath.maxComponentBytes
        {
            return nil
        }
        if skippable.contains(name) {
            skipped.insert(name)
            return nil
        }
        var parts = name.split(separator: "/")
        guard let leaf = parts.popLast() else { return nil }
        // parts[0] or parts[1] is "Contents" (mayBeContent); a file in a folder below it counts for that folder.
        let contentsIndex = parts[0] == "Contents" ? 0 : 1
        if parts.count > contentsIndex + 1 {
            let top = parts[...(contentsIndex + 1)].joined(separator: "/")
            let prefixBytes = parts[...contentsIndex].reduce(0) { $0 + $1.utf8.count + 1 }
            topFolders[top, default: FolderSummary()].add(Substring(name.utf8.dropFirst(prefixBytes)))
        }
        return { [self, parts] () throws(HCPackError) in
            try creating.withLock { _ throws(HCPackError) in try create(name, folders: parts, leaf: leaf) }
        }
    }

    /// Counts a file written beside the pipeline (`StoredDataHashing`), for progress.
    func countStaged(bytes: Int64) {
        account(bytes: bytes)
        accountFile()
    }

    /// Creates the staged file `name` and the folders it needs, on the pipeline's writing worker; nil (and a
    /// conflict recorded) when the file system already has something in its way.
    private func create(_ name: String, folders parts: [Substring], leaf: Substring) throws(HCPackError)
        -> (descriptor: Int32, path: String)?
    {
        // Names compare byte for byte: NFC and NFD spellings are two folders here.
        var shared = 0
        while shared < min(openFolders.count, parts.count), openFolders[shared].name.utf8.elementsEqual(parts[shared].utf8) {
            shared += 1
        }
        openFolders.removeLast(openFolders.count - shared)
        var folder = openFolders.last?.handle ?? directory
        for part in parts[shared...] {
            let component = String(part)
            // 0755 like the folders placing makes in DEST, since a whole folder may be moved there; the
            // staging folder itself (0700) keeps everyone else out meanwhile.
            _ = try folder.createDirectory(component, mode: 0o755)
            guard let child = try folder.openDirectoryIfFolder(component) else {
                conflict(name)
                return nil
            }
            folder = child
            openFolders.append((part, folder))
        }
        guard let descriptor = try folder.createFileDescriptor(String(leaf), mode: 0o600) else {
            conflict(name)
            return nil
        }
        return (descriptor, folder.describe(String(leaf)))
    }

    private func conflict(_ name: String) {
        conflicts.withLock {
            $0.add(
                .duplicateEntry, path: name,
                "the entry collides with another one on this file system (a file and a folder with one name, or names that differ only in case); rename one of them"
            )
        }
    }

    fileprivate func account(bytes: Int64) {
        writtenBytes += bytes
        progress?(
            ProgressUpdate(
                phase: "unpacking", completedBytes: writtenBytes, totalBytes: nil, completedFiles: writtenFiles, totalFiles: nil))
    }

    fileprivate func accountFile() { writtenFiles += 1 }

    /// Opens the folder holding a staged file (archive-relative path); nil when it was never staged.
    public func folder(of archivePath: String) throws(HCPackError) -> DirectoryHandle? {
        let parts = archivePath.split(separator: "/").dropLast()
        return try directory.openDirectories(Array(parts))
    }

    /// Makes every staged file durable, so a file renamed into place is complete even after a power loss.
    /// Waits for `startSynchronizing()` when it was called.
    public func synchronize() throws(HCPackError) {
        if let pending = pendingSync {
            pendingSync = nil
            try pending.wait()
            return
        }
        try FileSystemSync.synchronize(directory)
    }

    /// Starts syncing the file system on another thread while files are staged, again and again, so that
    /// the disk works alongside: a single syncfs at the end took half a second for 250 MB here.
    public func startFlushing() {
        guard pendingSync == nil, FileSystemSync.isAvailable else { return }
        pendingSync = FileSystemSync.Background(directory, whileWriting: true)
    }

    /// Every file is staged: the last syncfs runs on the other thread while the package is checked and the
    /// install planned; `synchronize()` waits for it.
    public func startSynchronizing() {
        guard FileSystemSync.isAvailable else { return }
        if let pendingSync {
            pendingSync.finish()
        } else {
            pendingSync = FileSystemSync.Background(directory, whileWriting: false)
        }
    }
    private var pendingSync: FileSystemSync.Background?

    /// A folder next to the staging folder (`staging-XXXXXXXX.replaced`, so a leftover one is removed with
    /// it) that keeps the files an install replaces or removes until the receipt is written: an install that
    /// fails before then puts them back.
    public func replacedFolder() throws(HCPackError) -> DirectoryHandle {
        if let replaced { return replaced }
        let (folder, _) = try parent.makeDirectory(name + ".replaced", mode: 0o700)
        replaced = folder
        return folder
    }
    private var replaced: DirectoryHandle?

    /// Removes the staging folder and everything in it.
    public func remove() throws(HCPackError) {
        openFolders = []
        replaced = nil
        try parent.removeTree(name + ".replaced")
        try parent.removeTree(name)
    }
}

/// Receives one staged file's data block by block; the pipeline's worker thread writes it.
final class StagedFileWriter {
    private let file: HashPipeline.File
    private unowned let area: StagingArea
    private let pipeline: HashPipeline
    private var finished = false

    /// `file` was adopted by `pipeline`, which opens and closes it.
    init(file: HashPipeline.File, area: StagingArea, pipeline: HashPipeline) {
        self.file = file
        self.area = area
        self.pipeline = pipeline
    }

    /// An abandoned file (the archive failed mid-entry) is closed as it is; the staging area goes anyway.
    deinit { if !finished { pipeline.close(file, keep: false) } }

    /// Hashes and appends a block (copied: `bytes` may be reused at once).
    func write(_ bytes: UnsafeRawBufferPointer) {
        pipeline.update(bytes, writingTo: file)
        area.account(bytes: Int64(bytes.count))
    }

    /// Queues mode 0644 and the close; throws the first write failure met so far. The data reaches the disk
    /// through `StagingArea.synchronize()` (one `syncfs` for all files), or with `fsync` per file where
    /// `syncfs` is missing.
    func finish() throws(HCPackError) {
        finished = true
        pipeline.close(file, keep: true)
        area.accountFile()
        try pipeline.check()
    }
}
