/// Every check hcpack makes, with a stable ID (documented in docs/rules.md; never renumbered or reused).
public enum Rule: String, Sendable, Codable, CaseIterable {
    // Structure of the package folder.
    case missingPlist = "structure.missing-plist"
    case plistNotFile = "structure.plist-not-file"
    case missingContents = "structure.missing-contents"
    case contentsNotFolder = "structure.contents-not-folder"
    case strayEntry = "structure.stray-entry"

    // ContentInfo.plist itself.
    case plistParse = "plist.parse"
    case plistNotDictionary = "plist.not-dictionary"
    case plistMissingKey = "plist.missing-key"
    case plistWrongType = "plist.wrong-type"
    case productIdentifierSyntax = "plist.product-id-syntax"
    case contentVersionSyntax = "plist.version-syntax"
    case filesKeyMissing = "plist.files-missing"

    // Entries of the Files array.
    case filesEmptyPath = "files.empty-path"
    case filesAbsolutePath = "files.absolute-path"
    case filesDotComponent = "files.dot-component"
    case filesBackslash = "files.backslash"
    case filesControlCharacter = "files.control-character"
    case filesTrailingSlash = "files.trailing-slash"
    case filesDuplicate = "files.duplicate"
    case filesCaseDuplicate = "files.case-duplicate"
    case filesNormalizationDuplicate = "files.normalization-duplicate"
    case filesNotFound = "files.not-found"
    case filesNotRegular = "files.not-regular"
    case filesUnlisted = "files.unlisted"

    // What the package contains.
    case symlinkEscapes = "content.symlink-escapes"
    case symlink = "content.symlink"
    case hardlinkEscapes = "content.hardlink-escapes"
    case hardlink = "content.hardlink"
    case specialFile = "content.special-file"
    case executable = "content.executable"
    case script = "content.script"
    case junk = "content.junk"
    case caseCollision = "content.case-collision"
    case normalizationCollision = "content.normalization-collision"
    case nonUTF8Name = "content.non-utf8-name"
    case longPath = "content.long-path"
    case tooLarge = "content.too-large"
    case unsafePermissions = "content.unsafe-permissions"
    case reservedName = "content.reserved-name"

    // The archive that carries the package.
    case unsafePath = "archive.unsafe-path"
    case duplicateEntry = "archive.duplicate-entry"
    case encrypted = "archive.encrypted"
    case corrupt = "archive.corrupt"
    case unsupportedFormat = "archive.unsupported-format"
    case multipleRoots = "archive.multiple-roots"
    case compressionRatio = "archive.compression-ratio"
    case limitExceeded = "archive.limit-exceeded"
    case nestedCompression = "archive.nested-compression"
    case stalled = "archive.stalled"

    // The zip structure every zip reader works from (ZipStructureCheck).
    case zipHeaderMismatch = "zip.header-mismatch"
    case zipOverlappingEntries = "zip.overlapping-entries"
    case zipDuplicateName = "zip.duplicate-name"
    case zipUnportableName = "zip.unportable-name"
    case zipUnicodePathMismatch = "zip.unicode-path-mismatch"
    case zipUnsupportedMethod = "zip.unsupported-method"
    case zipAppleDouble = "zip.apple-double"
    case zipSixtyFourMismatch = "zip.zip64-mismatch"
    case zipEntryTypeMismatch = "zip.entry-type-mismatch"
    case zipStoredDescriptor = "zip.stored-descriptor"
    case zipGap = "zip.gap"

    // Recorded sizes and digests (the HCPackIntegrity key).
    case integrityMalformed = "integrity.malformed"
    case integrityMissingRecord = "integrity.missing-record"
    case integrityStrayRecord = "integrity.stray-record"
    case sizeMismatch = "integrity.size-mismatch"
    case digestMismatch = "integrity.digest-mismatch"

    // Size budgets (verify --budget FILE, docs/budgets.md).
    case budgetExceeded = "budget.exceeded"
    case budgetNearLimit = "budget.near-limit"

    // Signed releases (verify and install --trusted-key, docs/signing.md).
    case signatureMissing = "signature.missing"
    case signatureMalformed = "signature.malformed"
    case signatureUntrusted = "signature.untrusted"
    case signatureInvalid = "signature.invalid"
    case signatureMismatch = "signature.mismatch"
    case signatureExpired = "signature.expired"
    case signatureUnsigned = "signature.unsigned-file"

    // Delta packages (HCPackDeltaBase, docs/self-hosting.md).
    case deltaMalformed = "delta.malformed"
    case deltaMissingRecord = "delta.missing-record"
    case patchMalformed = "delta.patch-malformed"
    case patchMismatch = "delta.patch-mismatch"
    case patchBase = "delta.patch-base"
    case patchResult = "delta.patch-result"

