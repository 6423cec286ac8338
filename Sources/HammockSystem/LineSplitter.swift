import Glibc

/// Cuts a byte stream into newline-terminated lines, refusing to buffer a line longer than a limit.
///
/// Whoever reads a pipe from another process (the engine reading a plugin, a plugin reading the engine)
/// must not let the other side grow its memory without bound by never sending a newline. Of a line too long
/// it can keep the first `headLength` bytes, so that the reader can tell what the line was about (the
/// engine fails the one load or source a plugin's oversized answer names).
///
/// Empty lines say nothing in the protocol and are passed over, unless `keepsEmptyLines` (a shell command's
/// blank line in a text stream is a value: the empty string).
public struct LineSplitter: Sendable {
    public enum Piece: Sendable, Equatable {
        case line([UInt8])
        /// A line of `length` bytes was dropped; `head` is its beginning (at most `headLength` bytes).
        case tooLong(length: Int, head: [UInt8])
    }

    public let maximumLineLength: Int
    public let headLength: Int
    public let keepsEmptyLines: Bool
    private var line: [UInt8] = []
    private var head: [UInt8] = []
    private var skipped = 0

    public init(maximumLineLength: Int, headLength: Int = 0, keepsEmptyLines: Bool = false) {
        self.maximumLineLength = maximumLineLength
        self.headLength = headLength
        self.keepsEmptyLines = keepsEmptyLines
    }

    /// Whether the line being fed is already too long: for a reader that must act before its newline comes,
    /// if it ever does (a command printing a gigabyte of zeros).
    public var isDroppingLine: Bool { skipped > 0 }

    /// Feeds bytes; calls `emit` for every line completed by them.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (Piece) throws -> Void) rethrows {
        guard let base = bytes.baseAddress else { return }
        var start = 0
        let count = bytes.count
        while start < count {
            // memchr: a plugin's 20 MB line must not cost seconds of byte-by-byte search.
            let found = memchr(base + start, Int32(UInt8(ascii: "\n")), count - start)
            let newline = found.map { base.distance(to: UnsafeRawPointer($0)) }
            let end = newline ?? count
            let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
            if skipped > 0 {
                skipped += piece.count
            } else if line.count + piece.count > maximumLineLength {
                head = Array(line.prefix(headLength))
                head += piece.prefix(headLength - head.count)
                skipped = line.count + piece.count
                line.removeAll(keepingCapacity: false)
            } else {
                line.append(contentsOf: piece)
            }
            if newline != nil { try finishLine(emit, atNewline: true) }
            start = end + 1
        }
    }

    /// The input ended: a last line without a newline still counts.
    public mutating func finish(emit: (Piece) throws -> Void) rethrows {
        try finishLine(emit, atNewline: false)
    }

    private mutating func finishLine(_ emit: (Piece) throws -> Void, atNewline: Bool) rethrows {
        if skipped > 0 {
            let (length, kept) = (skipped, head)
            skipped = 0
            head = []
            try emit(.tooLong(length: length, head: kept))
        } else if !line.isEmpty || (atNewline && keepsEmptyLines) {
            let complete = line
            line.removeAll(keepingCapacity: true)
            try emit(.line(complete))
        }
    }
}
