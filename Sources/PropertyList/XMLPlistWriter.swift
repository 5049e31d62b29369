/// Writes Apple's XML property list layout: declaration, DOCTYPE, `<plist version="1.0">`, tab indentation
/// (or none: `indented` false).
///
/// Two passes over the value: the first counts the bytes, the second writes them into a buffer of exactly
/// that size. (Grown by doubling, the buffer for an 8 MB plist peaked at 24 MB while it was copied.)
struct XMLPlistWriter {
    /// The UTF-8 output so far.
    private(set) var bytes: [UInt8] = []
    /// True during the counting pass: `append` adds to `count` instead of `bytes`.
    private var counting = false
    private var count = 0
    /// Tabs before each line by depth, as Apple's writer does; false: none (smaller where no one reads it).
    var indented = true

    mutating func writeDocument(_ value: PlistValue) {
        counting = true
        count = 0
        writeWhole(value)
        counting = false
        bytes.reserveCapacity(bytes.count + count)
        writeWhole(value)
    }

    private mutating func writeWhole(_ value: PlistValue) {
        append("""
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">

            """)
        write(value, indent: 0)
        append("</plist>\n")
    }

    private mutating func write(_ value: PlistValue, indent: Int) {
        appendTabs(indent)
        switch value {
        case .string(let string):
            append("<string>")
            appendEscaped(string)
            append("</string>\n")
        case .integer(let integer):
            append("<integer>")
            append(String(integer))
            append("</integer>\n")
        case .real(let real):
            append("<real>")
            append(Self.format(real))
            append("</real>\n")
        case .boolean(let flag):
            append(flag ? "<true/>\n" : "<false/>\n")
        case .date(let date):
            append("<date>")
            append(PlistDate.format(date))
            append("</date>\n")
        case .data(let data):
            append("<data>")
            append(Base64.encode(data))
            append("</data>\n")
        case .array(let values):
            guard !values.isEmpty else { return append("<array/>\n") }
            append("<array>\n")
            for element in values { write(element, indent: indent + 1) }
            appendTabs(indent)
            append("</array>\n")
        case .dictionary(let dictionary):
            guard !dictionary.entries.isEmpty else { return append("<dict/>\n") }
            append("<dict>\n")
            for entry in dictionary.entries {
                appendTabs(indent + 1)
                append("<key>")
                appendEscaped(entry.key)
                append("</key>\n")
                write(entry.value, indent: indent + 1)
            }
            appendTabs(indent)
            append("</dict>\n")
        }
    }

    private mutating func append(_ text: String) {
        if counting {
            count += text.utf8.count
        } else {
            bytes.append(contentsOf: text.utf8)
        }
    }

    private mutating func appendTabs(_ indent: Int) {
        guard indented else { return }
        if counting {
            count += indent
        } else {
            for _ in 0..<indent { bytes.append(0x09) }
        }
    }

    private mutating func appendEscaped(_ text: String) {
        append(Self.escape(text))
    }

    /// Escapes markup characters; CR becomes `&#13;` because XML parsers turn a raw CR (or CRLF) into LF.
    static func escape(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x0D }) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\r": out += "&#13;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Integral values as Apple writes them (`3`), others in Swift's shortest round-tripping form.
    static func format(_ real: Double) -> String {
        if real.isNaN { return "nan" }
        if real.isInfinite { return real < 0 ? "-infinity" : "+infinity" }
        if real == real.rounded(), abs(real) < 1e15, !(real == 0 && real.sign == .minus) {
            return "\(Int64(real))"
        }
        return "\(real)"
    }
}
