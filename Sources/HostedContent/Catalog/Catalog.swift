import Foundation
import PropertyList

/// One delta in a catalog entry: how to go from `baseVersion` to the entry's version.
public struct CatalogDelta: Sendable, Equatable {
    public var baseVersion: String
    public var url: String
    public var size: Int64
    /// Lower-case hex SHA-256 of the delta archive.
    public var sha256: String
    /// Where the delta's signed note is, when it has one.
    public var signatureURL: String?
    /// SHA-256 of the base version's ContentInfo.plist, which the receipt must record for the delta to apply
    /// (fetch chooses a delta before downloading it); absent in catalogs written before it was added.
    public var basePlistSHA256: String?
    /// The delta carries binary patches (HCPackPatches): a client that cannot apply them takes another delta
    /// or the full archive. Written as `"patches" : true`, and only then.
    public var patches = false

    public init(
        baseVersion: String, url: String, size: Int64, sha256: String, signatureURL: String? = nil, basePlistSHA256: String? = nil
    ) {
        self.baseVersion = baseVersion
        self.url = url
        self.size = size
        self.sha256 = sha256
        self.signatureURL = signatureURL
        self.basePlistSHA256 = basePlistSHA256
    }
}

/// One product in a catalog: its highest version's full archive, and the deltas that lead to that version.
public struct CatalogPackage: Sendable, Equatable {
    public var productIdentifier: String
    public var version: String
    public var url: String
    public var size: Int64
    /// Lower-case hex SHA-256 of the archive.
    public var sha256: String
    /// Lower-case hex SHA-256 of the archive's ContentInfo.plist (what an install's receipt records).
    public var plistSHA256: String
    /// Where the archive's signed note is, when it has one.
    public var signatureURL: String?
    /// Sorted by base version.
    public var deltas: [CatalogDelta]
    /// When an app installs the product (`hcpack fetch`); written only when not `onDemand`.
    public var policy: DownloadPolicy

    public init(
        productIdentifier: String, version: String, url: String, size: Int64, sha256: String, plistSHA256: String,
        signatureURL: String?, deltas: [CatalogDelta], policy: DownloadPolicy = .onDemand
    ) {
        self.policy = policy
        self.productIdentifier = productIdentifier
        self.version = version
        self.url = url
        self.size = size
        self.sha256 = sha256
        self.plistSHA256 = plistSHA256
        self.signatureURL = signatureURL
        self.deltas = deltas
    }
}

/// Why catalog bytes are not a catalog.
public struct CatalogFormatError: Error, Sendable, Equatable {
    public var message: String
}

/// The JSON document an app fetches to learn what to download (docs/self-hosting.md): format
/// `hcpack-catalog-1`, a serial that only grows, an optional expiry, one entry per product sorted by product.
public struct Catalog: Sendable, Equatable {
    /// The `format` value.
    public static let format = "hcpack-catalog-1"
    /// Largest catalog read.
    public static let maxBytes = 64 << 20

    /// Grows with every catalog published; an app refuses one lower than the highest it has seen.
    public var serial: Int64
    /// When the catalog stops being accepted (whole seconds, UTC); nil never.
    public var expires: Date?
    /// Sorted by product identifier.
    public var packages: [CatalogPackage]

    public init(serial: Int64, expires: Date?, packages: [CatalogPackage]) {
        self.serial = serial
        self.expires = expires.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
        self.packages = packages.sorted { $0.productIdentifier.utf8.lexicographicallyPrecedes($1.productIdentifier.utf8) }
    }

