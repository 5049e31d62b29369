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

/// The elements a plist is made of.
private enum PlistElement: String {
    case plist, array, dict, key, string, integer, real, `true`, `false`, date, data

    /// Names as C strings, most frequent first.
    private static let names: [(PlistElement, StaticString)] = [
        (.string, "string"), (.key, "key"), (.dict, "dict"), (.integer, "integer"), (.array, "array"), (.true, "true"),
        (.false, "false"), (.real, "real"), (.date, "date"), (.data, "data"), (.plist, "plist"),
    ]

    /// The element with this local name, compared as bytes: no String is made for every element.
    init?(_ name: UnsafePointer<xmlChar>) {
        let length = strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))
        let match = Self.names.first { _, candidate in
            length == candidate.utf8CodeUnitCount && memcmp(name, candidate.utf8Start, length) == 0
        }
        guard let (element, _) = match else { return nil }
        self = element
    }

    /// Elements whose content is text rather than other elements.
    var holdsText: Bool {
        switch self {
        case .plist, .array, .dict: false
        default: true
        }
    }
}

/// One open element on the builder's stack.
private struct Frame {
    let element: PlistElement
    /// Line of the start tag (libxml2's line once it has read the `>`), for errors about this element.
    let line: Int
    /// An array's items so far, or the value of `<plist>`.
    var items: [PlistValue] = []
    /// A dictionary's entries so far.
    var entries = PlistDictionary()
    /// A `<key>` of this dictionary still waiting for its value, with the key's line, and its hash once
    /// looked up in a dictionary that hashes keys (`PlistDictionary.append(absentKey:_:hash:)`).
    var pendingKey: (key: String, line: Int, hash: UInt32?)?
    /// Values finished inside this element (kept in `items` or `entries` only when building).
    var childCount = 0

    init(_ element: PlistElement, line: Int) {
        self.element = element
        self.line = line
    }
}

/// Builds a `PlistValue` from libxml2's SAX2 callbacks of one parse.
///
/// No tree is kept: each value is built when its end tag arrives and moved into its container, so memory is the
/// value decoded so far plus one frame per open element. Limits and forbidden constructs stop the parser at the
/// element that breaks them. Other plist errors are kept while the rest is only parsed, so that libxml2's
/// well-formedness errors still come first, as they did when a finished tree was walked.
///
/// A struct inside `ParseState`: each callback is then one exclusive access, not one per property touched.
private struct PlistBuilder {
    /// What the builder does with the elements that follow.
    enum Mode {
        /// Building the value.
        case building
        /// `<plist>` met a second value: its children are only counted, for the message.
        case counting(values: Int, depth: Int, line: Int)
        /// A plist error is pending: nothing more is built or checked.
        case skipping
    }

    let ctxt: xmlParserCtxtPtr
    let limits: PlistLimits
    /// False when the caller only wants the verdict: values are checked, then dropped, so memory stays flat.
    let keepsValues: Bool
    /// Lines removed in front of the document (blanks before `<?xml`), added back to every line number.
    let lineOffset: Int

    var mode = Mode.building
    /// Open elements, `<plist>` first.
    var frames: [Frame] = []
    /// Text of the open leaf or key: libxml2 splits it across `characters` calls (at entities, CDATA, comments).
    var text: [UInt8] = []
    /// Where the current run of text between elements began; a DOM text node had the line of its first chunk.
    var textLine: Int?
    /// Depth of the open element, `<plist>` being 1, whatever the mode.
    var elementDepth = 0
    /// Values seen so far (keys included), against `limits.maxObjects`.
    var objectCount = 0
    /// The decoded document, once `</plist>` has closed with exactly one value.
    var result: PlistValue?
    /// The first plist error, reported unless libxml2 finds the document malformed.
    var pending: PlistError?
    /// Why a limit or guard stopped the parser; it wins over everything else.
    var failure: PlistError?

    init(ctxt: xmlParserCtxtPtr, limits: PlistLimits, lineOffset: Int, keepsValues: Bool) {
        self.ctxt = ctxt
        self.limits = limits
        self.keepsValues = keepsValues
        self.lineOffset = lineOffset
    }

    /// libxml2's current line in the file.
    var line: Int {
        Int(ctxt.pointee.input?.pointee.line ?? 0) + lineOffset
    }

    /// Records the first failure, drops what was built and stops the parser: no callback follows.
    mutating func fail(_ error: PlistError) {
        if failure == nil {
            var error = error
            error.line = error.line ?? line
            failure = error
        }
        frames = []
        mode = .skipping
        xmlStopParser(ctxt)
    }

