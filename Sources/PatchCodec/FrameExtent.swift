/// Where a zstd frame ends, found from its headers as the bytes stream past (RFC 8878, section 3.1.1): the
/// frame header's fields, then each block's 3-byte header and the bytes it says follow, then the optional
/// checksum. Nothing is decompressed, so it costs a few operations a block whatever the chunk sizes, and
/// `verify` can tell a patch that is exactly one frame from one with bytes after it (which install, through
/// `ZSTD_findFrameCompressedSize`, refuses) without the base.
public struct FrameExtent: Sendable, Equatable {
    /// What the bytes seen so far are.
    public enum Verdict: Sendable, Equatable {
        /// Exactly one whole frame.
        case oneFrame
        /// The bytes end inside the frame.
        case truncated
        /// A whole frame, then this many more bytes.
        case trailing(Int64)
        /// Not a zstd frame (a wrong magic number, a reserved bit or block type).
        case malformed
        /// For a sequence of frames (`init(sequence:)`): whole frames, each one's frame header bytes in order.
        case frames([[UInt8]])
    }

    /// The most frames a sequence may hold: a patch group's files (`PatchGroup`); more is `.malformed`.
    public static let largestFrameCount = 4096

    private enum State: Sendable, Equatable {
        case header  // collecting the frame header
        case blockHeader  // collecting a 3-byte block header
        case skipping(Int64, last: Bool)  // a block's bytes
        case checksum(Int)  // bytes of the checksum still to come
        case done
        case malformed
    }

    private var state = State.header
    private var pending: [UInt8] = []
    private var hasChecksum = false
    private var trailing: Int64 = 0
    /// Frames follow one another: each one's header is kept (`Verdict.frames`).
    private var sequence = false
    private var heads: [[UInt8]] = []

    /// One frame: bytes after it are `.trailing`.
    public init() {}

    /// A sequence of frames when `sequence` (a patch group's entry), else one frame.
    public init(sequence: Bool) {
        self.sequence = sequence
    }

    /// The verdict on every byte fed so far.
    public var verdict: Verdict {
        switch state {
        case .done: sequence ? .frames(heads) : trailing == 0 ? .oneFrame : .trailing(trailing)
        case .malformed: .malformed
        default: .truncated
        }
    }

    /// Takes the next bytes of the stream.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        var index = 0
        while index < bytes.count {
            switch state {
            case .malformed:
                return
            case .done:
                guard sequence else {
                    trailing += Int64(bytes.count - index)
                    return
                }
                guard heads.count < Self.largestFrameCount else {
                    state = .malformed
                    return
                }
                state = .header
            case .skipping(let remaining, let last):
                let step = Int(min(Int64(bytes.count - index), remaining))
                index += step
                if remaining - Int64(step) > 0 {
                    state = .skipping(remaining - Int64(step), last: last)
                } else {
                    state = last ? (hasChecksum ? .checksum(4) : .done) : .blockHeader
                }
            case .checksum(let remaining):
                let step = min(bytes.count - index, remaining)
                index += step
                state = remaining - step > 0 ? .checksum(remaining - step) : .done
            case .header:
                pending.append(bytes[index])
                index += 1
                if let length = headerLength() {
                    if length < 0 {
                        state = .malformed
                    } else if pending.count == length {
                        if sequence { heads.append(pending) }
                        pending = []
                        state = .blockHeader
                    }
                }
            case .blockHeader:
                pending.append(bytes[index])
                index += 1
                if pending.count == 3 {
                    let value = Int(pending[0]) | Int(pending[1]) << 8 | Int(pending[2]) << 16
                    pending = []
                    let last = value & 1 == 1
                    let size = Int64(value >> 3)
                    switch (value >> 1) & 3 {
                    case 0, 2: state = size > 0 ? .skipping(size, last: last) : (last ? (hasChecksum ? .checksum(4) : .done) : .blockHeader)
                    case 1: state = .skipping(1, last: last)  // RLE: one byte, repeated
                    default: state = .malformed  // reserved block type
                    }
                }
            }
        }
    }

    /// The frame header's full length once the bytes collected so far tell it; -1 when they cannot start a
    /// frame; nil while more are needed.
    private mutating func headerLength() -> Int? {
        let magic: [UInt8] = [0x28, 0xb5, 0x2f, 0xfd]
        if pending.count <= 4 { return pending == Array(magic.prefix(pending.count)) ? nil : -1 }
        let descriptor = pending[4]
        guard descriptor & 0x08 == 0 else { return -1 }  // the reserved bit must be zero
        hasChecksum = descriptor & 0x04 != 0
        let singleSegment = descriptor & 0x20 != 0
        let dictionaryBytes = [0, 1, 2, 4][Int(descriptor & 3)]
        let contentSizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][Int(descriptor >> 6)]
        return 5 + (singleSegment ? 0 : 1) + dictionaryBytes + contentSizeBytes
    }
}