    /// The severity a problem of this rule has unless a check says otherwise.
    public var severity: Severity {
        switch self {
        case .strayEntry, .filesKeyMissing, .filesUnlisted, .symlink, .hardlink, .script, .junk,
            .unsafePermissions, .integrityStrayRecord, .budgetNearLimit, .zipStoredDescriptor, .zipGap:
            .warning
        default:
            .error
        }
    }

    /// One line saying what the rule checks, for `docs/rules.md` and `hcpack rules`.
    public var summary: String {
        switch self {
        case .missingPlist: "ContentInfo.plist is missing at the package root."
        case .plistNotFile: "ContentInfo.plist is not a regular file (a folder, symlink or special file)."
        case .missingContents: "The Contents/ folder is missing."
        case .contentsNotFolder: "Contents is not a folder."
        case .strayEntry: "An entry at the package root other than ContentInfo.plist and Contents/."
        case .plistParse: "ContentInfo.plist cannot be parsed (XML or binary); the message gives line and column."
        case .plistNotDictionary: "The plist's top-level value is not a dictionary."
        case .plistMissingKey: "A required key (IAPProductIdentifier, ContentVersion) is absent."
        case .plistWrongType: "A known key has the wrong type (for example Files is not an array of strings)."
        case .productIdentifierSyntax: "IAPProductIdentifier is not 1 to 100 letters, digits, '.', '-' or '_'."
        case .contentVersionSyntax: "ContentVersion is not integers separated by periods (1, 1.0, 2.10.3)."
        case .filesKeyMissing:
            "The Files key is absent (as in packages Xcode builds): hcpack installs every file under Contents/; installers that copy only the listed files copy nothing."
        case .filesEmptyPath: "A Files entry is empty or has an empty component ('a//b')."
        case .filesAbsolutePath: "A Files entry starts with '/' or a drive letter."
        case .filesDotComponent: "A Files entry has a '.' or '..' component."
        case .filesBackslash: "A Files entry contains a backslash."
        case .filesControlCharacter: "A Files entry contains a control character (C0, DEL or C1: U+0080 to U+009F)."
        case .filesTrailingSlash: "A Files entry ends with '/'."
        case .filesDuplicate: "The same path is listed twice."
        case .filesCaseDuplicate: "Two entries differ only in letter case."
        case .filesNormalizationDuplicate: "Two entries differ only in Unicode normalization (NFC/NFD)."
        case .filesNotFound: "A listed file is not present under Contents/."
        case .filesNotRegular: "A listed path is a folder, symlink or special file, not a regular file."
        case .filesUnlisted: "A file under Contents/ is not listed in Files, so installers skip it."
        case .symlinkEscapes: "A symlink points outside the package."
        case .symlink: "A symlink inside the package (installers may not preserve it). An error in an archive: install refuses it."
        case .hardlinkEscapes: "A hard link refers to an entry outside the package."
        case .hardlink: "A hard link inside the package. An error in an archive: install refuses it."
        case .specialFile: "A device, fifo or socket."
        case .executable: "A native executable (Mach-O, fat Mach-O, ELF or PE), which hosted content may not carry."
        case .script: "A file starting with '#!' (a script)."
        case .junk: "Operating system junk (.DS_Store, __MACOSX/, ._*, Thumbs.db)."
        case .caseCollision: "Two paths that collide on a case-insensitive file system."
        case .normalizationCollision: "Two paths that differ only in Unicode normalization."
        case .nonUTF8Name: "A name that is not valid UTF-8."
        case .longPath: "A name component over 255 bytes or a path over 1024 bytes."
        case .tooLarge: "The content is larger than the size limit (2 GB by default, --max-size); a delta's with the files its patches make."
        case .unsafePermissions:
            "A setuid, setgid or world-writable entry (installed files get 0644/0755). Setuid or setgid in an archive is an error: install refuses it."
        case .reservedName: "A path under Contents/.hcpack/ (in any case), the folder where hcpack install keeps its records in DEST, or under Contents/.hcpack-patches/, where a delta keeps its binary patches."
        case .unsafePath: "An archive entry name that is absolute, has '..', a backslash or a drive letter."
        case .duplicateEntry: "Two archive entries with the same name, or a file and a folder with one name."
        case .encrypted: "An encrypted archive entry."
        case .corrupt: "The archive is damaged: checksum mismatch, truncated or inconsistent."
        case .unsupportedFormat: "Not a zip or tar (plain, gzip, bzip2, xz, zstd) archive; xar, RAR, 7z, ISO, cpio and others are refused."
        case .multipleRoots: "The archive holds more than one package root, or no recognisable root."
        case .compressionRatio: "The data expands more than the compression-ratio limit allows (zip bomb), or a delta's patches make more than the limit times their patches and bases."
        case .limitExceeded: "The archive exceeds an entry-count or size limit (a delta's patched files count as entries read)."
        case .nestedCompression: "A compressed stream inside a compressed stream (.tar.gz.gz); hosted content is compressed once."
        case .stalled: "Reading the archive made no progress within the watchdog's limits; the command stopped (exit 1)."
        case .zipHeaderMismatch: "A zip entry's local header disagrees with its central directory record (name, method, CRC-32, sizes, encryption)."
        case .zipOverlappingEntries: "Zip entries whose bytes overlap or are shared, or run into the central directory."
        case .zipDuplicateName: "The zip's central directory names the same path twice."
        case .zipUnportableName: "A zip entry name with a backslash, a NUL, or non-ASCII bytes without the UTF-8 flag."
        case .zipUnicodePathMismatch: "A zip entry's Unicode Path extra field (0x7075) does not match its name."
        case .zipUnsupportedMethod: "A zip entry compressed with a method other than stored or deflate."
        case .zipAppleDouble: "A macOS AppleDouble entry (__MACOSX/ or ._*) under Contents/ in a zip, which zip readers other than macOS's unpack as files."
        case .zipSixtyFourMismatch: "A zip64 record that lacks a value, or whose values disagree with the 32-bit fields or the other records."
        case .zipStoredDescriptor:
            "A stored zip entry whose local header defers its CRC-32 and sizes to a data descriptor (bit 3), which Java's ZipInputStream (Android apps) refuses."
        case .zipEntryTypeMismatch: "A zip entry whose attributes say folder but whose name does not end with '/', or a folder entry with data (an empty deflate stream is fine)."
        case .zipGap: "Bytes before the first zip entry or between two that no central directory record covers: Java's ZipInputStream stops there."
        case .integrityMalformed: "HCPackIntegrity is not a dictionary of {Size, SHA256} records."
        case .integrityMissingRecord: "A listed file has no size/digest record while HCPackIntegrity is present."
        case .integrityStrayRecord: "HCPackIntegrity records a file that Files does not list."
        case .sizeMismatch: "A file's size differs from its record."
        case .digestMismatch: "A file's SHA-256 differs from its record."
        case .budgetExceeded: "The content is over a size budget limit (total bytes, bytes per file, or file count)."
        case .budgetNearLimit: "The content has reached 80% of a size budget limit."
        case .signatureMissing: "No signed note beside the archive (ARCHIVE.hcsig, or --signature FILE)."
        case .signatureMalformed: "The signed note, or its text, is not in the format of docs/signing.md."
        case .signatureUntrusted: "No trusted key (--trusted-key) signed the note."
        case .signatureInvalid: "A trusted key's signature does not verify: the note was changed after signing."
        case .signatureMismatch: "The note names another archive (size, SHA-256), plist, product or version."
        case .signatureExpired: "The note's expires time has passed."
        case .signatureUnsigned: "A listed (or installed) file has no HCPackIntegrity record, so no signature covers it."
        case .deltaMalformed:
            "HCPackDeltaBase is not {ContentVersion, PlistSHA256, TargetPlistSHA256, optional UnchangedSHA256}, names a base not older than ContentVersion, or the delta has no Files."
        case .deltaMissingRecord: "A delta without UnchangedSHA256 lists a file without an HCPackIntegrity record, so the installed copy cannot be checked."
        case .patchMalformed:
            "HCPackPatches is not {path: {BaseSize, BaseSHA256, PatchSize, PatchSHA256, WindowLog}} in a delta, names a file not listed or not recorded, or one also carried whole, or a window too small for base and result; or HCPackPatchGroups is not [{BasesSize, BasesSHA256, Paths, PatchSize, PatchSHA256, WindowLog}], names a path with an HCPackPatches record or one path twice, a file over 1 MiB or a window too small for it, or more than 1 MiB of bases a file (install: a base from the receipt over 1 MiB or too large for the window)."
        case .patchMismatch: "A patch or patch group entry under Contents/.hcpack-patches/ is missing, differs from its recorded size or SHA-256, or is not recorded."
        case .patchBase: "Install: the destination's copy of a patched file is not the base the patch applies to, or its receipt's records of a patch group's bases are not the ones the group names (BasesSize, BasesSHA256)."
        case .patchResult: "A patch does not make the recorded file: its frame header declares a window over WindowLog, another size or a dictionary, or a patch group's entry is not one zstd frame per file (verify), or applying it fails (install: a damaged frame, another size or SHA-256)."
        }
    }
}