    /// Records a plist error and drops what was built; parsing goes on, building does not.
    mutating func reject(_ error: PlistError) {
        if pending == nil { pending = error }
        frames = []
        mode = .skipping
    }

    mutating func reject(_ message: String, line: Int, kind: PlistError.Kind = .syntax) {
        reject(PlistError(kind, message, line: line))
    }

    /// A declaration that only a DTD can hold.
    mutating func refuseDeclaration() {
        fail(PlistError(.forbidden, "DOCTYPE declarations are not allowed in a property list"))
    }

    // MARK: - Callbacks

    mutating func startElement(localname: UnsafePointer<xmlChar>?, prefix: UnsafePointer<xmlChar>?,
                               uri: UnsafePointer<xmlChar>?) {
        elementDepth += 1
        textLine = nil
        // Whatever the mode: even elements that are no plist value are not nested without end.
        guard elementDepth - 2 <= limits.maxDepth else {
            return fail(PlistError(.limit, "nesting deeper than the limit of \(limits.maxDepth)"))
        }
        switch mode {
        case .skipping:
            return
        case .counting(let values, let depth, let line):
            mode = .counting(values: depth == 0 ? values + 1 : values, depth: depth + 1, line: line)
            return
        case .building:
            break
        }
        // An unbound prefix comes with no URI; either way the element is not a plist element.
        let element = uri == nil && prefix == nil ? localname.flatMap(PlistElement.init) : nil
        let line = self.line
        var qualified: String {
            let name = localname.map { String(cString: $0) } ?? ""
            return prefix.map { String(cString: $0) + ":" + name } ?? name
        }

        guard let top = frames.indices.last else {
            guard element == .plist else {
                return reject("root element is <\(qualified)>, expected <plist>", line: line)
            }
            frames.append(Frame(.plist, line: line))
            return
        }
        switch frames[top].element {
        case .plist:
            if frames[top].childCount > 0 {
                mode = .counting(values: 2, depth: 1, line: frames[top].line)
                frames = []
                return
            }
            beginValue(element, qualified, line: line)
        case .array:
            beginValue(element, qualified, line: line)
        case .dict:
            guard let pending = frames[top].pendingKey else {
                guard element == .key else {
                    return reject("expected <key> in <dict>, found <\(qualified)>", line: line)
                }
                guard countObject(line: line) else { return }
                text.removeAll(keepingCapacity: true)
                frames.append(Frame(.key, line: line))
                return
            }
            // The key is hashed once, for this lookup and for the append in `add`.
            let hash = frames[top].entries.hashesKeys ? PositionIndex.stringHash(pending.key) : nil
            guard frames[top].entries.position(of: pending.key, hash: hash) == nil else {
                return reject("duplicate key '\(XMLPlistReader.clip(pending.key))' in <dict>", line: pending.line,
                              kind: .duplicateKey)
            }
            frames[top].pendingKey?.hash = hash
            beginValue(element, qualified, line: line)
        case let leaf:
            reject("unexpected element <\(qualified)> inside <\(leaf.rawValue)>", line: line)
        }
    }

    /// Opens a value inside `<plist>`, an array or a dictionary.
    private mutating func beginValue(_ element: PlistElement?, _ qualified: @autoclosure () -> String, line: Int) {
        guard countObject(line: line) else { return }
        guard let element, element != .plist, element != .key else {
            return reject("unexpected element <\(qualified())>", line: line)
        }
        if element.holdsText {
            text.removeAll(keepingCapacity: true)
        } else {
            // Containers around this one; frames[0] is <plist>.
            guard frames.count - 1 < limits.maxDepth else {
                return fail(PlistError(.limit, "nesting deeper than the limit of \(limits.maxDepth)", line: line))
            }
        }
        frames.append(Frame(element, line: line))
    }

    private mutating func countObject(line: Int) -> Bool {
        objectCount += 1
        guard objectCount <= limits.maxObjects else {
            fail(PlistError(.limit, "more than \(limits.maxObjects) values", line: line))
            return false
        }
        return true
    }

