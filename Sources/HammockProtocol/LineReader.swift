import Foundation

/// Reads newline-terminated lines from a file descriptor on a thread of its own, because `read` blocks.
///
/// Both ends of hammock's pipes use it: the engine for control lines on stdin, plugins for the engine's
/// messages on theirs.
public enum LineReader {
    public enum Event: Sendable {
        case line([UInt8])
        /// A line of this many bytes was skipped.
        case tooLong(Int)
        /// End of input (or a read error).
        case end
    }

    public static func start(
        descriptor: Int32, maximumLineLength: Int, name: String, deliver: @escaping @Sendable (Event) -> Void
    ) {
        let thread = Thread {
            var splitter = LineSplitter(maximumLineLength: maximumLineLength)
            let forward: (LineSplitter.Piece) -> Void = { piece in
                switch piece {
                case .line(let bytes): deliver(.line(bytes))
                case .tooLong(let length, _): deliver(.tooLong(length))
                }
            }
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                chunk.withUnsafeBytes { splitter.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count]), emit: forward) }
            }
            splitter.finish(emit: forward)
            deliver(.end)
        }
        thread.name = name
        thread.start()
    }
}
