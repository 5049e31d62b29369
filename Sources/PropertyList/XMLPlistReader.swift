internal import CLibXML2
import Foundation

/// Process-wide libxml2 setup, done once: `xmlInitParser` and an external entity loader that refuses everything.
private enum LibXML2Setup {
    /// Touching this runs the setup exactly once (Swift initialises static lets lazily and thread-safely).
    static let ready: Void = {
        xmlInitParser()
        // Even with XML_PARSE_NONET, libxml2 would open file:// URLs; no plist ever needs an external resource.
        xmlSetExternalEntityLoader { _, _, _ in nil }
    }()
}

/// State shared with the SAX hooks of one parse, reached through `ctxt->_private`.
private final class ParseGuard {
    /// Why the hooks stopped the parser, if they did.
    var refusal: PlistError?
    /// libxml2's first error: later ones are usually knock-on effects ("premature end of data").
    /// Copied out at once: libxml2 frees the message when the next error arrives.
    var firstError: LibXMLError?
    /// Deepest element nesting allowed before the parser is stopped.
    let maxElementDepth: Int32
    /// libxml2's own SAX2 handlers, which the hooks call after their checks.
    var defaultInternalSubset: internalSubsetSAXFunc?
    var defaultStartElementNs: startElementNsSAX2Func?

    init(maxElementDepth: Int32) {
        self.maxElementDepth = maxElementDepth
    }

    /// The guard installed on a parser context, if any.
    static func of(_ context: UnsafeMutableRawPointer?) -> (xmlParserCtxtPtr, ParseGuard)? {
        guard let context else { return nil }
        let ctxt = context.assumingMemoryBound(to: xmlParserCtxt.self)
        guard let raw = ctxt.pointee._private else { return nil }
        return (ctxt, Unmanaged<ParseGuard>.fromOpaque(raw).takeUnretainedValue())
    }

    /// Records the first refusal and stops the parser, so hostile documents are cut off at the first sign.
    static func refuse(_ context: UnsafeMutableRawPointer?, _ error: PlistError) {
        guard let context else { return }
        let ctxt = context.assumingMemoryBound(to: xmlParserCtxt.self)
        if let (_, state) = of(context), state.refusal == nil {
            var error = error
            error.line = error.line ?? Int(currentLine(ctxt))
            state.refusal = error
        }
        xmlStopParser(ctxt)
    }
}

/// The parts of an `xmlError` we report, copied into Swift values.
private struct LibXMLError {
    var code: Int32
    var message: String
    var line: Int32
    var int2: Int32

    init(_ error: xmlError) {
        code = error.code
        message = error.message.map { String(cString: $0) } ?? "malformed XML"
        line = error.line
        int2 = error.int2
    }
}

/// libxml2's current line, or nil when no input is open.
private func currentLine(_ ctxt: xmlParserCtxtPtr) -> Int32 {
    guard let input = ctxt.pointee.input else { return 0 }
    return input.pointee.line
}

/// Reads XML property lists with libxml2, treating the input as hostile.
struct XMLPlistReader {
    let limits: PlistLimits
    /// Values seen so far, against `limits.maxObjects`.
    private var objectCount = 0
    /// Lines removed in front of the document (leading blanks before `<?xml`), added back to every line number.
    private var lineOffset = 0

    init(limits: PlistLimits) {
        self.limits = limits
    }

    /// Parses `bytes` into a tree, checks it, then walks it as a plist.
    mutating func decode(_ bytes: [UInt8]) throws(PlistError) -> PlistValue {
        _ = LibXML2Setup.ready
        let start = documentStart(bytes)
        guard bytes.count - start <= Int(Int32.max) else {
            throw PlistError(.limit, "XML document too large for libxml2")
        }
        guard let ctxt = xmlNewParserCtxt() else {
            throw PlistError(.syntax, "libxml2 could not create a parser context")
        }
        defer { xmlFreeParserCtxt(ctxt) }

        // One element level for <plist> and one for a leaf inside the deepest container.
        let state = ParseGuard(maxElementDepth: Int32(clamping: min(limits.maxDepth, Int(Int32.max) - 2) + 2))
        let unmanaged = Unmanaged.passRetained(state)
        defer { unmanaged.release() }
        installHooks(ctxt, state: state, opaque: unmanaged.toOpaque())

        // Never NOENT, DTDLOAD, DTDVALID, XINCLUDE, HUGE or RECOVER: entities stay unexpanded, nothing is fetched.
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue
            | XML_PARSE_NOCDATA.rawValue | XML_PARSE_BIG_LINES.rawValue)
        let document: xmlDocPtr? = bytes.withUnsafeBufferPointer { buffer in
            let base = buffer.baseAddress.map { UnsafeRawPointer($0 + start).assumingMemoryBound(to: CChar.self) }
            return xmlCtxtReadMemory(ctxt, base, Int32(bytes.count - start), nil, nil, options)
        }
        defer { if let document { xmlFreeDoc(document) } }