    mutating func endElement() {
        elementDepth -= 1
        textLine = nil
        switch mode {
        case .skipping:
            return
        case .counting(let values, let depth, let line):
            guard depth > 0 else {
                return reject("<plist> must hold exactly one value, found \(values)", line: line)
            }
            mode = .counting(values: values, depth: depth - 1, line: line)
            return
        case .building:
            break
        }
        guard let frame = frames.popLast() else { return }
        switch frame.element {
        case .plist:
            guard frame.childCount > 0 else {
                return reject("<plist> must hold exactly one value, found 0", line: frame.line)
            }
            result = frame.items.first ?? .boolean(true)
        case .array:
            add(.array(frame.items))
        case .dict:
            if let pending = frame.pendingKey {
                return reject("<key>\(XMLPlistReader.clip(pending.key))</key> has no value", line: pending.line)
            }
            add(.dictionary(frame.entries))
        case .key:
            frames[frames.count - 1].pendingKey = (String(decoding: text, as: UTF8.self), frame.line, nil)
        case let leaf:
            do throws(PlistError) {
                add(try XMLPlistReader.scalar(leaf, text: text, line: frame.line))
            } catch {
                reject(error)
            }
        }
    }

    /// Moves a finished value into the open container (or, when only checking, counts it there).
    private mutating func add(_ value: PlistValue) {
        let top = frames.count - 1
        frames[top].childCount += 1
        if let pending = frames[top].pendingKey {
            // startElement found the key absent when its value began.
            if keepsValues { frames[top].entries.append(absentKey: pending.key, value, hash: pending.hash) }
            frames[top].pendingKey = nil
        } else if keepsValues {
            frames[top].items.append(value)
        }
    }

    mutating func characters(_ bytes: UnsafeBufferPointer<UInt8>) {
        switch mode {
        case .skipping:
            return
        case .counting(_, let depth, _):
            // Text among <plist>'s values is reported before their count, as it always was.
            if depth == 0 { checkBlank(bytes, inside: .plist) }
            return
        case .building:
            break
        }
        guard !frames.isEmpty else { return }
        let top = frames[frames.count - 1].element
        if top.holdsText {
            text.append(contentsOf: bytes)
        } else {
            checkBlank(bytes, inside: top)
        }
    }

    private mutating func checkBlank(_ bytes: UnsafeBufferPointer<UInt8>, inside element: PlistElement) {
        let line = textLine ?? self.line
        textLine = line
        if !bytes.allSatisfy(PropertyList.isXMLBlank) {
            reject("unexpected text inside <\(element.rawValue)>", line: line)
        }
    }

    /// A comment or processing instruction: skipped, but it ends a run of text as it ended a DOM text node.
    mutating func separator() {
        textLine = nil
    }
}

/// What the C callbacks reach through `ctxt->_private`: the builder, and libxml2's first error.
private final class ParseState {
    /// Unchecked: libxml2 calls one handler at a time, and no handler reaches `builder` while another holds it
    /// (`serror`, which a stopping parser may call, touches only `firstError`). The dynamic checks cost a
    /// fiftieth of verify's serial end, a thread-local lookup per element.
    @exclusivity(unchecked) var builder: PlistBuilder
    /// libxml2's first error: later ones are usually knock-on effects ("premature end of data").
    /// Copied out at once: libxml2 frees the message when the next error arrives.
    var firstError: LibXMLError?

    init(_ builder: PlistBuilder) {
        self.builder = builder
    }

    /// The state installed on a parser context (the callbacks' `ctx`, which is the context itself).
    static func of(_ context: UnsafeMutableRawPointer?) -> ParseState? {
        guard let raw = context?.assumingMemoryBound(to: xmlParserCtxt.self).pointee._private else { return nil }
        return Unmanaged<ParseState>.fromOpaque(raw).takeUnretainedValue()
    }
}

/// Reads XML property lists with libxml2's SAX2 interface, treating the input as hostile.
struct XMLPlistReader {
    let limits: PlistLimits

    /// Parses `bytes`, building the value as the elements arrive (no libxml2 tree).
    func decode(_ bytes: [UInt8]) throws(PlistError) -> PlistValue {
        try parse(bytes, keepsValues: true)
    }

    /// Parses `bytes` as `decode` does, but drops each value once checked: for documents whose value the caller
    /// already has. Duplicate keys go unnoticed, since no dictionary is kept (a `PlistValue` has none).
    func check(_ bytes: [UInt8]) throws(PlistError) {
        _ = try parse(bytes, keepsValues: false)
    }

