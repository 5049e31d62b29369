import Foundation
import HostedContent
import TestSupport
import Testing

@Suite("hcpack transporter")
struct TransporterTests {
    static let templates = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Templates").path

    static func archive(_ folder: TemporaryFolder) -> String {
        writeValidPackage(in: folder, root: "pkg")
        zipFolder(folder.url("pkg"), to: folder.url("levels.zip"))
        return folder.url("levels.zip")
    }

    /// The text of an XML element, read by Python's XML parser (so the file must be well formed).
    static func xmlValues(_ file: String, in directory: String) -> String {
        let script = """
            import xml.etree.ElementTree as E
            ns = {'i': 'http://apple.com/itunes/importer'}
            r = E.parse('\(file)').getroot()
            iap = r.find('i:software/i:software_metadata/i:in_app_purchases/i:in_app_purchase', ns)
            c = iap.find('i:content', ns)
            print(r.find('i:software/i:vendor_id', ns).text, iap.find('i:product_id', ns).text,
                  c.find('i:file_name', ns).text, c.find('i:size', ns).text,
                  c.find('i:checksum', ns).get('type'), c.find('i:checksum', ns).text)
            """
        return python(script, in: directory).output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("Writes metadata.xml and the archive; size and MD5 match the copied file")
    func writes() throws {
        let folder = TemporaryFolder()
        let archive = Self.archive(folder)
        let result = hcpack(["transporter", archive, "--vendor-id", "com.example.app", "-o", "Upload.itmsp"], in: folder.path)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.url("Upload.itmsp")).sorted()
        #expect(names == ["levels.zip", "metadata.xml"])
        #expect(folder.read("Upload.itmsp/levels.zip") == folder.read("levels.zip"))
        let md5 = String(run("md5sum", [archive]).output.prefix(32))
        let size = try #require(folder.read("levels.zip")?.count)
        #expect(
            Self.xmlValues("Upload.itmsp/metadata.xml", in: folder.path)
                == "com.example.app com.example.levels levels.zip \(size) md5 \(md5)")
        #expect(result.stdout.contains(md5))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty)
    }

    @Test("--json reports the output, size, MD5 and the verification")
    func json() throws {
        let folder = TemporaryFolder()
        let archive = Self.archive(folder)
        let result = hcpack(["transporter", "--json", archive, "--vendor-id", "app", "-o", folder.url("Up.itmsp")])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(jsonObject(result.stdout))
        #expect(object["written"] as? Bool == true)
        #expect(object["output"] as? String == folder.url("Up.itmsp"))
        #expect(object["md5"] as? String == String(run("md5sum", [archive]).output.prefix(32)))
        #expect(object["size"] as? Int == folder.read("levels.zip")?.count)
        #expect((object["verification"] as? [String: Any])?["valid"] as? Bool == true)
    }

    @Test("An invalid archive exits 1, prints the problems and writes nothing")
    func invalid() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        folder.remove("pkg/Contents/index.json")
        zipFolder(folder.url("pkg"), to: folder.url("bad.zip"))
        let result = hcpack(["transporter", "bad.zip", "--vendor-id", "app", "-o", "Upload.itmsp"], in: folder.path)
        #expect(result.status == 1)
        #expect(result.stdout.contains("[files.not-found]"))
        #expect(result.stderr.contains("nothing was written"))
        #expect(!FileManager.default.fileExists(atPath: folder.url("Upload.itmsp")))
    }

    @Test("An existing output needs --force; with it the folder is replaced whole")
    func force() throws {
        let folder = TemporaryFolder()
        let archive = Self.archive(folder)
        folder.write("Upload.itmsp/stale.txt", "old")
        let refused = hcpack(["transporter", archive, "--vendor-id", "app", "-o", folder.url("Upload.itmsp")])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--force"))
        #expect(folder.read("Upload.itmsp/stale.txt") != nil)
        let forced = hcpack(["transporter", archive, "--vendor-id", "app", "-o", folder.url("Upload.itmsp"), "--force"])
        #expect(forced.status == 0, "\(forced.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.url("Upload.itmsp")).sorted()
        #expect(names == ["levels.zip", "metadata.xml"])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["Upload.itmsp", "levels.zip", "pkg"])
    }

    @Test(
        "Request mistakes exit 2 with a message saying what to fix",
        arguments: [
            (["--vendor-id", "app"], "missing option -o"),
            (["-o", "Upload.itmsp"], "missing option --vendor-id"),
            (["--vendor-id", "app", "-o", "Upload"], "NAME.itmsp"),
            (["--vendor-id", "bad id!", "-o", "Upload.itmsp"], "vendor ID 'bad id!'"),
        ])
    func mistakes(options: [String], message: String) {
        let folder = TemporaryFolder()
        let archive = Self.archive(folder)
        let result = hcpack(["transporter", archive] + options, in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder.url("Upload.itmsp")))
    }

    @Test("A folder is refused: Transporter uploads an archive")
    func folderRefused() {
        let folder = TemporaryFolder()
        writeValidPackage(in: folder, root: "pkg")
        let result = hcpack(["transporter", "pkg", "--vendor-id", "app", "-o", "Upload.itmsp"], in: folder.path)
        #expect(result.status == 2)
        #expect(result.stderr.contains("hcpack build"))
    }

    @Test("HCPACK_TEMPLATES picks the template; a template with an unknown placeholder is named in the error")
    func templateOverride() {
        let folder = TemporaryFolder()
        let archive = Self.archive(folder)
        folder.write("tpl/transporter-metadata.xml", "<x>{{VENDOR_ID}}|{{MD5}}|{{FILE_SIZE}}</x>\n")
        let result = hcpack(
            ["transporter", archive, "--vendor-id", "app", "-o", folder.url("One.itmsp")],
            environment: ["HCPACK_TEMPLATES": folder.url("tpl")])
        #expect(result.status == 0, "\(result.stderr)")
        let text = String(decoding: folder.read("One.itmsp/metadata.xml") ?? [], as: UTF8.self)
        let md5 = String(run("md5sum", [archive]).output.prefix(32))
        let size = folder.read("levels.zip")?.count ?? -1
        #expect(text == "<x>app|\(md5)|\(size)</x>\n")
        #expect(TransporterPackage.xmlEscape("a&b<'\">") == "a&amp;b&lt;&apos;&quot;&gt;")
        folder.write("tpl/transporter-metadata.xml", "<x>{{PRICE_TIER}}</x>\n")
        let broken = hcpack(
            ["transporter", archive, "--vendor-id", "app", "-o", folder.url("Two.itmsp")],
            environment: ["HCPACK_TEMPLATES": folder.url("tpl")])
        #expect(broken.status == 3)
        #expect(broken.stderr.contains("transporter-metadata.xml: unknown placeholder '{{PRICE_TIER}}'"))
        #expect(!FileManager.default.fileExists(atPath: folder.url("Two.itmsp")))
    }

    @Test("The shipped template has only known placeholders")
    func shippedTemplate() throws {
        let text = try String(contentsOfFile: Self.templates + "/transporter-metadata.xml", encoding: .utf8)
        for name in ["VENDOR_ID", "PRODUCT_ID", "FILE_NAME", "FILE_SIZE", "MD5"] {
            #expect(text.contains("{{\(name)}}"))
        }
    }
}