        if var refusal = state.refusal {
            refusal.line = refusal.line.map { $0 + lineOffset }
            throw refusal
        }
        guard let document, ctxt.pointee.wellFormed != 0 else {
            throw describe(state.firstError ?? LibXMLError(ctxt.pointee.lastError))
        }
        if let subset = document.pointee.intSubset, subset.pointee.children != nil {
            throw PlistError(.forbidden, "DOCTYPE declarations are not allowed in a property list",
                             line: 1 + lineOffset)
        }
        return try readDocument(document)
    }

    /// Skips a UTF-8 BOM and blanks before `<?xml`, which libxml2 refuses; remembers the lines skipped.
    private mutating func documentStart(_ bytes: [UInt8]) -> Int {
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var newlines = 0
        while index < bytes.count, PropertyList.isXMLBlank(bytes[index]) {
            if bytes[index] == 0x0A { newlines += 1 }
            index += 1
        }
        guard bytes[index...].starts(with: Array("<?xml".utf8)) else { return 0 }
        lineOffset = newlines
        return index
    }

    /// Silences libxml2 and adds the checks that must run while parsing, before any damage is done.
    private func installHooks(_ ctxt: xmlParserCtxtPtr, state: ParseGuard, opaque: UnsafeMutableRawPointer) {
        ctxt.pointee._private = opaque
        guard let sax = ctxt.pointee.sax else { return }
        // Errors are read from this context afterwards; nothing goes to stderr.
        sax.pointee.serror = { context, error in
            guard let (_, state) = ParseGuard.of(context), state.firstError == nil, let error else { return }
            state.firstError = LibXMLError(error.pointee)
        }
        state.defaultInternalSubset = sax.pointee.internalSubset
        state.defaultStartElementNs = sax.pointee.startElementNs

        sax.pointee.internalSubset = { context, name, externalID, systemID in
            guard let (ctxt, state) = ParseGuard.of(context) else { return }
            state.defaultInternalSubset?(context, name, externalID, systemID)
            // libxml2 calls this right before `[`, the start of an internal subset, where entities are declared.
            if let cur = ctxt.pointee.input?.pointee.cur, cur.pointee == UInt8(ascii: "[") {
                ParseGuard.refuse(context, PlistError(.forbidden, "DOCTYPE with an internal subset is not allowed"))
            }
        }
        sax.pointee.entityDecl = { context, name, _, _, _, _ in
            let entity = name.map { String(cString: $0) } ?? "?"
            ParseGuard.refuse(context, PlistError(.forbidden, "entity declaration '\(entity)' is not allowed"))
        }
        sax.pointee.unparsedEntityDecl = { context, name, _, _, _ in
            let entity = name.map { String(cString: $0) } ?? "?"
            ParseGuard.refuse(context, PlistError(.forbidden, "entity declaration '\(entity)' is not allowed"))
        }
        sax.pointee.reference = { context, name in
            let entity = name.map { String(cString: $0) } ?? "?"
            ParseGuard.refuse(context, PlistError(.forbidden, "entity reference '&\(entity);' is not allowed"))
        }
        sax.pointee.startElementNs = { context, localname, prefix, uri, nsCount, namespaces, attrCount, defaulted, attributes in
            guard let (ctxt, state) = ParseGuard.of(context) else { return }
            state.defaultStartElementNs?(context, localname, prefix, uri, nsCount, namespaces, attrCount, defaulted, attributes)
            // nodeNr is the depth of the element just opened; stop long before libxml2's own 256.
            if ctxt.pointee.nodeNr > state.maxElementDepth {
                ParseGuard.refuse(context, PlistError(.limit, "nesting deeper than the limit of \(state.maxElementDepth - 2)"))
            }
        }
    }

    /// A libxml2 error with its message, line and column.
    private func describe(_ error: LibXMLError) -> PlistError {
        var message = error.message
        message = message.trimmingCharacters(in: .whitespacesAndNewlines)
        let line = error.line > 0 ? Int(error.line) + lineOffset : nil
        let column = error.int2 > 0 ? Int(error.int2) : nil
        let kind: PlistError.Kind
        switch xmlParserErrors(UInt32(bitPattern: error.code)) {
        case XML_ERR_ENTITY_LOOP, XML_ERR_UNDECLARED_ENTITY, XML_WAR_UNDECLARED_ENTITY, XML_ERR_ENTITY_PE_INTERNAL,
             XML_ERR_EXT_ENTITY_STANDALONE, XML_ERR_ENTITY_BOUNDARY:
            kind = .forbidden
        default:
            kind = message.contains("Excessive depth") ? .limit : .syntax
        }
        return PlistError(kind, "XML: \(message)", line: line, column: column)
    }

    // MARK: - Tree walk

    private mutating func readDocument(_ document: xmlDocPtr) throws(PlistError) -> PlistValue {
        guard let root = xmlDocGetRootElement(document) else {
            throw PlistError(.syntax, "XML document has no root element")
        }
        guard name(root) == "plist", root.pointee.ns == nil else {
            throw syntax(root, "root element is <\(qualifiedName(root))>, expected <plist>")
        }
        let children = try elementChildren(root)
        guard children.count == 1 else {
            throw syntax(root, "<plist> must hold exactly one value, found \(children.count)")
        }
        return try readValue(children[0], depth: 0)
    }

    /// One value element; `depth` is the number of containers around it.
    private mutating func readValue(_ node: xmlNodePtr, depth: Int) throws(PlistError) -> PlistValue {
        objectCount += 1
        guard objectCount <= limits.maxObjects else {
            throw PlistError(.limit, "more than \(limits.maxObjects) values", line: line(node))
        }
        guard node.pointee.ns == nil else {
            throw syntax(node, "unexpected element <\(qualifiedName(node))>")
        }
        switch name(node) {
        case "dict":
            try checkDepth(node, depth)
            return .dictionary(try readDictionary(node, depth: depth + 1))
        case "array":
            try checkDepth(node, depth)
            var values: [PlistValue] = []
            for child in try elementChildren(node) {
                values.append(try readValue(child, depth: depth + 1))
            }
            return .array(values)
        case "string":
            return .string(try text(node))
        case "integer":
            let text = try text(node)
            guard let value = Self.parseInteger(text) else {
                throw syntax(node, "<integer> '\(Self.clip(text))' is not a 64-bit integer")
            }
            return .integer(value)
        case "real":
            let text = try text(node).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let value = Self.parseReal(text) else {
                throw syntax(node, "<real> '\(Self.clip(text))' is not a number")
            }
            return .real(value)
        case "true", "false":
            guard try text(node).allSatisfy({ $0.isWhitespace }) else {
                throw syntax(node, "<\(name(node))/> must be empty")
            }
            return .boolean(name(node) == "true")
        case "date":
            let text = try text(node).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let date = PlistDate.parse(text) else {
                throw syntax(node, "<date> '\(Self.clip(text))' is not an ISO 8601 date like 2026-01-02T03:04:05Z")
            }
            return .date(date)
        case "data":
            let text = try text(node)
            guard let bytes = Base64.decode(text) else {
                throw syntax(node, "<data> is not valid base64")
            }
            return .data(bytes)
        default:
            throw syntax(node, "unexpected element <\(qualifiedName(node))>")
        }
    }

    private func checkDepth(_ node: xmlNodePtr, _ depth: Int) throws(PlistError) {
        guard depth < limits.maxDepth else {
            throw PlistError(.limit, "nesting deeper than the limit of \(limits.maxDepth)", line: line(node))
        }
    }

    private mutating func readDictionary(_ node: xmlNodePtr, depth: Int) throws(PlistError) -> PlistDictionary {
        let children = try elementChildren(node)
        var entries: [PlistDictionary.Entry] = []
        var seen = Set<String>()
        var index = 0
        while index < children.count {
            let keyNode = children[index]
            guard name(keyNode) == "key", keyNode.pointee.ns == nil else {
                throw syntax(keyNode, "expected <key> in <dict>, found <\(qualifiedName(keyNode))>")
            }
            objectCount += 1
            guard objectCount <= limits.maxObjects else {
                throw PlistError(.limit, "more than \(limits.maxObjects) values", line: line(keyNode))
            }
            let key = try text(keyNode)
            guard index + 1 < children.count else {
                throw syntax(keyNode, "<key>\(Self.clip(key))</key> has no value")
            }
            guard seen.insert(key).inserted else {
                throw PlistError(.duplicateKey, "duplicate key '\(Self.clip(key))' in <dict>", line: line(keyNode))
            }
            let value = try readValue(children[index + 1], depth: depth)
            entries.append(PlistDictionary.Entry(key: key, value: value))
            index += 2
        }
        return PlistDictionary(entries)
    }

    /// The element children of a container; blank text, comments and processing instructions are skipped.
    private func elementChildren(_ node: xmlNodePtr) throws(PlistError) -> [xmlNodePtr] {
        var result: [xmlNodePtr] = []
        var child = node.pointee.children
        while let current = child {
            switch current.pointee.type {
            case XML_ELEMENT_NODE:
                result.append(current)
            case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                if !isBlank(current.pointee.content) {
                    throw syntax(current, "unexpected text inside <\(name(node))>")
                }
            case XML_COMMENT_NODE, XML_PI_NODE:
                break
            case XML_ENTITY_REF_NODE:
                throw forbiddenReference(current)
            default:
                throw syntax(current, "unexpected node inside <\(name(node))>")
            }
            child = current.pointee.next
        }
        return result
    }

    /// The text of a leaf element; character references like `&amp;` were already resolved by the parser.
    private func text(_ node: xmlNodePtr) throws(PlistError) -> String {
        var bytes: [UInt8] = []
        var child = node.pointee.children
        while let current = child {
            switch current.pointee.type {
            case XML_TEXT_NODE, XML_CDATA_SECTION_NODE:
                if let content = current.pointee.content {
                    bytes.append(contentsOf: UnsafeBufferPointer(start: content, count: strlen(content)))
                }
            case XML_COMMENT_NODE, XML_PI_NODE:
                break
            case XML_ENTITY_REF_NODE:
                throw forbiddenReference(current)
            case XML_ELEMENT_NODE:
                throw syntax(current, "unexpected element <\(qualifiedName(current))> inside <\(name(node))>")
            default:
                throw syntax(current, "unexpected node inside <\(name(node))>")
            }
            child = current.pointee.next
        }
        // libxml2 hands out UTF-8 whatever the input encoding was.
        return String(decoding: bytes, as: UTF8.self)
    }

    private func isBlank(_ content: UnsafeMutablePointer<xmlChar>?) -> Bool {
        guard var cursor = content.map({ UnsafePointer($0) }) else { return true }
        while cursor.pointee != 0 {
            if !PropertyList.isXMLBlank(cursor.pointee) { return false }
            cursor += 1
        }
        return true
    }

    private func forbiddenReference(_ node: xmlNodePtr) -> PlistError {
        let entity = node.pointee.name.map { String(cString: $0) } ?? "?"
        return PlistError(.forbidden, "entity reference '&\(entity);' is not allowed", line: line(node))
    }

    private func name(_ node: xmlNodePtr) -> String {
        node.pointee.name.map { String(cString: $0) } ?? ""
    }

    private func qualifiedName(_ node: xmlNodePtr) -> String {
        if let prefix = node.pointee.ns?.pointee.prefix {
            return String(cString: prefix) + ":" + name(node)
        }
        return name(node)
    }

    private func line(_ node: xmlNodePtr) -> Int? {
        let line = xmlGetLineNo(node)
        return line > 0 ? Int(line) + lineOffset : nil
    }

    /// An element-level error: libxml2 keeps a line per node but no column.
    private func syntax(_ node: xmlNodePtr, _ message: String) -> PlistError {
        PlistError(.syntax, message, line: line(node))
    }

    /// Keeps hostile text short in messages.
    static func clip(_ text: String) -> String {
        text.count > 40 ? String(text.prefix(40)) + "..." : text
    }

    // MARK: - Scalars

    /// Decimal or `0x` hexadecimal, with an optional sign and surrounding blanks; nil on overflow or junk.
    static func parseInteger(_ text: String) -> Int64? {
        var digits = Substring(text.trimmingCharacters(in: .whitespacesAndNewlines))
        var negative = false
        if let sign = digits.first, sign == "-" || sign == "+" {
            negative = sign == "-"
            digits = digits.dropFirst()
        }
        var radix = 10
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            radix = 16
            digits = digits.dropFirst(2)
        }
        // UInt64 refuses signs, so "--1" or "0x-1" fail here.
        guard !digits.isEmpty, let magnitude = UInt64(digits, radix: radix) else { return nil }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    /// A decimal number, or Apple's spellings of the specials (`nan`, `inf`, `+infinity`, `-infinity`).
    static func parseReal(_ text: String) -> Double? {
        switch text.lowercased() {
        case "nan", "+nan", "-nan": return .nan
        case "inf", "+inf", "infinity", "+infinity": return .infinity
        case "-inf", "-infinity": return -.infinity
        default: break
        }
        // Double(String) also takes "nan(...)" and hex floats; keep to plain decimal notation.
        guard !text.isEmpty, text.allSatisfy({ "0123456789+-.eE".contains($0) }) else { return nil }
        return Double(text)
    }
}