    private func parse(_ bytes: [UInt8], keepsValues: Bool) throws(PlistError) -> PlistValue {
        _ = LibXML2Setup.ready
        let (start, lineOffset) = Self.documentStart(bytes)
        guard bytes.count - start <= Int(Int32.max) else {
            throw PlistError(.limit, "XML document too large for libxml2")
        }
        guard let ctxt = xmlNewParserCtxt() else {
            throw PlistError(.syntax, "libxml2 could not create a parser context")
        }
        defer { xmlFreeParserCtxt(ctxt) }

        let state = ParseState(PlistBuilder(ctxt: ctxt, limits: limits, lineOffset: lineOffset, keepsValues: keepsValues))
        let unmanaged = Unmanaged.passRetained(state)
        defer { unmanaged.release() }
        ctxt.pointee._private = UnsafeMutableRawPointer(unmanaged.toOpaque())
        Self.installHandlers(ctxt)

        // Never NOENT, DTDLOAD, DTDVALID, XINCLUDE, HUGE or RECOVER: entities stay unexpanded, nothing is fetched.
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue
            | XML_PARSE_NOCDATA.rawValue)
        // Read through a callback (`xmlCtxtReadIO`), a few KB at a time: `xmlCtxtReadMemory` first copies the
        // whole document into a buffer of libxml2's, as big as the plist (8 MB for 26,000 files).
        let document: xmlDocPtr? = bytes.withUnsafeBytes { buffer in
            var input = InputCursor(remaining: UnsafeRawBufferPointer(rebasing: buffer[start...]))
            return withUnsafeMutablePointer(to: &input) { pointer in
                xmlCtxtReadIO(ctxt, { context, buffer, length in InputCursor.read(context, buffer, length) }, nil, pointer, nil, nil, options)
            }
        }
        // Without a startDocument handler there is no tree; libxml2 would only make one to keep entity
        // declarations, which the handlers refuse.
        if let document { xmlFreeDoc(document) }

