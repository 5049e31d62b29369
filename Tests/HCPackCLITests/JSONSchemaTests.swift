import Foundation
import TestSupport
import Testing

/// Every command's `--json` output, for a success and for each kind of refusal, checked against its schema in
/// docs/schemas/ (docs/json.md): a change the schema does not allow fails here.
@Suite("--json output matches docs/schemas")
struct JSONSchemaTests {
    static let schemas = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/schemas").path

    /// Runs hcpack and checks: the expected exit status, exactly one JSON object on stdout that conforms to
    /// `COMMAND.schema.json`, and for an error object, the exit code it names. Returns the object.
    @discardableResult
    static func conforms(
        _ arguments: [String], status: Int32, in directory: String = FileManager.default.currentDirectoryPath,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> JSONDocument {
        let result = hcpack(arguments, in: directory)
        #expect(result.status == status, "\(arguments): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(!result.stdout.isEmpty, "\(arguments) printed nothing on stdout", sourceLocation: sourceLocation)
        let document = try JSONDocument.parse(result.stdout)
        guard case .object = document else {
            Issue.record("\(arguments): stdout is not one JSON object", sourceLocation: sourceLocation)
            return document
        }
        let errors = try JSONSchemaValidator(folder: schemas).validate(document, against: "\(arguments[0]).schema.json")
        #expect(errors.isEmpty, "\(arguments): \(errors)", sourceLocation: sourceLocation)
        if case .integer(let code)? = document["error"]?["exitCode"] {
            #expect(Int32(code) == result.status, sourceLocation: sourceLocation)
        }
        return document
    }

    @Test("build: built, invalid package, output in the way, signed")
    func build() throws {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let output = folder.url("out.zip")
        let built = try Self.conforms(["build", folder.url("pkg"), "-o", output, "--json"], status: 0)
        #expect(built["built"] == .bool(true) && built["signature"] == .null)
        let exists = try Self.conforms(["build", folder.url("pkg"), "-o", output, "--json"], status: 2)
        #expect(exists["error"]?["code"] == .string("invalidRequest"))
        try Self.conforms(["build", folder.url("pkg"), "-o", folder.url("out-dir"), "--format", "dir", "--json"], status: 0)
        #expect(hcpack(["keygen", "--name", "example.com/k", "-o", folder.url("k.key")]).status == 0)
        let signed = try Self.conforms(
            ["build", folder.url("pkg"), "-o", folder.url("signed.zip"), "--sign-key", folder.url("k.key"), "--json"], status: 0)
        #expect(signed["signature"]?["signers"] != nil)
        folder.write("pkg/ContentInfo.plist", "not a plist")
        let invalid = try Self.conforms(["build", folder.url("pkg"), "-o", folder.url("bad.zip"), "--json"], status: 1)
        #expect(invalid["built"] == .bool(false))
        let missing = try Self.conforms(["build", folder.url("nothing"), "--json"], status: 3)
        #expect(missing["error"]?["code"] == .string("notFound"))
    }

    @Test("verify: valid archive with a note, folder, delta, invalid, unreadable")
    func verify() throws {
        let bench = CatalogBench()
        let signed = try Self.conforms(["verify", bench.v2, "--trusted-key", bench.pub, "--json"], status: 0)
        #expect(signed["signature"]?["valid"] == .bool(true))
        try Self.conforms(["verify", bench.v1, "--json"], status: 0)
        try Self.conforms(["verify", bench.corpus.folder.url("src-l-1.0.zip"), "--json"], status: 0)
        let delta = try Self.conforms(["verify", bench.delta, "--json"], status: 0)
        #expect(delta["delta"]?["baseVersion"] == .string("1.0"))
        let unsigned = try Self.conforms(["verify", bench.v1, "--trusted-key", bench.pub, "--json"], status: 1)
        #expect(unsigned["valid"] == .bool(false))
        bench.corpus.folder.write("junk.zip", "not an archive")
        try Self.conforms(["verify", bench.corpus.folder.url("junk.zip"), "--json"], status: 1)
        let missing = try Self.conforms(["verify", bench.corpus.folder.url("none.zip"), "--json"], status: 3)
        #expect(missing["error"]?["code"] == .string("notFound"))
    }

    @Test("install: installed, upgraded, unchanged, invalid archive, downgrade, user's file, --expect-*, no delta base, no DEST")
    func install() throws {
        let bench = CatalogBench()
        let dest = bench.corpus.dest("dest")
        let first = try Self.conforms(["install", bench.v1, "--dest", dest, "--json"], status: 0)
        #expect(first["status"] == .string("installed"))
        try Self.conforms(["install", bench.v1, "--dest", dest, "--json"], status: 0)
        try Self.conforms(["install", bench.v2, "--dest", dest, "--json"], status: 0)
        let downgrade = try Self.conforms(["install", bench.v1, "--dest", dest, "--json"], status: 1)
        #expect(downgrade["error"]?["code"] == .string("invalidPackage"))
        for expect in [["--expect-version", "9"], ["--expect-product-id", "com.example.other"]] {
            try Self.conforms(["install", bench.v2, "--dest", dest, "--json"] + expect, status: 1)
        }
        let fresh = bench.corpus.dest("fresh")
        let noBase = try Self.conforms(["install", bench.delta, "--dest", fresh, "--json"], status: 1)
        #expect(noBase["error"] != nil)
        bench.corpus.folder.write("fresh/index.json", "the user's own file\n")
        try Self.conforms(["install", bench.v1, "--dest", fresh, "--json"], status: 1)
        bench.corpus.folder.write("junk.zip", "not an archive")
        let rejected = try Self.conforms(["install", bench.corpus.folder.url("junk.zip"), "--dest", fresh, "--json"], status: 1)
        #expect(rejected["valid"] == .bool(false))
        try Self.conforms(["install", bench.v1, "--dest", bench.corpus.folder.url("no-such-dest"), "--json"], status: 3)
    }

    @Test("delta, sign, catalog, verify-catalog: written, and each kind of refusal")
    func signingAndDeltas() throws {
        let bench = CatalogBench()
        let folder = bench.corpus.folder
        try Self.conforms(["delta", bench.v1, bench.v2, "-o", folder.url("d2.zip"), "--sign-key", bench.key, "--json"], status: 0)
        try Self.conforms(["delta", bench.v2, bench.v1, "-o", folder.url("d3.zip"), "--json"], status: 1)
        try Self.conforms(["delta", bench.v1, bench.v2, "-o", folder.url("d2.zip"), "--json"], status: 2)
        let signed = try Self.conforms(["sign", bench.v1, "--key", bench.key, "--json"], status: 0)
        #expect(signed["alreadySigned"] == .bool(false))
        folder.write("junk.zip", "not an archive")
        let refused = try Self.conforms(["sign", folder.url("junk.zip"), "--key", bench.key, "--json"], status: 1)
        #expect(refused["valid"] == .bool(false))
        try Self.conforms(["sign", bench.v1, "--key", folder.url("no.key"), "--json"], status: 3)
        let made = try Self.conforms(bench.makeArguments(["--sign-key", bench.key, "--json"]), status: 0)
        #expect(made["signature"] != .null)
        try Self.conforms(["catalog", folder.url("junk.zip"), "--base-url", "https://x/", "-o", folder.url("c2.json"), "--serial", "1", "--json"], status: 1)
        let valid = try Self.conforms(["verify-catalog", bench.catalog, "--trusted-key", bench.pub, "--json"], status: 0)
        #expect(valid["valid"] == .bool(true))
        try Self.conforms(["verify-catalog", bench.catalog, "--trusted-key", bench.pub, "--min-serial", "99", "--json"], status: 1)
        try Self.conforms(["verify-catalog", folder.url("none.json"), "--trusted-key", bench.pub, "--json"], status: 3)
    }

    @Test("inspect, diff, transporter, rules: shown, and each kind of refusal")
    func readers() throws {
        let bench = CatalogBench()
        let folder = bench.corpus.folder
        let package = try Self.conforms(["inspect", bench.v1, "--json"], status: 0)
        #expect(package["delta"] == .null)
        try Self.conforms(["inspect", folder.url("src-l-1.0.zip"), "--json"], status: 0)
        try Self.conforms(["inspect", bench.delta, "--json"], status: 0)
        let dest = bench.corpus.dest("dest")
        #expect(hcpack(["install", bench.v1, "--dest", dest]).status == 0)
        let receipts = try Self.conforms(["inspect", dest, "--json"], status: 0)
        #expect(receipts["receipts"] != nil)
        folder.makeFolder("empty")
        try Self.conforms(["inspect", folder.url("empty"), "--json"], status: 1)
        try Self.conforms(["inspect", folder.url("none"), "--json"], status: 3)
        try Self.conforms(["diff", bench.v1, bench.v2, "--json"], status: 0)
        try Self.conforms(["diff", bench.v2, bench.v1, "--fail-on-downgrade", "--json"], status: 1)
        try Self.conforms(["diff", bench.v1, folder.url("none.zip"), "--json"], status: 3)
        let upload = folder.url("Up.itmsp")
        let written = try Self.conforms(["transporter", bench.v1, "--vendor-id", "app", "-o", upload, "--json"], status: 0)
        #expect(written["written"] == .bool(true))
        try Self.conforms(["transporter", bench.v1, "--vendor-id", "app", "-o", upload, "--json"], status: 2)
        folder.write("junk.zip", "not an archive")
        let invalid = try Self.conforms(["transporter", folder.url("junk.zip"), "--vendor-id", "app", "-o", folder.url("J.itmsp"), "--json"], status: 1)
        #expect(invalid["written"] == .bool(false))
        try Self.conforms(["rules", "--json"], status: 0)
    }

    @Test("The validator refuses what the schemas forbid: an extra field, a missing one, a wrong type, a value outside enum")
    func validatorRefuses() throws {
        let validator = JSONSchemaValidator(folder: Self.schemas)
        let good = try JSONDocument.parse(#"{"error": {"code": "io", "exitCode": 3, "message": "m", "path": null}}"#)
        #expect(try validator.validate(good, against: "verify.schema.json").isEmpty)
        for bad in [
            #"{"error": {"code": "io", "exitCode": 3, "message": "m", "path": null, "extra": 1}}"#,
            #"{"error": {"code": "io", "exitCode": 3, "message": "m"}}"#,
            #"{"error": {"code": "io", "exitCode": true, "message": "m", "path": null}}"#,
            #"{"error": {"code": "io", "exitCode": 3.5, "message": "m", "path": null}}"#,
            #"{"error": {"code": "oops", "exitCode": 3, "message": "m", "path": null}}"#,
            #"{"rules": [{"rule": "a", "severity": "error", "summary": 1}]}"#,
        ] {
            let schema = bad.hasPrefix(#"{"rules""#) ? "rules.schema.json" : "verify.schema.json"
            #expect(try !validator.validate(try JSONDocument.parse(bad), against: schema).isEmpty, "\(bad)")
        }
        #expect(throws: (any Error).self) { try JSONDocument.parse("{}\n{}") }
    }
}
