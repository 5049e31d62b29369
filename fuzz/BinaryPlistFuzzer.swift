import PropertyList

/// libFuzzer entry: `bplist00` binary property lists through `PropertyList.decode` (our own bounded reader).
///
/// Inputs without the magic would go to the XML reader and are rejected (-1: not added to the corpus); the
/// seeds and `plist.dict` carry the magic. Anything that decodes must round-trip through `encodeXML`.
@_cdecl("LLVMFuzzerTestOneInput")
public func binaryPlistFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = fuzzBytes(data, size)
    guard bytes.starts(with: Array("bplist00".utf8)) else { return -1 }
    guard let (value, format) = try? PropertyList.decode(bytes, limits: fuzzPlistLimits) else { return 0 }
    precondition(format == .binary, "a bplist00 input decoded as \(format)")
    checkXMLRoundTrip(value)
    return 0
}
