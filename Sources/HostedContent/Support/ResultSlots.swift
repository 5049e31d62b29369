import Synchronization

/// One result slot per work item, filled by concurrent workers; each index is written once.
final class ResultSlots<Value: Sendable>: Sendable {
    private let slots: Mutex<[Result<Value, HCPackError>?]>
    private let failure = Atomic<Bool>(false)

    init(count: Int) {
        slots = Mutex(Array(repeating: nil, count: count))
    }

    /// True once any item failed: workers stop taking new items.
    var failed: Bool { failure.load(ordering: .relaxed) }

    func store(_ result: Result<Value, HCPackError>, at index: Int) {
        if case .failure = result { failure.store(true, ordering: .relaxed) }
        slots.withLock { $0[index] = result }
    }

    /// The values in order, or the first failure (in item order).
    func values() throws(HCPackError) -> [Value] {
        let results = slots.withLock { $0 }
        var values: [Value] = []
        values.reserveCapacity(results.count)
        for result in results {
            switch result {
            case .success(let value)?: values.append(value)
            case .failure(let error)?: throw error
            case nil: break  // not reached: work stopped after a failure
            }
        }
        return values
    }
}
