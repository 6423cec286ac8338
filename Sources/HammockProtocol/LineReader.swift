import Foundation

/// Reads newline-terminated lines from a file descriptor on a thread of its own, because `read` blocks.
///
/// Both ends of hammock's pipes use it: the engine for control lines on stdin, plugins for the engine's
/// messages on theirs. A line longer than the limit is skipped up to its end and reported, never buffered,
/// so a peer cannot make the reader grow without bound.
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
            var line: [UInt8] = []
            var skipped = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                var start = 0
                while start < count {
                    let newline = chunk[start..<count].firstIndex(of: UInt8(ascii: "\n"))
                    let end = newline ?? count
                    if skipped > 0 || line.count + (end - start) > maximumLineLength {
                        skipped += line.count + (end - start)
                        line.removeAll(keepingCapacity: false)
                    } else {
                        line.append(contentsOf: chunk[start..<end])
                    }
                    if newline != nil {
                        if skipped > 0 {
                            deliver(.tooLong(skipped))
                            skipped = 0
                        } else if !line.isEmpty {
                            deliver(.line(line))
                        }
                        line.removeAll(keepingCapacity: true)
                    }
                    start = end + 1
                }
            }
            if skipped > 0 { deliver(.tooLong(skipped)) } else if !line.isEmpty { deliver(.line(line)) }
            deliver(.end)
        }
        thread.name = name
        thread.start()
    }
}
