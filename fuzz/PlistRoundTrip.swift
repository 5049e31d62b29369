import Foundation
import PropertyList

/// Limits small enough that the fuzzer explores instead of timing out on legitimately huge inputs.
let fuzzPlistLimits = PlistLimits(maxBytes: 1 << 20, maxDepth: 64, maxObjects: 100_000)

/// The oracle both plist targets share beyond "no crash": whatever decodes must survive
/// `encodeXML` -> `decode` unchanged, except for what `PropertyList.encodeXML` documents it cannot carry.
func checkXMLRoundTrip(_ value: PlistValue) {
    guard isRoundTrippable(value) else { return }
    let encoded = PropertyList.encodeXML(value)
    // Shared references in a binary plist can expand a lot; past this, re-parsing only costs time.
    guard encoded.count <= 8 << 20 else { return }
    var limits = fuzzPlistLimits
    limits.maxBytes = encoded.count
    let again: PlistValue
    do {
        again = try PropertyList.decode(encoded, limits: limits).value
    } catch {
        fatalError("encodeXML output does not decode: \(error)")
    }
    if again != value {
        fatalError("XML round trip changed the value")
    }
}

/// False for values `encodeXML` documents as lossy: NaN, characters XML 1.0 cannot hold, dates outside 1...9999
/// or with a sub-second part.
func isRoundTrippable(_ value: PlistValue) -> Bool {
    switch value {
    case .string(let text): return isXMLText(text)
    case .real(let real): return !real.isNaN
    case .date(let date):
        let seconds = date.timeIntervalSinceReferenceDate
        // 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z relative to 2001-01-01.
        return seconds >= -63_113_904_000 && seconds <= 252_423_993_599 && seconds == seconds.rounded(.down)
    case .integer, .boolean, .data: return true
    case .array(let values): return values.allSatisfy(isRoundTrippable)
    case .dictionary(let dictionary):
        return dictionary.entries.allSatisfy { isXMLText($0.key) && isRoundTrippable($0.value) }
    }
}

private func isXMLText(_ text: String) -> Bool {
    text.unicodeScalars.allSatisfy { scalar in
        let v = scalar.value
        return (v >= 0x20 || v == 0x09 || v == 0x0A || v == 0x0D) && v != 0xFFFE && v != 0xFFFF
    }
}

/// Copies libFuzzer's input into an array.
func fuzzBytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
    guard let data, size > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: size))
}
