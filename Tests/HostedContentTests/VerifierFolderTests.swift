import Foundation
import HostedContent
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A change that breaks a valid package folder in one way, the rule that must catch it and the severity this
/// test expects (written here, not read from `Rule`'s table, so a flipped severity fails).
struct FolderCase: CustomStringConvertible, Sendable {
    let name: String
    let rule: Rule
    let severity: Severity
    let mutate: @Sendable (TemporaryFolder) -> Void
    var description: String { name }

    init(name: String, rule: Rule, severity: Severity = .error, mutate: @escaping @Sendable (TemporaryFolder) -> Void) {
        self.name = name
        self.rule = rule
        self.severity = severity
        self.mutate = mutate
    }
}

func rewritePlist(_ folder: TemporaryFolder, _ body: String) {
    folder.write("ContentInfo.plist", plistXML(body))
}

let standardKeys = "<key>IAPProductIdentifier</key><string>com.example.levels</string><key>ContentVersion</key><string>1.0</string>"

func withFiles(_ files: [String]) -> String { standardKeys + filesXML(files) }

let allListed = sampleFiles.map(\.0)

let folderCases: [FolderCase] = [
    FolderCase(name: "no plist", rule: .missingPlist) { $0.remove("ContentInfo.plist") },
    FolderCase(name: "plist is a folder", rule: .plistNotFile) { $0.remove("ContentInfo.plist"); $0.makeFolder("ContentInfo.plist") },
    FolderCase(name: "plist is a symlink", rule: .plistNotFile) { f in
        f.write("real.plist", f.read("ContentInfo.plist") ?? [])
        f.remove("ContentInfo.plist")
        symlink("real.plist", f.url("ContentInfo.plist"))
    },
    FolderCase(name: "no Contents", rule: .missingContents) { $0.remove("Contents") },
    FolderCase(name: "Contents is a file", rule: .contentsNotFolder) { $0.remove("Contents"); $0.write("Contents", "x") },
    FolderCase(name: "stray root entry", rule: .strayEntry, severity: .warning) { $0.write("README.txt", "hi") },
    FolderCase(name: "malformed XML", rule: .plistParse) { $0.write("ContentInfo.plist", "<?xml version=\"1.0\"?>\n<plist>\n<dict>\n<key>A</key>\n<string>x</dict>\n</plist>\n") },
    FolderCase(name: "array at top", rule: .plistNotDictionary) { $0.write("ContentInfo.plist", "<?xml version=\"1.0\"?><plist version=\"1.0\"><array/></plist>") },
    FolderCase(name: "no product id", rule: .plistMissingKey) { rewritePlist($0, "<key>ContentVersion</key><string>1</string>" + filesXML(allListed)) },
    FolderCase(name: "no version", rule: .plistMissingKey) { rewritePlist($0, "<key>IAPProductIdentifier</key><string>a.b</string>" + filesXML(allListed)) },
    FolderCase(name: "product id is an integer", rule: .plistWrongType) { rewritePlist($0, "<key>IAPProductIdentifier</key><integer>5</integer><key>ContentVersion</key><string>1</string>" + filesXML(allListed)) },
    FolderCase(name: "Files is a string", rule: .plistWrongType) { rewritePlist($0, standardKeys + "<key>Files</key><string>index.json</string>") },
    FolderCase(name: "Files holds an integer", rule: .plistWrongType) { rewritePlist($0, standardKeys + "<key>Files</key><array><integer>1</integer></array>") },
    FolderCase(name: "bad product id", rule: .productIdentifierSyntax) { rewritePlist($0, "<key>IAPProductIdentifier</key><string>com example!</string><key>ContentVersion</key><string>1</string>" + filesXML(allListed)) },
    FolderCase(name: "product id too long", rule: .productIdentifierSyntax) { rewritePlist($0, "<key>IAPProductIdentifier</key><string>\(String(repeating: "a", count: 101))</string><key>ContentVersion</key><string>1</string>" + filesXML(allListed)) },
    FolderCase(name: "bad version", rule: .contentVersionSyntax) { rewritePlist($0, "<key>IAPProductIdentifier</key><string>a.b</string><key>ContentVersion</key><string>1..2</string>" + filesXML(allListed)) },
    FolderCase(name: "no Files", rule: .filesKeyMissing, severity: .warning) { rewritePlist($0, standardKeys) },
    FolderCase(name: "empty entry", rule: .filesEmptyPath) { rewritePlist($0, withFiles(allListed + [""])) },
    FolderCase(name: "double slash", rule: .filesEmptyPath) { rewritePlist($0, withFiles(allListed + ["levels//1.json"])) },
    FolderCase(name: "absolute entry", rule: .filesAbsolutePath) { rewritePlist($0, withFiles(allListed + ["/etc/passwd"])) },
    FolderCase(name: "drive letter", rule: .filesAbsolutePath) { rewritePlist($0, withFiles(allListed + ["C:x.json"])) },
    FolderCase(name: "dot-dot entry", rule: .filesDotComponent) { rewritePlist($0, withFiles(allListed + ["levels/../../secret"])) },
    FolderCase(name: "dot entry", rule: .filesDotComponent) { rewritePlist($0, withFiles(allListed + ["./index.json"])) },
    FolderCase(name: "backslash", rule: .filesBackslash) { rewritePlist($0, withFiles(allListed + ["levels\\1.json"])) },
    FolderCase(name: "control character", rule: .filesControlCharacter) { rewritePlist($0, withFiles(allListed + ["bad\tname.json"])) },
    FolderCase(name: "trailing slash", rule: .filesTrailingSlash) { rewritePlist($0, withFiles(allListed + ["levels/"])) },
    FolderCase(name: "duplicate", rule: .filesDuplicate) { rewritePlist($0, withFiles(allListed + ["index.json"])) },
    FolderCase(name: "case duplicate", rule: .filesCaseDuplicate) { rewritePlist($0, withFiles(allListed + ["INDEX.json"])) },
    FolderCase(name: "normalization duplicate", rule: .filesNormalizationDuplicate) { rewritePlist($0, withFiles(allListed + ["art/Cafe\u{301}.txt"])) },
    FolderCase(name: "listed file missing", rule: .filesNotFound) { rewritePlist($0, withFiles(allListed + ["levels/3.json"])) },
    FolderCase(name: "listed folder", rule: .filesNotRegular) { rewritePlist($0, withFiles(allListed + ["levels"])) },
    FolderCase(name: "listed symlink", rule: .filesNotRegular) { f in
        symlink("1.json", f.url("Contents/levels/link.json"))
        rewritePlist(f, withFiles(allListed + ["levels/link.json"]))
    },
    FolderCase(name: "unlisted file", rule: .filesUnlisted, severity: .warning) { $0.write("Contents/levels/extra.json", "{}") },
    FolderCase(name: "symlink inside", rule: .symlink, severity: .warning) { symlink("1.json", $0.url("Contents/levels/alias.json")) },
    FolderCase(name: "symlink escaping", rule: .symlinkEscapes) { symlink("../../../etc/passwd", $0.url("Contents/levels/evil")) },
    FolderCase(name: "absolute symlink", rule: .symlinkEscapes) { symlink("/etc/passwd", $0.url("Contents/evil")) },
    FolderCase(name: "fifo", rule: .specialFile) { mkfifo($0.url("Contents/pipe"), 0o644) },
    FolderCase(name: "ELF", rule: .executable) { $0.write("Contents/tool", [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]) },
    FolderCase(name: "Mach-O", rule: .executable) { $0.write("Contents/tool", [0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1]) },
    FolderCase(name: "fat Mach-O", rule: .executable) { $0.write("Contents/tool", [0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 2]) },
    FolderCase(name: "PE", rule: .executable) { $0.write("Contents/tool.exe", [0x4d, 0x5a, 0x90, 0, 3, 0, 0, 0]) },
    FolderCase(name: "script", rule: .script, severity: .warning) { $0.write("Contents/run.sh", "#!/bin/sh\necho hi\n") },
    FolderCase(name: ".DS_Store", rule: .junk, severity: .warning) { $0.write("Contents/.DS_Store", [0, 0, 0, 1]) },
    FolderCase(name: "AppleDouble", rule: .junk, severity: .warning) { $0.write("Contents/._index.json", [0, 5, 22, 7]) },
    FolderCase(name: "__MACOSX", rule: .junk, severity: .warning) { $0.write("__MACOSX/Contents/._x", "x") },
    FolderCase(name: "case collision", rule: .caseCollision) { $0.write("Contents/Index.json", "{}") },
    FolderCase(name: "normalization collision", rule: .normalizationCollision) { $0.write("Contents/art/Cafe\u{301}.txt", "nfd") },
    FolderCase(name: "non-UTF-8 name", rule: .nonUTF8Name) { f in
        let name: [UInt8] = Array((f.url("Contents") + "/bad-").utf8) + [0xff, 0xfe] + Array(".txt".utf8) + [0]
        let descriptor = name.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { open($0, O_CREAT | O_WRONLY, 0o644) }
        }
        close(descriptor)
    },
    FolderCase(name: "long path", rule: .longPath) { $0.write("Contents/" + (1...5).map { String(repeating: String($0), count: 250) }.joined(separator: "/") + "/x", "x") },
    FolderCase(name: "setuid", rule: .unsafePermissions, severity: .warning) { chmod($0.url("Contents/index.json"), 0o4755) },
    FolderCase(name: "world-writable", rule: .unsafePermissions, severity: .warning) { chmod($0.url("Contents/index.json"), 0o666) },
]

