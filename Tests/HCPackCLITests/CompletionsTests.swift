import Foundation
import HCPackCLI
import TestSupport
import Testing

@Suite("Shell completions and the man page")
struct CompletionsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test("Every command and every long option appears in each shell's script", arguments: ["bash", "zsh", "fish"])
    func everything(shell: String) {
        let result = hcpack(["completions", shell])
        #expect(result.status == 0)
        let script = result.stdout
        #expect(HCPack.specs.count >= 10)
        for spec in HCPack.specs {
            #expect(script.contains(spec.name), "\(shell) script lacks command \(spec.name)")
            for option in spec.options {
                let spelled = shell == "fish" ? "-l \(option.name)" : "--\(option.name)"
                #expect(script.contains(spelled), "\(shell) script lacks \(spec.name) \(spelled)")
            }
        }
    }

    @Test("The bash script parses (bash -n) and completes commands, options, values and choices")
    func bashWorks() throws {
        let folder = TemporaryFolder()
        let path = folder.write("hcpack.bash", hcpack(["completions", "bash"]).stdout)
        #expect(run("bash", ["-n", path]).status == 0)
        folder.write("pkg.zip", "x")
        func complete(_ words: [String]) -> [String] { bashCompletions(path, words, in: folder.path) }
        #expect(complete(["hcpack", "ins"]) == ["install", "inspect"])
        #expect(complete(["hcpack", "verify", "--bu"]) == ["--budget"])
        #expect(complete(["hcpack", "completions", "z"]) == ["zsh"])
        #expect(complete(["hcpack", "verify", "pk"]) == ["pkg.zip"])
        #expect(complete(["hcpack", "help", "tra"]) == ["transporter"])
        #expect(complete(["hcpack", "diff", "--"]).contains("--fail-on-downgrade"))
        #expect(complete(["hcpack", "build", "--format", "t"]) == ["tar.gz"], "a|b|c values are offered as choices")
    }

    @Test("The zsh and fish scripts are well formed: balanced quotes, one definition per command")
    func zshAndFish() {
        let zsh = hcpack(["completions", "zsh"]).stdout
        #expect(zsh.hasPrefix("#compdef hcpack\n"))
        for spec in HCPack.specs {
            #expect(zsh.contains("\n    \(spec.name))\n      _arguments"), "zsh lacks a case for \(spec.name)")
        }
        let fish = hcpack(["completions", "fish"]).stdout
        for line in fish.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.hasPrefix("complete -c hcpack "), "\(line)")
            let unescaped = line.replacingOccurrences(of: "\\\\", with: "").replacingOccurrences(of: "\\'", with: "")
            #expect(unescaped.filter { $0 == "'" }.count % 2 == 0, "unbalanced quotes: \(line)")
        }
        // zsh: quotes balance over the whole script once the '\'' idiom is removed.
        #expect(zsh.replacingOccurrences(of: "'\\''", with: "").filter { $0 == "'" }.count % 2 == 0)
        // zsh and fish parse them (make deps installs both; a missing shell fails with 127).
        let folder = TemporaryFolder()
        let zshParsed = run("zsh", ["-n", folder.write("_hcpack", zsh)])
        #expect(zshParsed.status == 0, "\(zshParsed.output)")
        let fishParsed = run("fish", ["-n", folder.write("hcpack.fish", fish)])
        #expect(fishParsed.status == 0, "\(fishParsed.output)")
    }

    @Test("The fish script completes commands, options and option values (make deps installs fish)")
    func fishWorks() throws {
        let version = run("fish", ["--version"])
        try #require(version.status == 0, "fish is missing: run make deps (\(version.output))")
        let folder = TemporaryFolder()
        let path = folder.write("hcpack.fish", hcpack(["completions", "fish"]).stdout)
        func complete(_ line: String) -> [String] {
            let result = run("fish", ["-c", "source '\(path)'; complete -C '\(line)'"])
            return result.output.split(separator: "\n").map { String($0.prefix(while: { $0 != "\t" })) }
        }
        #expect(complete("hcpack ver") == ["verify", "verify-catalog", "verify-file"])
        #expect(complete("hcpack verify --bu") == ["--budget"])
        #expect(complete("hcpack build --format ") == ["dir", "tar.gz", "zip"])
        #expect(complete("hcpack completions ") == ["bash", "fish", "zsh"])
    }

    @Test("An unknown shell is a usage error")
    func unknownShell() {
        let result = hcpack(["completions", "tcsh"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("unknown shell 'tcsh'"))
    }

    @Test("The man page renders without groff warnings and documents every command and option")
    func manPage() throws {
        let result = hcpack(["man"])
        #expect(result.status == 0)
        let troff = result.stdout
        #expect(troff.contains(".TH HCPACK 1"))
        #expect(troff.contains(".SH \"EXIT STATUS\""))
        let folder = TemporaryFolder()
        let path = folder.write("hcpack.1", troff)
        let groff = run("groff", ["--version"])
        try #require(groff.status == 0, "groff is missing: run make deps (groff-base) (\(groff.output))")
        let rendered = run("/bin/sh", ["-c", "groff -man -Tutf8 -ww '\(path)' 2>'\(path).err' | col -bx"])
        #expect(rendered.status == 0)
        #expect(String(decoding: folder.read("hcpack.1.err") ?? [], as: UTF8.self).isEmpty, "groff warned")
        let text = rendered.output
        for spec in HCPack.specs {
            #expect(text.contains(spec.usage), "man page lacks \(spec.usage)")
            for option in spec.options {
                #expect(text.contains("--\(option.name)"), "man page lacks \(spec.name) --\(option.name)")
            }
        }
    }

    @Test("make install puts the completions and the man page where the shells and man look (dry run)")
    func makeInstallTargets() {
        let result = run("make", ["-n", "-C", Self.root, "install", "PREFIX=/opt/hc", "BIN_DIR=/bin-dir", "SWIFT=true"])
        #expect(result.status == 0, "\(result.output)")
        for destination in [
            "/opt/hc/share/bash-completion/completions/hcpack", "/opt/hc/share/zsh/site-functions/_hcpack",
            "/opt/hc/share/fish/vendor_completions.d/hcpack.fish", "/opt/hc/share/man/man1/hcpack.1",
        ] {
            #expect(result.output.contains(destination), "make install does not write \(destination)")
        }
        #expect(result.output.contains("/bin-dir/hcpack\" completions bash"))
        #expect(result.output.contains("/bin-dir/hcpack\" man"))
    }
}
