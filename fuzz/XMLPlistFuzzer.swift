import PropertyList

/// libFuzzer entry: XML property lists through `PropertyList.decode` (libxml2's SAX2 parser + our value builder).
///
/// Inputs that start with `bplist00` belong to the binary target and are rejected (-1: not added to the corpus).
/// Anything that decodes must round-trip through `encodeXML` (see `checkXMLRoundTrip`).
@_cdecl("LLVMFuzzerTestOneInput")
public func xmlPlistFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    if bytes.starts(with: Array("bplist00".utf8)) { return -1 }
    guard let (value, format) = try? PropertyList.decode(bytes, limits: fuzzPlistLimits) else { return 0 }
    precondition(format == .xml, "a non-bplist00 input decoded as \(format)")
    checkXMLRoundTrip(value)
    return 0
}
