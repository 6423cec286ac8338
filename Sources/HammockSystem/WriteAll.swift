import CHammockSystem
import Glibc

/// A failed system call, by its `errno`: the caller decides what it means (`EPIPE`: the reader is gone).
public struct SystemCallError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: Int32

    public init(code: Int32) { self.code = code }

    public var description: String { String(cString: strerror(code)) }
}

/// Writing to a file descriptor, with one policy for every writer of hammock (engine, plugins, client):
///
/// - `EINTR`: the write is made again; a signal handler never cuts a write short.
/// - `EAGAIN` (a descriptor someone else made non-blocking, such as a terminal or a pipe shared with a
///   parent): the writer sleeps in `poll` until there is room, so a full pipe costs no CPU; it never spins.
/// - any other error (`EPIPE` when the reader is gone): thrown as `SystemCallError`, at once, and the caller
///   decides (drop the rest, stop its writer, exit).
///
/// - a `stop` descriptor, when one is given, ends a wait for room once it is readable: the write throws
///   `ECANCELED` then. Only a non-blocking `descriptor` waits in `poll` (a blocking one waits in `write`,
///   where nothing but the reader can end the wait): a plugin's stdin, whose writer stops when the plugin's
///   guard has ended though a process that escaped it still holds the pipe without reading.
///
/// `writeAll` goes on from where a short write stopped, so the loop never reorders or cuts bytes: a line
/// handed over whole arrives whole unless the descriptor fails, and a write of at most `PIPE_BUF` bytes to a
/// pipe goes in one piece, as the kernel promises.
public enum Descriptor {
    /// Writes some of `bytes` (at least one byte when there are any), blocking as long as there is no room;
    /// returns how many went.
    public static func writeSome(
        _ bytes: UnsafeRawBufferPointer, to descriptor: Int32, stop: Int32? = nil
    ) throws(SystemCallError) -> Int {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return 0 }
        while true {
            let written = write(descriptor, base, bytes.count)
            if written >= 0 { return written }
            let code = errno
            switch code {
            case EINTR: continue
            case EAGAIN: try waitForRoom(descriptor, stop: stop)
            default: throw SystemCallError(code: code)
            }
        }
    }

    /// Writes all of `bytes`, blocking as long as there is no room.
    public static func writeAll(
        _ bytes: UnsafeRawBufferPointer, to descriptor: Int32, stop: Int32? = nil
    ) throws(SystemCallError) {
        var offset = 0
        while offset < bytes.count {
            offset += try writeSome(UnsafeRawBufferPointer(rebasing: bytes[offset...]), to: descriptor, stop: stop)
        }
    }

    /// Writes all of `bytes`, blocking as long as there is no room.
    public static func writeAll(_ bytes: [UInt8], to descriptor: Int32, stop: Int32? = nil) throws(SystemCallError) {
        // `withUnsafeBytes` rethrows untyped errors: the typed one goes through a `Result`.
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemCallError) in try writeAll(raw, to: descriptor, stop: stop) }
        }
        try result.get()
    }

    /// Writes all of `bytes`; at the first failure (`EPIPE`: nobody reads any more) the rest is dropped, since
    /// there is no one left to tell. For last words and logs that must never stop their writer: a plugin's log
    /// line, hammock's own messages before the engine's stderr exists.
    public static func writeOrDrop(_ bytes: [UInt8], to descriptor: Int32) {
        do { try writeAll(bytes, to: descriptor) } catch { return }
    }

    /// Writes all of `bytes` with `SIGPIPE` blocked on this thread, for a library that must not change the
    /// app's signal disposition: writing to a pipe whose reader is gone raises `SIGPIPE`, whose default ends
    /// the process. One the write raised (it is sent to the writing thread) is taken off before the mask is
    /// restored, so the write just fails with `EPIPE`.
    public static func writeAllWithoutBrokenPipeSignal(
        _ bytes: [UInt8], to descriptor: Int32, stop: Int32? = nil
    ) throws(SystemCallError) {
        var brokenPipe = sigset_t()
        sigemptyset(&brokenPipe)
        sigaddset(&brokenPipe, SIGPIPE)
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &brokenPipe, &previousMask)
        defer {
            // Only when it was not blocked before: one already pending then was not ours to take.
            if sigismember(&previousMask, SIGPIPE) == 0 {
                var noWait = timespec()
                while sigtimedwait(&brokenPipe, nil, &noWait) == SIGPIPE {}
            }
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        }
        try writeAll(bytes, to: descriptor, stop: stop)
    }

    /// Sleeps until `descriptor` can take a write, or has an error or a hang-up (the write made next then
    /// fails with the reason); throws `ECANCELED` once `stop` is readable.
    private static func waitForRoom(_ descriptor: Int32, stop: Int32?) throws(SystemCallError) {
        var watched = [
            pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0),
            pollfd(fd: stop ?? -1, events: Int16(POLLIN), revents: 0),
        ]
        while poll(&watched, 2, -1) < 0 {
            let code = errno
            guard code == EINTR else { throw SystemCallError(code: code) }
        }
        if watched[1].revents != 0 { throw SystemCallError(code: ECANCELED) }
    }
}

extension Descriptor {
    /// A pipe, both ends blocking and close-on-exec from the moment it is made (`hammock_pipe`: `pipe2` with
    /// `O_CLOEXEC` in one call), so that a process another thread spawns meanwhile cannot inherit an end and
    /// keep the pipe from reaching its end.
    public static func makePipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard hammock_pipe(&ends) == 0 else { throw SystemCallError(code: errno) }
        return (ends[0], ends[1])
    }
}
