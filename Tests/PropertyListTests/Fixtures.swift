import Foundation
@testable import PropertyList

/// Shared inputs: a realistic ContentInfo.plist as text and as the value it must decode to.
enum Fixtures {
    static let contentInfoXML = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
        \t<key>IAPProductIdentifier</key>
        \t<string>com.example.game.level_pack_1</string>
        \t<key>ContentVersion</key>
        \t<string>1.2.3</string>
        \t<key>Files</key>
        \t<array>
        \t\t<string>Contents/levels/1.json</string>
        \t\t<string>Contents/art &amp; sound/intro.m4a</string>
        \t</array>
        \t<key>XVendorExtras</key>
        \t<dict>
        \t\t<key>Build</key>
        \t\t<integer>42</integer>
        \t\t<key>Signed</key>
        \t\t<true/>
        \t</dict>
        </dict>
        </plist>

        """

    static let contentInfo: PlistValue = .dictionary(PlistDictionary([
        .init(key: "IAPProductIdentifier", value: .string("com.example.game.level_pack_1")),
        .init(key: "ContentVersion", value: .string("1.2.3")),
        .init(key: "Files", value: .array([
            .string("Contents/levels/1.json"), .string("Contents/art & sound/intro.m4a"),
        ])),
        .init(key: "XVendorExtras", value: .dictionary(PlistDictionary([
            .init(key: "Build", value: .integer(42)),
            .init(key: "Signed", value: .boolean(true)),
        ]))),
    ]))

    /// The same ContentInfo, as a binary plist built by hand (keys in the same order).
    static var contentInfoBinary: [UInt8] {
        typealias B = BinaryPlistBuilder
        var b = B()
        let root = b.add([])  // patched below, once the references exist
        let k1 = b.add(B.ascii("IAPProductIdentifier")), v1 = b.add(B.ascii("com.example.game.level_pack_1"))
        let k2 = b.add(B.ascii("ContentVersion")), v2 = b.add(B.ascii("1.2.3"))
        let k3 = b.add(B.ascii("Files"))
        let f1 = b.add(B.ascii("Contents/levels/1.json")), f2 = b.add(B.ascii("Contents/art & sound/intro.m4a"))
        let v3 = b.add(b.array([f1, f2]))
        let k4 = b.add(B.ascii("XVendorExtras"))
        let kb = b.add(B.ascii("Build")), vb = b.add([0x10, 42])
        let ks = b.add(B.ascii("Signed")), vs = b.add(B.true)
        let v4 = b.add(b.dict([kb, ks], [vb, vs]))
        b.objects[root] = b.dict([k1, k2, k3, k4], [v1, v2, v3, v4])
        return b.bytes(top: root)
    }

    static func utf8(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Wraps a value fragment in the standard header and `<plist>`.
    static func plist(_ body: String) -> [UInt8] {
        utf8("""
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            \(body)
            </plist>
            """)
    }

    /// Runs `decode` and returns its error, or nil when it succeeded.
    static func error(_ bytes: [UInt8], limits: PlistLimits = PlistLimits()) -> PlistError? {
        do {
            _ = try PropertyList.decode(bytes, limits: limits)
            return nil
        } catch {
            return error
        }
    }
}
