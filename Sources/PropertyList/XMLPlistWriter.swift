/// Writes Apple's XML property list layout: declaration, DOCTYPE, `<plist version="1.0">`, tab indentation.
struct XMLPlistWriter {
    /// The UTF-8 output so far.
    private(set) var bytes: [UInt8] = []

    mutating func writeDocument(_ value: PlistValue) {
        append("""
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">

            """)
        write(value, indent: 0)
        append("</plist>\n")
    }

    private mutating func write(_ value: PlistValue, indent: Int) {
        let tabs = String(repeating: "\t", count: indent)
        switch value {
        case .string(let string):
            append("\(tabs)<string>\(Self.escape(string))</string>\n")
        case .integer(let integer):
            append("\(tabs)<integer>\(integer)</integer>\n")
        case .real(let real):
            append("\(tabs)<real>\(Self.format(real))</real>\n")
        case .boolean(let flag):
            append(flag ? "\(tabs)<true/>\n" : "\(tabs)<false/>\n")
        case .date(let date):
            append("\(tabs)<date>\(PlistDate.format(date))</date>\n")
        case .data(let data):
            append("\(tabs)<data>\(Base64.encode(data))</data>\n")
        case .array(let values):
            guard !values.isEmpty else { return append("\(tabs)<array/>\n") }
            append("\(tabs)<array>\n")
            for element in values { write(element, indent: indent + 1) }
            append("\(tabs)</array>\n")
        case .dictionary(let dictionary):
            guard !dictionary.entries.isEmpty else { return append("\(tabs)<dict/>\n") }
            append("\(tabs)<dict>\n")
            for entry in dictionary.entries {
                append("\(tabs)\t<key>\(Self.escape(entry.key))</key>\n")
                write(entry.value, indent: indent + 1)
            }
            append("\(tabs)</dict>\n")
        }
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
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
