import Dispatch
import Synchronization

/// Hands every job to each of a few worker threads, in the order submitted: the worker threads of a
/// pipeline that all go through the same buffers (one hashes, one writes). A worker takes whatever has
/// arrived in one go, so it is woken once per batch, not once per job.
final class JobLanes<Job: Sendable>: Sendable {
    private final class Lane: Sendable {
        let jobs = Mutex<[Job]>([])
        let pending = DispatchSemaphore(value: 0)
    }
    private let lanes: [Lane]

    /// The number of workers.
    var count: Int { lanes.count }

    init(count: Int) {
        lanes = (0..<count).map { _ in Lane() }
    }

    /// Queues `jobs` for every worker.
    func submit(_ jobs: [Job]) {
        for lane in lanes {
            lane.jobs.withLock { $0.append(contentsOf: jobs) }
            lane.pending.signal()
        }
    }

    /// The jobs queued for worker `index` since it last took them; waits until there is at least one batch.
    func take(_ index: Int) -> [Job] {
        let lane = lanes[index]
        lane.pending.wait()
        return lane.jobs.withLock { queued in
            let taken = queued
            queued = []
            return taken
        }
    }
}

/// An action run by the last of a pipeline's worker threads to reach it: a buffer freed once every worker is
/// done with it.
final class Meeting: Sendable {
    private let remaining: Atomic<Int>
    private let action: @Sendable () -> Void

    init(_ threads: Int, _ action: @escaping @Sendable () -> Void) {
        remaining = Atomic(threads)
        self.action = action
    }

    func arrive() {
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { action() }
    }
}
