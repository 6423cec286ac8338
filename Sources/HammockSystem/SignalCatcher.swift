import Glibc
import Synchronization

/// Signals caught one way in every process of hammock (the engine, each plugin): a handler that only writes
/// the signal's number to a pipe, and a thread of its own ("hammock.signals", one per process, for as long
/// as the process lives) that reads the pipe and hands each number to Swift code.
///
/// Not `DispatchSource.makeSignalSource`: libdispatch installs its handler only once its manager thread has
/// registered the source, some time after `resume()`, and a signal that comes before is lost (ignored) or
/// fatal (default); `sigaction` takes effect at once. A write to a pipe is async-signal-safe, and the pipe
/// is non-blocking, so a flood of signals cannot block the handler (beyond the pipe's room, repeats are
/// dropped, which changes nothing).
public enum SignalCatcher {
    /// The pipe's write end, read by the handler (an atomic load, which is async-signal-safe); set once,
    /// before any handler is installed.
    private static let writeEnd = Atomic<Int32>(-1)
    /// Who takes each signal; the reading thread looks here for every number it reads.
    private static let deliveries = Mutex<[Int32: @Sendable (Int32) -> Void]>([:])

    /// Catches each of `numbers` from now on and hands it to `deliver`, on the signal thread, in the order
    /// they came. A later call for the same number replaces its `deliver`.
    public static func catchSignals(_ numbers: [Int32], deliver: @escaping @Sendable (Int32) -> Void) {
        guard startReading() else {
            // No pipe (out of descriptors): keep the signals from ending the process at least.
            for number in numbers { signal(number, SIG_IGN) }
            return
        }
        deliveries.withLock { deliveries in
            for number in numbers { deliveries[number] = deliver }
        }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { number in
            // The thread it interrupted may be about to read `errno`.
            let saved = errno
            var byte = UInt8(truncatingIfNeeded: number)
            _ = write(SignalCatcher.writeEnd.load(ordering: .acquiring), &byte, 1)
            errno = saved
        }
        action.sa_flags = SA_RESTART
        sigemptyset(&action.sa_mask)
        for number in numbers { sigaction(number, &action, nil) }
    }

    /// Makes the pipe and starts its reader, the first time; false when there is no pipe.
    private static func startReading() -> Bool {
        deliveries.withLock { _ in
            if writeEnd.load(ordering: .acquiring) >= 0 { return true }
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { return false }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            _ = fcntl(ends[1], F_SETFL, O_NONBLOCK)
            let readEnd = ends[0]
            writeEnd.store(ends[1], ordering: .releasing)
            OwnThread.start(named: "hammock.signals") {
                var byte: UInt8 = 0
                while true {
                    let count = read(readEnd, &byte, 1)
                    if count == 1 {
                        let number = Int32(byte)
                        deliveries.withLock { $0[number] }?(number)
                    } else if count < 0 && errno == EINTR {
                        continue
                    } else {
                        return
                    }
                }
            }
            return true
        }
    }
}
