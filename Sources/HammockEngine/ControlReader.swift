import Foundation

/// Reads control lines from a file descriptor (stdin) on a thread of its own, because `read` blocks.
enum ControlReader {
    /// A line longer than this is refused (and skipped up to its end) rather than buffered.
    static let maximumLineLength = 1 << 20

    enum Event: Sendable {
        case line([UInt8])
        case tooLong(Int)
        case end
    }

    static func start(descriptor: Int32 = STDIN_FILENO, deliver: @escaping @Sendable (Event) -> Void) {
        let thread = Thread {
            var line: [UInt8] = []
            var skipping = 0
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                for byte in chunk[0..<count] {
                    if byte == UInt8(ascii: "\n") {
                        if skipping > 0 {
                            deliver(.tooLong(skipping))
                            skipping = 0
                        } else if !line.isEmpty {
                            deliver(.line(line))
                        }
                        line.removeAll(keepingCapacity: true)
                    } else if skipping > 0 {
                        skipping += 1
                    } else if line.count >= maximumLineLength {
                        skipping = line.count + 1
                        line = []
                    } else {
                        line.append(byte)
                    }
                }
            }
            if !line.isEmpty { deliver(.line(line)) }
            deliver(.end)
        }
        thread.name = "hammock.stdin"
        thread.start()
    }
}
