import Foundation
import TestSupport
import Testing

/// Runs every hcpack command line that README.md and docs/ show, with the built binary, so that the docs
/// cannot drift from it: a `sh` block's `hcpack ...` lines must all succeed, in order, in one folder per
/// document; a `$ hcpack ...` line must print exactly the lines shown under it (the folder's path shown as
/// `/path`). What the commands need (packages, archives, a destination) is made by `setups`, with hcpack.
/// A document whose commands need something not made here fails, so a new example gets a setup.
@Suite("Every command line in README.md and docs/ runs, and prints what the docs show")
struct DocumentedCommandsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static var documents: [String] {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: root + "/docs")) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    /// Shell functions the setups share: `pkg FOLDER PRODUCT VERSION` makes a package folder.
    static let prelude = #"""
        set -euo pipefail
        pkg() {
            mkdir -p "$1/Contents/levels"
            printf '{"level": 1}\n' > "$1/Contents/levels/1.json"
            printf '{"level": 2, "version": "%s"}\n' "$3" > "$1/Contents/levels/2.json"
            printf '<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict><key>IAPProductIdentifier</key><string>%s</string><key>ContentVersion</key><string>%s</string></dict></plist>\n' "$2" "$3" > "$1/ContentInfo.plist"
        }

        """#

    /// What each document's commands expect to find in their folder.
    static let setups: [String: String] = [
        // An archive zipped by hand, with a missing listed file and junk (README's example).
        "README.md": #"""
            mkdir -p L/Contents/levels
            head -c 2560 /dev/zero | tr '\0' a > L/Contents/levels/1.json
            head -c 2560 /dev/zero | tr '\0' b > L/Contents/levels/2.json
            : > L/Contents/.DS_Store
            printf '<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.levels</string><key>ContentVersion</key><string>1.0</string><key>Files</key><array><string>levels/1.json</string><string>levels/2.json</string><string>levels/3.json</string></array></dict></plist>\n' > L/ContentInfo.plist
            (cd L && zip -qrX ../Levels.zip ContentInfo.plist Contents)
            """#,
        // 2105 files, one of them 85,000,000 bytes (sparse), against the budget the document shows.
        "docs/budgets.md": #"""
            mkdir -p Levels/Contents/levels
            truncate -s 85000000 Levels/Contents/video.mov
            files="<string>video.mov</string>"
            for i in $(seq 1 2104); do : > "Levels/Contents/levels/$i.json"; files="$files<string>levels/$i.json</string>"; done
            printf '<?xml version="1.0" encoding="UTF-8"?>\n<plist version="1.0"><dict><key>IAPProductIdentifier</key><string>com.example.levels</string><key>ContentVersion</key><string>1.0</string><key>Files</key><array>%s</array></dict></plist>\n' "$files" > Levels/ContentInfo.plist
            printf '{\n  "maxTotalBytes": 500000000,\n  "maxFileBytes": 100000000,\n  "maxFiles": 2000\n}\n' > budget.json
            """#,
        // A release tarball (any bytes: only its note is checked) signed with a key made here.
        "docs/install.md": #"""
            printf 'not really a tarball\n' > hcpack-0.1.0-linux-x86_64.tar.gz
            hcpack keygen --name example.com/hcpack-release -o hcpack-release.key >/dev/null 2>&1
            mv hcpack-release.key.pub hcpack-release.pub
            hcpack sign-file hcpack-0.1.0-linux-x86_64.tar.gz --key hcpack-release.key >/dev/null
            """#,
        "docs/self-hosting.md": #"""
            pkg src-1.0 com.example.levels 1.0 && pkg src-1.1 com.example.levels 1.1 && pkg src-art com.example.art 2.0
            hcpack build src-1.0 -o levels-1.0.zip -q && hcpack build src-1.1 -o levels-1.1.zip -q
            hcpack build src-art -o art-2.0.zip -q
            hcpack keygen --name example.com/levels -o levels.key >/dev/null 2>&1
            mkdir DIR && hcpack install levels-1.0.zip --dest DIR -q
            """#,
        "docs/signing.md": #"""
            pkg package com.example.levels 1.2
            mkdir DIR
            """#,
        "docs/transporter.md": #"""
            pkg src com.example.levels 1.0 && hcpack build src -o Levels.zip -q
            """#,
    ]

    /// A fenced code block: its info string and its lines.
    struct Block {
        var language: String
        var firstLine: Int
        var lines: [String]
    }

    static func blocks(_ text: String) -> [Block] {
        var blocks: [Block] = []
        var current: Block?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") {
                if let block = current {
                    blocks.append(block)
                    current = nil
                } else {
                    current = Block(language: String(line.dropFirst(3)), firstLine: index + 2, lines: [])
                }
            } else {
                current?.lines.append(String(line))
            }
        }
        return blocks
    }

    /// A `sh` block's hcpack command lines (continuations joined, trailing comments dropped).
    static func scriptCommands(_ block: Block) -> [String] {
        guard block.language == "sh" else { return [] }
        var commands: [String] = []
        var pending = ""
        for line in block.lines {
            var text = pending + line.trimmingCharacters(in: .whitespaces)
            if text.hasSuffix("\\") {
                pending = String(text.dropLast()) + " "
                continue
            }
            pending = ""
            if let comment = text.range(of: "  #") { text = String(text[..<comment.lowerBound]) }
            text = text.trimmingCharacters(in: .whitespaces)
            // A fetch from a URL needs a network (the fetch tests serve catalogs from loopback servers instead).
            if text.hasPrefix("hcpack ") && !Self.needsNetwork(text) { commands.append(text) }
        }
        return commands
    }

    /// Whether a command line reaches a server: `hcpack fetch` of an http(s) URL.
    static func needsNetwork(_ command: String) -> Bool {
        command.hasPrefix("hcpack fetch http://") || command.hasPrefix("hcpack fetch https://")
    }

    /// Each `$ hcpack ...` line of a block and the lines shown after it.
    static func promptCommands(_ block: Block) -> [(command: String, output: [String])] {
        var result: [(String, [String])] = []
        for line in block.lines {
            if line.hasPrefix("$ ") {
                result.append((String(line.dropFirst(2)), []))
            } else if !result.isEmpty {
                result[result.count - 1].1.append(line)
            }
        }
        return result.filter { $0.0.hasPrefix("hcpack ") && !needsNetwork($0.0) }
    }

    /// Runs `script` in bash in `folder`, with the built hcpack first on PATH.
    static func bash(_ script: String, in folder: String) -> (status: Int32, output: String) {
        let binary = (hcpackBinary() as NSString).deletingLastPathComponent
        let environment = "export PATH='\(binary)':\"$PATH\" HCPACK_TEMPLATES='\(root)/Templates'; unset SOURCE_DATE_EPOCH\n"
        return run("bash", ["-c", environment + prelude + script], in: folder)
    }

    @Test("The documents show commands to run", arguments: [0])
    func found(_: Int) throws {
        var scripts = 0, prompts = 0
        for document in Self.documents {
            let text = try String(contentsOfFile: Self.root + "/" + document, encoding: .utf8)
            for block in Self.blocks(text) {
                scripts += Self.scriptCommands(block).count
                prompts += Self.promptCommands(block).count
            }
        }
        #expect(scripts >= 8 && prompts >= 2, "\(scripts) sh commands, \(prompts) $ commands")
    }

    @Test("Each document's commands succeed and print what is shown", arguments: documents)
    func document(_ document: String) throws {
        let text = try String(contentsOfFile: Self.root + "/" + document, encoding: .utf8)
        let blocks = Self.blocks(text)
        let runnable = blocks.filter { !Self.scriptCommands($0).isEmpty || !Self.promptCommands($0).isEmpty }
        guard !runnable.isEmpty else { return }
        let folder = TemporaryFolder()
        if let setup = Self.setups[document] {
            let prepared = Self.bash(setup, in: folder.path)
            try #require(prepared.status == 0, "\(document): setup failed: \(prepared.output)")
        }
        for block in runnable {
            for command in Self.scriptCommands(block) {
                let result = Self.bash(command, in: folder.path)
                #expect(result.status == 0, "\(document):\(block.firstLine): `\(command)` failed (\(result.status)): \(result.output)")
            }
            for (command, shown) in Self.promptCommands(block) {
                let result = Self.bash(command, in: folder.path)
                let shownPath = URL(fileURLWithPath: folder.path).standardizedFileURL.path  // mkdtemp's "//" folded
                let printed = result.output.replacingOccurrences(of: shownPath, with: "/path")
                    .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                let expected = shown.last == "" ? shown : shown + [""]
                #expect(printed == expected, "\(document):\(block.firstLine): `\(command)` printed:\n\(printed.joined(separator: "\n"))")
            }
        }
    }
}
