import FoundationEssentials
import Glibc
import HammockProtocol
import HammockSystem

/// Where `OutputWriter` puts its bytes: stdout in hammock (`DescriptorOutput`), memory in tests, so that a
/// slow consumer, a consumer that leaves mid-line or a drain timeout is tested in milliseconds.
///
/// Every call but `stopWatching` may block: the writer calls them from a thread of its own.
protocol OutputTransport: Sendable {
    /// Writes of at most this many bytes go in whole or (while they block) not at all, as on a pipe.
    var atomicWrite: Int { get }
    /// Whether `waitForRoom` can know what the consumer has not read (a pipe); other outputs (a file, a
    /// terminal, a socket) are written as they come.
    var knowsUnreadBytes: Bool { get }
    /// Writes some of `bytes` (all of them when they fit in `atomicWrite`), blocking while the consumer does
    /// not read; `nil` when the consumer is gone (EPIPE).
    func write(_ bytes: UnsafeRawBufferPointer) -> Int?
    /// Waits until one write of `count` bytes would go in whole beside what is left unread (growing the room
    /// if it can), or `stop()` says to give up, or the consumer is gone; true in the first case only.
    func waitForRoom(_ count: Int, stop: () -> Bool) -> Bool
    /// Waits until the consumer closes its end (true), or `stopWatching()` is called (false).
    func waitForClosedConsumer() -> Bool
    /// Ends a `waitForClosedConsumer`, now or when it begins.
    func stopWatching()
}

extension OutputTransport {
    /// Writes all of `bytes`; false when the consumer is gone.
    func writeAll(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            guard let written = write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) else { return false }
            offset += written
        }
        return true
    }
}

/// A file descriptor (stdout), and what it takes to never leave half a line in it.
final class DescriptorOutput: OutputTransport {
    let descriptor: Int32
    let knowsUnreadBytes: Bool
    var atomicWrite: Int { Int(PIPE_BUF) }
    /// Written by `stopWatching` to end the closed-consumer watch, which waits in `poll`.
    private let wakeup: WakeupPipe

    /// `fcntl` commands of Linux's <fcntl.h> (F_LINUX_SPECIFIC_BASE + 7 and + 8) that Glibc's module map
    /// does not bring into Swift.
    private static let setPipeSize: Int32 = 1031
    private static let getPipeSize: Int32 = 1032

    init(descriptor: Int32) {
        self.descriptor = descriptor
        var status = stat()
        knowsUnreadBytes = fstat(descriptor, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO
        wakeup = WakeupPipe()
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Int? {
        try? Descriptor.writeSome(bytes, to: descriptor)
    }

    /// The wait polls with a growing pause: `poll` says when one page of a pipe is free, and nothing says
    /// when enough are.
    ///
    /// Waiting for an empty pipe instead made a consumer that reads only once hammock has exited (a shell's
    /// `$(hammock run --once …)`) wait for ever on a line over 4 KiB, though the whole output fit.
    func waitForRoom(_ count: Int, stop: () -> Bool) -> Bool {
        var capacity = Int(fcntl(descriptor, Self.getPipeSize))
        var pause: UInt32 = 200
        while true {
            var queued: Int32 = 0
            if ioctl(descriptor, UInt(FIONREAD), &queued) != 0 { return true }
            let needed = (queued == 0 ? 0 : Self.roomTaken(byUnread: Int(queued))) + count + Self.slack
            let grown = min(needed, max(count + Self.slack, Self.largestGrowth))
            if capacity > 0 && capacity < grown {
                // Rounded up to a power of two by the kernel; refused beyond /proc/sys/fs/pipe-max-size, in which
                // case the line waits for the consumer to read, and a line longer than that is written as the
                // consumer reads it, the one case where it can be left cut. Grown for what waits unread only up
                // to `largestGrowth`: a consumer that does not read must not make the kernel hold more and more.
                if fcntl(descriptor, Self.setPipeSize, Int32(clamping: grown)) > 0 {
                    capacity = Int(fcntl(descriptor, Self.getPipeSize))
                }
            }
            if queued == 0 || (capacity > 0 && capacity >= needed) { return true }
            var watched = pollfd(fd: descriptor, events: 0, revents: 0)
            if poll(&watched, 1, 0) > 0 && watched.revents & Int16(POLLERR | POLLHUP) != 0 { return false }
            if stop() { return false }
            usleep(pause)
            pause = min(pause * 2, 20_000)
        }
    }

    /// `poll` with no requested events sleeps until `POLLERR` (a pipe whose read end is closed) or `POLLHUP`
    /// (a socket or terminal hung up); for a regular file only `stopWatching` ends it.
    func waitForClosedConsumer() -> Bool { wakeup.waitForHangUp(of: descriptor) }

    func stopWatching() { wakeup.wake() }

    /// A pipe holds its bytes in pages, and unread bytes may fill their pages partly: FIONREAD gives the
    /// bytes, not the pages. hammock writes at most a page at a time below `atomicWrite`, and Linux starts a
    /// new page only for a write that does not fit in the last one's rest, so two pages in a row hold more
    /// than a page: unread bytes take at most twice their size in room, and a page more at each end.
    static func roomTaken(byUnread bytes: Int) -> Int { 2 * bytes + 2 * page }

    /// Room for a line's first and last pieces, which may each take a page of their own.
    static let slack = 2 * page
    /// The most a pipe is grown to for a line and what waits unread before it (Linux's default
    /// pipe-max-size); a longer line alone gets room for itself.
    static let largestGrowth = 1 << 20
    static let page = 4096
}

/// A pipe that wakes a thread waiting in `poll` on its read end.
///
/// The engine's own (stdin's reader, the accept loop, stdout's watch) are never closed: a `wake()` racing
/// with the end of its owner must write into it, never into a descriptor number that a close would free for
/// someone else, and an engine makes a handful, once. A client's connection makes them too, thousands over
/// a day: its owner closes them (`close`) once nothing can wake them any more.
struct WakeupPipe: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    init() {
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) != 0 { fatalError("hammock: cannot create a pipe: \(String(cString: strerror(errno)))") }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        (readEnd, writeEnd) = (ends[0], ends[1])
    }

    func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Waits in `poll` until `descriptor`'s consumer hangs up (`POLLERR`: a pipe whose read end is closed;
    /// `POLLHUP`: a socket or terminal hung up), true, or until `wake()`, false. `poll` with no requested
    /// events sleeps until one of those; for a regular file only `wake()` ends it.
    func waitForHangUp(of descriptor: Int32) -> Bool {
        var watched = [
            pollfd(fd: descriptor, events: 0, revents: 0),
            pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&watched, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            if watched[1].revents != 0 || ready < 0 { return false }
            return watched[0].revents & Int16(POLLERR | POLLHUP) != 0
        }
    }

    /// Closes both ends. Only for an owner that knows no `wake()` can come after (see above).
    func close() {
        Glibc.close(readEnd)
        Glibc.close(writeEnd)
    }

    /// Empties the pipe, so that the next `poll` sleeps until the next `wake()`.
    func drain() {
        var drained = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &drained, drained.count) > 0 {}
    }
}
