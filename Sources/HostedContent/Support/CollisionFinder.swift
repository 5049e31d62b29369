import PropertyList

/// Finds paths that differ from an earlier one only in Unicode normalization, or only in case, keeping
/// positions rather than a key string per path.
struct CollisionFinder {
    enum Collision {
        /// The earlier path is the same after NFC normalization.
        case normalization(String)
        /// The earlier path is the same after normalization and case folding.
        case folded(String)
    }

    private var byNormalization: PositionIndex
    private var byFolding: PositionIndex

    init(expectedCount: Int) {
        byNormalization = PositionIndex(expectedCount: expectedCount)
        byFolding = PositionIndex(expectedCount: expectedCount)
    }

    /// Records the path at `position`, or names the earlier path it collides with (then it is not recorded).
    mutating func add(_ position: Int, path: String, pathAt: (Int) -> String) -> Collision? {
        let (normalized, foldedIfOther) = PackagePath.collisionKeys(path)
        let normalizedHash = PositionIndex.stringHash(normalized)
        let sameNormalization = byNormalization.insert(position, hash: normalizedHash) {
            PackagePath.normalizationKey(pathAt($0)) == normalized
        }
        if let earlier = sameNormalization { return .normalization(pathAt(earlier)) }
        let folded = foldedIfOther ?? normalized
        let sameFolding = byFolding.insert(position, hash: foldedIfOther.map(PositionIndex.stringHash) ?? normalizedHash) {
            PackagePath.foldKey(pathAt($0)) == folded
        }
        if let earlier = sameFolding { return .folded(pathAt(earlier)) }
        return nil
    }
}
