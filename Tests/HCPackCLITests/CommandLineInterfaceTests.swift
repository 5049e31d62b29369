import Foundation
import HCPackCLI
import TestSupport
import Testing

/// Help, usage, man page and completions say what the binary does: required options, file values, docs.
@Suite("Help, man page and completions agree with the binary and the docs")
struct CommandLineInterfaceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test("Required options are in the usage line and marked (required) in help and the man page")
    func requiredOptions() {
        let required = [
            ("install", "--dest DIR"), ("keygen", "--name NAME"), ("keygen", "-o FILE"), ("sign", "--key KEY"),
            ("verify-catalog", "--trusted-key PUB"), ("delta", "-o PATCH"), ("catalog", "--serial N"),
            ("transporter", "--vendor-id ID"), ("init", "--product-id ID"),
        ]
        let man = hcpack(["man"]).stdout
        for (command, form) in required {
            let help = hcpack(["help", command])
            #expect(help.status == 0)
            let usage = help.stdout.split(separator: "\n").first { $0.hasPrefix("Usage: ") } ?? ""
            #expect((usage + " ").contains(" " + form + " "), "\(command): \(usage)")
            let name = form.split(separator: " ")[0]
            let line =
                help.stdout.split(separator: "\n").first {
                    $0.hasPrefix("  ") && ($0.contains(name + " ") || $0.contains(name + ","))
                } ?? ""
            #expect(line.contains("(required)"), "\(command) \(form): \(line)")
            // Leaving it out is a usage error.
            #expect(hcpack([command, "x"]).status == 2, "\(command) without \(form)")
        }
        #expect(man.contains("(required) The folder to install into"))
        #expect(!hcpack(["help", "verify"]).stdout.contains("(required)"))
    }

    @Test("hcpack help help exits 0; --version is in the overview and the man page")
    func helpHelp() {
        let help = hcpack(["help", "help"])
        #expect(help.status == 0 && help.stdout.contains("Usage: hcpack help [COMMAND]"))
        #expect(hcpack(["--help"]).stdout.contains("hcpack --version"))
        #expect(hcpack(["man"]).stdout.contains(".B \\-\\-version"))
    }

    @Test("The man page names every document of docs/ and every environment variable hcpack reads")
    func manPageDocs() throws {
        let man = hcpack(["man"]).stdout
        let docs = try FileManager.default.contentsOfDirectory(atPath: Self.root + "/docs").filter { $0.hasSuffix(".md") }
        #expect(docs.count >= 12)
        let seeAlso = man.components(separatedBy: ".SH \"SEE ALSO\"").last ?? ""
        for doc in docs { #expect(seeAlso.contains(doc), "SEE ALSO lacks \(doc)") }
        let environment = man.components(separatedBy: ".SH ENVIRONMENT").last ?? ""
        for variable in ["HCPACK_TEMPLATES", "SOURCE_DATE_EPOCH", "HCPACK_STALL_SECONDS"] {
            #expect(environment.contains(".B \(variable)"), "ENVIRONMENT lacks \(variable)")
        }
    }

    @Test("Completions: files where a file is expected (keys, delta -o), nothing for free text (--expires), help in zsh")
    func completionValues() throws {
        let folder = TemporaryFolder()
        let path = folder.write("hcpack.bash", hcpack(["completions", "bash"]).stdout)
        folder.write("release.key", "x")
        func complete(_ words: [String]) -> [String] { bashCompletions(path, words, in: folder.path) }
        #expect(complete(["hcpack", "sign", "--key", "rel"]) == ["release.key"])
        #expect(complete(["hcpack", "build", "--sign-key", "rel"]) == ["release.key"])
        #expect(complete(["hcpack", "verify", "--trusted-key", "rel"]) == ["release.key"])
        #expect(complete(["hcpack", "delta", "-o", "rel"]) == ["release.key"])
        #expect(complete(["hcpack", "sign", "--expires", ""]) == [])
        #expect(complete(["hcpack", "catalog", "--expires", "D"]) == [])
        let zsh = hcpack(["completions", "zsh"]).stdout
        #expect(zsh.contains("    'help:Show a command'\\''s options.'\n"))
        let fish = hcpack(["completions", "fish"]).stdout
        #expect(!fish.contains("DATE DURATION") && !zsh.contains("(DATE DURATION)"))
    }

    @Test("docs/rules.md gives each rule the severity hcpack rules prints, and the same archive verdicts")
    func rulesText() throws {
        let text = try String(contentsOfFile: Self.root + "/docs/rules.md", encoding: .utf8)
        let listing = try #require(jsonObject(hcpack(["rules", "--json"]).stdout)?["rules"] as? [[String: String]])
        #expect(listing.count > 40)
        for rule in listing {
            let id = rule["rule"] ?? "", severity = rule["severity"] ?? ""
            let row = text.split(separator: "\n").first { $0.hasPrefix("| `\(id)` |") } ?? ""
            #expect(row.hasPrefix("| `\(id)` | \(severity) | "), "\(id): \(row)")
            // A warning that is an error in an archive says so in both places.
            if row.contains("in an archive is an error") || row.contains("An error in an archive") {
                #expect((rule["summary"] ?? "").contains("install refuses it"), "hcpack rules: \(id) lacks the archive verdict")
            }
        }
        let summaries = Dictionary(uniqueKeysWithValues: listing.map { ($0["rule"] ?? "", $0["summary"] ?? "") })
        for id in ["content.symlink", "content.hardlink", "content.unsafe-permissions"] {
            #expect(summaries[id]?.contains("in an archive") == true, "\(id): \(summaries[id] ?? "")")
        }
    }
}

/// What the bash completion script at `path` offers for the command line `words` (the last one being typed).
func bashCompletions(_ path: String, _ words: [String], in directory: String) -> [String] {
    let quoted = words.map { "'\($0)'" }.joined(separator: " ")
    let script = """
        source '\(path)'
        COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
        _hcpack
        printf '%s\\n' "${COMPREPLY[@]}"
        """
    return run("bash", ["-c", script], in: directory).output.split(separator: "\n").map(String.init)
}
