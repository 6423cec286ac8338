import Glibc

/// Reads newline-terminated lines from a file descriptor, blocking, so on a thread that is not the Swift
/// concurrency pool's.
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

    /// Reads on a thread of its own until the end of input.
    public static func start(
        descriptor: Int32, maximumLineLength: Int, name: String, deliver: @escaping @Sendable (Event) -> Void
    ) {
        OwnThread.start(named: name) { read(descriptor: descriptor, maximumLineLength: maximumLineLength, deliver: deliver) }
    }

    /// Reads on a thread of its own until the end of input, handing over the events of each read together:
    /// one hand-over for the many lines a read can bring, not one a line.
    public static func startBatched(
        descriptor: Int32, maximumLineLength: Int, name: String, deliver: @escaping @Sendable ([Event]) -> Void
    ) {
        OwnThread.start(named: name) {
            readBatches(
                descriptor: descriptor, maximumLineLength: maximumLineLength, stopDescriptor: nil,
                dropsUnterminatedLine: false, deliver: deliver)
        }
    }

    /// Reads on the calling thread until the end of input, or until `stopDescriptor` (the read end of a
    /// pipe) becomes readable; then delivers `.end` and returns. Waits in `poll` for either, so that an
    /// owner can end the reading without closing the descriptor read from. A last line without a newline is
    /// delivered, unless `dropsUnterminatedLine` (for a reader whose writer ends every line, so that such a
    /// line is one the writer was cut off in).
    public static func read(
        descriptor: Int32, maximumLineLength: Int, stopDescriptor: Int32? = nil, dropsUnterminatedLine: Bool = false,
        deliver: @Sendable (Event) -> Void
    ) {
        readBatches(
            descriptor: descriptor, maximumLineLength: maximumLineLength, stopDescriptor: stopDescriptor,
            dropsUnterminatedLine: dropsUnterminatedLine
        ) { events in
            for event in events { deliver(event) }
        }
    }

    private static func readBatches(
        descriptor: Int32, maximumLineLength: Int, stopDescriptor: Int32?, dropsUnterminatedLine: Bool,
        deliver: @Sendable ([Event]) -> Void
    ) {
        var splitter = LineSplitter(maximumLineLength: maximumLineLength)
        var events: [Event] = []
        func forward(_ piece: LineSplitter.Piece) {
            switch piece {
            case .line(let bytes): events.append(.line(bytes))
            case .tooLong(let length, _): events.append(.tooLong(length))
            }
        }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        reading: while true {
            if let stopDescriptor {
                var watched = [
                    pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: stopDescriptor, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&watched, 2, -1)
                if ready < 0 && errno == EINTR { continue }
                if watched[1].revents != 0 { break reading }
            }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            chunk.withUnsafeBytes { splitter.feed(UnsafeRawBufferPointer(rebasing: $0[0..<count]), emit: forward) }
            if !events.isEmpty {
                deliver(events)
                events.removeAll(keepingCapacity: true)
            }
        }
        if !dropsUnterminatedLine { splitter.finish(emit: forward) }
        events.append(.end)
        deliver(events)
    }
}