    /// Pretty JSON, keys in the documented order, followed by a newline: the same catalog, the same bytes.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        func add(_ text: String) { out.append(contentsOf: text.utf8) }
        func string(_ text: String) { JSONCoding.appendString(text, to: &out) }
        add("{\n  \"format\" : ")
        string(Self.format)
        add(",\n  \"serial\" : \(serial)")
        if let expires {
            add(",\n  \"expires\" : ")
            string(UTCTimestamp.format(expires))
        }
        add(",\n  \"packages\" : [")
        for (index, package) in packages.enumerated() {
            add(index == 0 ? "\n" : ",\n")
            add("    {\n      \"productIdentifier\" : ")
            string(package.productIdentifier)
            add(",\n      \"version\" : ")
            string(package.version)
            add(",\n      \"url\" : ")
            string(package.url)
            add(",\n      \"size\" : \(package.size),\n      \"sha256\" : ")
            string(package.sha256)
            add(",\n      \"plistSHA256\" : ")
            string(package.plistSHA256)
            if let signatureURL = package.signatureURL {
                add(",\n      \"signatureURL\" : ")
                string(signatureURL)
            }
            add(",\n      \"deltas\" : [")
            for (deltaIndex, delta) in package.deltas.enumerated() {
                add(deltaIndex == 0 ? "\n" : ",\n")
                add("        {\n          \"baseVersion\" : ")
                string(delta.baseVersion)
                add(",\n          \"url\" : ")
                string(delta.url)
                add(",\n          \"size\" : \(delta.size),\n          \"sha256\" : ")
                string(delta.sha256)
                if let signatureURL = delta.signatureURL {
                    add(",\n          \"signatureURL\" : ")
                    string(signatureURL)
                }
                if let base = delta.basePlistSHA256 {
                    add(",\n          \"basePlistSHA256\" : ")
                    string(base)
                }
                if delta.patches { add(",\n          \"patches\" : true") }
                add("\n        }")
            }
            add(package.deltas.isEmpty ? "]" : "\n      ]")
            if package.policy != .onDemand {
                add(",\n      \"policy\" : ")
                string(package.policy.rawValue)
            }
            add("\n    }")
        }
        add(packages.isEmpty ? "]\n}\n" : "\n  ]\n}\n")
        return out
    }

    /// Parses a catalog strictly: the JSON as `StrictJSON` reads it (UTF-8, no BOM, no repeated key, exact
    /// integers), every documented field with its type, nothing else, digests as 64 lower-case hex digits, sizes
    /// and the serial non-negative, products once each. Check the catalog's note first
    /// (`CatalogVerifier.verify(catalog:note:policy:)`): these are untrusted bytes until then.
    public static func decode(_ bytes: [UInt8]) throws(CatalogFormatError) -> Catalog {
        guard bytes.count <= maxBytes else { throw CatalogFormatError(message: "larger than \(maxBytes) bytes") }
        let root: StrictJSON
        do {
            root = try StrictJSON.parse(bytes)
        } catch {
            throw CatalogFormatError(message: "not strict JSON: \(error.message) (byte \(error.offset))")
        }
        var fields = try Fields(root, at: "the catalog")
        guard try fields.string("format") == format else {
            throw CatalogFormatError(message: "format is not '\(format)'")
        }
        let serial = try fields.integer("serial")
        var expires: Date?
        if let text = try fields.optionalString("expires") {
            guard let date = UTCTimestamp.parse(text) else {
                throw CatalogFormatError(message: "expires '\(text)' is not a UTC time such as 2027-01-01T00:00:00Z")
            }
            expires = date
        }
        var packages: [CatalogPackage] = []
        var seen: Set<[UInt8]> = []
        for (index, item) in try fields.array("packages").enumerated() {
            var entry = try Fields(item, at: "packages[\(index)]")
            let product = try entry.string("productIdentifier")
            guard ContentInfo.isValidProductIdentifier(product), seen.insert(Array(product.utf8)).inserted else {
                throw CatalogFormatError(message: "packages[\(index)]: productIdentifier '\(product)' is invalid or repeated")
            }
            let version = try entry.version("version")
            var deltas: [CatalogDelta] = []
            for (deltaIndex, deltaItem) in try entry.array("deltas").enumerated() {
                var delta = try Fields(deltaItem, at: "packages[\(index)].deltas[\(deltaIndex)]")
                var parsed = CatalogDelta(
                    baseVersion: try delta.version("baseVersion"), url: try delta.string("url"), size: try delta.integer("size"),
                    sha256: try delta.digest("sha256"), signatureURL: try delta.optionalString("signatureURL"),
                    basePlistSHA256: try delta.optionalDigest("basePlistSHA256"))
                // Optional, true only: the delta carries binary patches (issue 32).
                if let patches = delta.take("patches") {
                    guard case .bool(true) = patches else {
                        throw CatalogFormatError(message: "packages[\(index)].deltas[\(deltaIndex)].patches must be true when present")
                    }
                    parsed.patches = true
                }
                deltas.append(parsed)
                try delta.finish()
            }
            packages.append(
                CatalogPackage(
                    productIdentifier: product, version: version, url: try entry.string("url"), size: try entry.integer("size"),
                    sha256: try entry.digest("sha256"), plistSHA256: try entry.digest("plistSHA256"),
                    signatureURL: try entry.optionalString("signatureURL"), deltas: deltas, policy: try entry.policy()))
            try entry.finish()
        }
        try fields.finish()
        return Catalog(serial: serial, expires: expires, packages: packages)
    }

    /// Reads a JSON object's fields by name, each once, and refuses any left over (`StrictJSON` refused
    /// repeated keys already).
    private struct Fields {
        var remaining: [String: StrictJSON]
        let location: String

        init(_ value: StrictJSON, at location: String) throws(CatalogFormatError) {
            guard let members = value.members else { throw CatalogFormatError(message: "\(location) is not an object") }
            var fields: [String: StrictJSON] = [:]
            for member in members { fields[member.key] = member.value }
            remaining = fields
            self.location = location
        }

        mutating func take(_ name: String) -> StrictJSON? { remaining.removeValue(forKey: name) }

        mutating func optionalString(_ name: String) throws(CatalogFormatError) -> String? {
            guard let value = take(name) else { return nil }
            guard case .string(let text) = value, !text.isEmpty else {
                throw CatalogFormatError(message: "\(location): \(name) is not a non-empty string")
            }
            return text
        }

        mutating func string(_ name: String) throws(CatalogFormatError) -> String {
            guard let text = try optionalString(name) else { throw CatalogFormatError(message: "\(location): \(name) is missing") }
            return text
        }

        mutating func version(_ name: String) throws(CatalogFormatError) -> String {
            let text = try string(name)
            guard ContentVersion(text) != nil else { throw CatalogFormatError(message: "\(location): \(name) '\(text)' is not a version") }
            return text
        }

        mutating func digest(_ name: String) throws(CatalogFormatError) -> String {
            let text = try string(name)
            guard DeltaBase.isHexDigest(text) else {
                throw CatalogFormatError(message: "\(location): \(name) is not 64 lower-case hex digits")
            }
            return text
        }

        mutating func optionalDigest(_ name: String) throws(CatalogFormatError) -> String? {
            guard remaining[name] != nil else { return nil }
            return try digest(name)
        }

        mutating func policy() throws(CatalogFormatError) -> DownloadPolicy {
            guard let text = try optionalString("policy") else { return .onDemand }
            guard let policy = DownloadPolicy(rawValue: text) else {
                throw CatalogFormatError(message: "\(location): policy '\(text)' is not essential, prefetch or onDemand")
            }
            return policy
        }

        mutating func integer(_ name: String) throws(CatalogFormatError) -> Int64 {
            guard case .integer(let value)? = take(name), value >= 0 else {
                throw CatalogFormatError(message: "\(location): \(name) is not a non-negative whole number")
            }
            return value
        }

        mutating func array(_ name: String) throws(CatalogFormatError) -> [StrictJSON] {
            guard case .array(let values)? = take(name) else { throw CatalogFormatError(message: "\(location): \(name) is not an array") }
            return values
        }

        func finish() throws(CatalogFormatError) {
            if let extra = remaining.keys.sorted().first {
                throw CatalogFormatError(message: "\(location): unknown field '\(extra)'")
            }
        }
    }
}