@Suite("verify: package folders")
struct VerifierFolderTests {
    @Test("A valid package has no problems at all")
    func validPackage() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        let report = try Verifier.verify(folder.path)
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
        #expect(report.isValid(strict: true))
        #expect(report.contentInfo?.productIdentifier == "com.example.levels")
        #expect(report.listedFileCount == 4)
        #expect(report.contentFileCount == 4)
        #expect(report.contentBytes == Int64(sampleFiles.map { $0.1.utf8.count }.reduce(0, +)))
    }

    @Test("Each kind of bad folder is caught by its rule, with the right severity", arguments: folderCases)
    func badFolder(_ testCase: FolderCase) throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        testCase.mutate(folder)
        let report = try Verifier.verify(folder.path)
        let matching = report.problems.problems.filter { $0.rule == testCase.rule }
        #expect(!matching.isEmpty, "expected \(testCase.rule.rawValue), got \(report.problems.problems.map(\.rule.rawValue))")
        #expect(matching.allSatisfy { $0.severity == testCase.severity }, "\(matching.map(\.severity))")
        #expect(matching.allSatisfy { !$0.message.isEmpty })
        #expect(report.isValid(strict: true) == false)
        // A warning alone leaves the package valid; an error makes it invalid.
        #expect(report.isValid() == (testCase.severity == .warning), "\(report.problems.problems.map(\.rule.rawValue))")
    }

    @Test("Every problem is reported in one run, not just the first")
    func everyProblemAtOnce() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        rewritePlist(folder, "<key>IAPProductIdentifier</key><string>bad id</string><key>ContentVersion</key><string>v1</string>" + filesXML(allListed + ["missing.json", "/abs"]))
        folder.write("Contents/tool", [0x7f, 0x45, 0x4c, 0x46])
        let rules = try Verifier.verify(folder.path).problems.rules
        #expect(rules.isSuperset(of: [.productIdentifierSyntax, .contentVersionSyntax, .filesNotFound, .filesAbsolutePath, .executable, .filesUnlisted]))
    }

    @Test("A plist parse error names line and column")
    func parseErrorPosition() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        folder.write("ContentInfo.plist", "<?xml version=\"1.0\"?>\n<plist>\n<dict>\n<key>A</key>\n<string>x</dict>\n</plist>\n")
        let problem = try #require(try Verifier.verify(folder.path).problems.problems.first { $0.rule == .plistParse })
        #expect(problem.message.contains("line 5"))
        #expect(problem.message.contains("column"))
    }

    @Test("A binary plist is read like an XML one")
    func binaryPlist() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        let result = python(
            """
            import plistlib
            d = plistlib.load(open('ContentInfo.plist', 'rb'))
            plistlib.dump(d, open('ContentInfo.plist', 'wb'), fmt=plistlib.FMT_BINARY)
            """, in: folder.path)
        #expect(result.status == 0, "\(result.output)")
        #expect(folder.read("ContentInfo.plist")?.starts(with: Array("bplist00".utf8)) == true)
        let report = try Verifier.verify(folder.path)
        #expect(report.problems.problems.isEmpty, "\(report.problems.problems)")
        #expect(report.contentInfo?.files == allListed)
    }

    @Test("Content over --max-size is an error")
    func maxSize() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder)
        let report = try Verifier.verify(folder.path, options: VerifyOptions(maxSize: 10))
        #expect(report.problems.rules.contains(.tooLarge))
    }

    @Test("A missing path is an environment error, not a report")
    func missingPath() {
        #expect(throws: HCPackError.self) { try Verifier.verify("/nonexistent/hcpack/package") }
        do {
            _ = try Verifier.verify("/nonexistent/hcpack/package")
        } catch {
            #expect(error.code == .notFound)
        }
    }
}
