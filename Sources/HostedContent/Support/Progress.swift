/// How far a long operation has got; handed to a progress callback.
public struct ProgressUpdate: Sendable, Equatable {
    /// What is happening ("packing", "unpacking", "installing").
    public var phase: String
    public var completedBytes: Int64
    public var totalBytes: Int64?
    public var completedFiles: Int
    public var totalFiles: Int?

    public init(phase: String, completedBytes: Int64, totalBytes: Int64?, completedFiles: Int, totalFiles: Int?) {
        self.phase = phase
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
        self.completedFiles = completedFiles
        self.totalFiles = totalFiles
    }
}

/// Receives progress updates; called on the working thread, so it must be quick.
public typealias ProgressHandler = (ProgressUpdate) -> Void