        let builder = state.builder
        if let failure = builder.failure {
            throw failure
        }
        guard ctxt.pointee.wellFormed != 0 else {
            throw Self.describe(state.firstError ?? LibXMLError(ctxt.pointee.lastError), lineOffset: lineOffset)
        }
        if let pending = builder.pending {
            throw pending
        }
        guard let value = builder.result else {
            throw PlistError(.syntax, "XML document has no root element")
        }
        return value
    }

    /// What libxml2 has not read yet of the document.
    private struct InputCursor {
        var remaining: UnsafeRawBufferPointer

        /// An `xmlInputReadCallback`: copies the next bytes to `buffer`, returning how many (0 at the end).
        static func read(_ context: UnsafeMutableRawPointer?, _ buffer: UnsafeMutablePointer<CChar>?, _ length: Int32) -> Int32 {
            guard let context, let buffer, length > 0 else { return 0 }
            let cursor = context.assumingMemoryBound(to: InputCursor.self)
            let chunk = UnsafeRawBufferPointer(rebasing: cursor.pointee.remaining.prefix(Int(length)))
            UnsafeMutableRawBufferPointer(start: buffer, count: chunk.count).copyMemory(from: chunk)
            cursor.pointee.remaining = UnsafeRawBufferPointer(rebasing: cursor.pointee.remaining.dropFirst(chunk.count))
            return Int32(chunk.count)
        }
    }

    /// Where the document starts after a UTF-8 BOM and blanks before `<?xml` (which libxml2 refuses), and how
    /// many lines that skips.
    private static func documentStart(_ bytes: [UInt8]) -> (start: Int, lines: Int) {
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var newlines = 0
        while index < bytes.count, PropertyList.isXMLBlank(bytes[index]) {
            if bytes[index] == 0x0A { newlines += 1 }
            index += 1
        }
        guard bytes[index...].starts(with: Array("<?xml".utf8)) else { return (0, 0) }
        return (index, newlines)
    }

    /// Replaces libxml2's tree-building SAX2 handlers with the builder's, plus the guards that refuse DTD
    /// subsets and entities while parsing.
    private static func installHandlers(_ ctxt: xmlParserCtxtPtr) {
        guard let sax = ctxt.pointee.sax else { return }
        // Nothing left from xmlSAXVersion's defaults: no startDocument (no xmlDoc), no node building, and no
        // externalSubset or resolveEntity, so no DTD is ever read.
        sax.pointee = xmlSAXHandler()
        sax.pointee.initialized = XML_SAX2_MAGIC

        // libxml2 errors are kept for decode to read; nothing goes to stderr.
        sax.pointee.serror = { context, error in
            guard let state = ParseState.of(context), state.firstError == nil, let error else { return }
            state.firstError = LibXMLError(error.pointee)
        }
        sax.pointee.startElementNs = { context, localname, prefix, uri, _, _, _, _, _ in
            ParseState.of(context)?.builder.startElement(localname: localname, prefix: prefix, uri: uri)
        }
        sax.pointee.endElementNs = { context, _, _, _ in
            ParseState.of(context)?.builder.endElement()
        }
        // CDATA arrives here too (XML_PARSE_NOCDATA), and so do blanks: libxml2 only calls
        // ignorableWhitespace when it differs from characters.
        let characters: charactersSAXFunc = { context, bytes, count in
            guard let bytes, count > 0 else { return }
            ParseState.of(context)?.builder.characters(UnsafeBufferPointer(start: bytes, count: Int(count)))
        }
        sax.pointee.characters = characters
        sax.pointee.ignorableWhitespace = characters
        sax.pointee.comment = { context, _ in ParseState.of(context)?.builder.separator() }
        sax.pointee.processingInstruction = { context, _, _ in ParseState.of(context)?.builder.separator() }

        sax.pointee.internalSubset = { context, _, _, _ in
            guard let state = ParseState.of(context) else { return }
            // libxml2 calls this right before `[`, the start of an internal subset, where entities are declared.
            if let cur = state.builder.ctxt.pointee.input?.pointee.cur, cur.pointee == UInt8(ascii: "[") {
                state.builder.fail(PlistError(.forbidden, "DOCTYPE with an internal subset is not allowed"))
            }
        }
        sax.pointee.entityDecl = { context, name, _, _, _, _ in
            let entity = name.map { String(cString: $0) } ?? "?"
            ParseState.of(context)?.builder.fail(PlistError(.forbidden, "entity declaration '\(entity)' is not allowed"))
        }
        sax.pointee.unparsedEntityDecl = { context, name, _, _, _ in
            let entity = name.map { String(cString: $0) } ?? "?"
            ParseState.of(context)?.builder.fail(PlistError(.forbidden, "entity declaration '\(entity)' is not allowed"))
        }
        // Only reachable inside a DTD, which the hooks above already refuse: a second line of defence.
        sax.pointee.elementDecl = { context, _, _, _ in ParseState.of(context)?.builder.refuseDeclaration() }
        sax.pointee.attributeDecl = { context, _, _, _, _, _, _ in ParseState.of(context)?.builder.refuseDeclaration() }
        sax.pointee.notationDecl = { context, _, _, _ in ParseState.of(context)?.builder.refuseDeclaration() }
        // An undeclared entity after a DOCTYPE is only a warning to libxml2, which then reports the reference.
        sax.pointee.reference = { context, name in
            let entity = name.map { String(cString: $0) } ?? "?"
            ParseState.of(context)?.builder.fail(PlistError(.forbidden, "entity reference '&\(entity);' is not allowed"))
        }
    }

    /// A libxml2 error with its message, line and column.
    private static func describe(_ error: LibXMLError, lineOffset: Int) -> PlistError {
        let message = error.message.trimmingCharacters(in: .whitespacesAndNewlines)
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

    /// Keeps hostile text short in messages.
    static func clip(_ text: String) -> String {
        text.count > 40 ? String(text.prefix(40)) + "..." : text
    }

    // MARK: - Scalars

    /// The value of a leaf element from its text; character references like `&amp;` are already resolved.
    fileprivate static func scalar(_ element: PlistElement, text bytes: [UInt8], line: Int) throws(PlistError) -> PlistValue {
        // libxml2 hands out UTF-8 whatever the input encoding was.
        let text = String(decoding: bytes, as: UTF8.self)
        switch element {
        case .integer:
            guard let value = parseInteger(text) else {
                throw PlistError(.syntax, "<integer> '\(clip(text))' is not a 64-bit integer", line: line)
            }
            return .integer(value)
        case .real:
            let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let value = parseReal(text) else {
                throw PlistError(.syntax, "<real> '\(clip(text))' is not a number", line: line)
            }
            return .real(value)
        case .true, .false:
            guard text.allSatisfy({ $0.isWhitespace }) else {
                throw PlistError(.syntax, "<\(element.rawValue)/> must be empty", line: line)
            }
            return .boolean(element == .true)
        case .date:
            let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let date = PlistDate.parse(text) else {
                let message = "<date> '\(clip(text))' is not an ISO 8601 date like 2026-01-02T03:04:05Z"
                throw PlistError(.syntax, message, line: line)
            }
            return .date(date)
        case .data:
            guard let bytes = Base64.decode(text) else {
                throw PlistError(.syntax, "<data> is not valid base64", line: line)
            }
            return .data(bytes)
        case .string, .key, .plist, .array, .dict:
            return .string(text)
        }
    }

    /// Decimal or `0x` hexadecimal, with an optional sign and surrounding blanks; nil on overflow or junk.
    static func parseInteger(_ text: String) -> Int64? {
        // Plain decimal (every size in HCPackIntegrity) needs neither trimming nor Foundation.
        if let value = Int64(text) { return value }
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
