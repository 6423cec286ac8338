import CHammockSystem
import Glibc

/// A process started the one way hammock starts processes: `posix_spawn` (`hammock_spawn`), in a process
/// group of its own, every signal at its default and none blocked, no descriptor inherited but its three,
/// with a pidfd that becomes readable when it ends. The engine starts each plugin's guard this way, the shell
/// plugin each command.
///
/// posix_spawn, not a fork: glibc runs it as a vfork, so the parent's memory is not copied, which a fork of
/// a process holding the Swift runtime costs (about a third of a short command's CPU; `benchmarks/README.md`).
/// The owner reads the pipes and waits for the end the way its model wants: the shell plugin in one epoll
/// thread for every command (`reapIfEnded` when the pidfd is readable), the engine on threads of its own for
/// each plugin (`waitForEnd`). Whoever spawned the process reaps it, once, and closes the descriptors.
public struct ChildProcess: Sendable {
    public let pid: pid_t
    /// Readable once the process has ended (see `reapIfEnded`).
    public let pidfd: Int32
    /// The write end of its stdin, when it was started with `standardInput: .pipe`.
    public let standardInput: Int32?
    /// The read ends of its stdout and stderr.
    public let standardOutput: Int32
    public let standardError: Int32

    public enum Input: Sendable {
        /// /dev/null: a command that reads stdin gets its end at once.
        case null
        /// A pipe whose write end (blocking, close-on-exec) is `standardInput`.
        case pipe
    }

    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signaled(Int32)
    }

    public enum Failure: Error, Sendable, Equatable {
        /// A pipe could not be made (out of descriptors): nothing was started.
        case pipe(SystemCallError)
        /// The spawn failed; for an `exec` or `chdir` that failed in the child, glibc brings back its errno.
        case spawn(SystemCallError)
    }

    /// Starts `path` with `arguments` (`argv`, its first element included) and `environment` (`NAME=value`
    /// entries), in `workingDirectory` when it is not nil. The read ends of stdout and stderr block unless
    /// `nonBlockingOutput` (for an owner that waits for them in epoll); the child's ends always block, as a
    /// program expects of its output. The write end of a stdin pipe blocks unless `nonBlockingInput` (for a
    /// writer that waits for room in `poll` beside a stop descriptor: `Descriptor.writeAll(_:to:stop:)`).
    public static func spawn(
        path: String, arguments: CStringArray, environment: CStringArray, workingDirectory: String? = nil,
        standardInput: Input, nonBlockingInput: Bool = false, nonBlockingOutput: Bool
    ) -> Result<ChildProcess, Failure> {
        var opened: [Int32] = []
        func closeOpened() { for descriptor in opened { close(descriptor) } }
        func makePipe(nonBlockingRead: Bool) -> (read: Int32, write: Int32)? {
            var ends: [Int32] = [-1, -1]
            let made = nonBlockingRead ? hammock_command_pipe(&ends) : hammock_pipe(&ends)
            guard made == 0 else { return nil }
            opened += ends
            return (ends[0], ends[1])
        }
        var input: (read: Int32, write: Int32)?
        if case .pipe = standardInput {
            input = makePipe(nonBlockingRead: false)
            if input == nil { return .failure(.pipe(SystemCallError(code: errno))) }
            // O_NONBLOCK belongs to the write end's open file description: the child's read end still blocks.
            if nonBlockingInput, let input, fcntl(input.write, F_SETFL, O_NONBLOCK) != 0 {
                let error = errno
                closeOpened()
                return .failure(.pipe(SystemCallError(code: error)))
            }
        }
        guard let output = makePipe(nonBlockingRead: nonBlockingOutput), let errors = makePipe(nonBlockingRead: nonBlockingOutput)
        else {
            let error = errno
            closeOpened()
            return .failure(.pipe(SystemCallError(code: error)))
        }
        var pid: pid_t = 0
        var pidfd: Int32 = -1
        let error = hammock_spawn(
            path, arguments.pointers, environment.pointers, workingDirectory, input?.read ?? -1, output.write,
            errors.write, 0, &pid, &pidfd)
        // The child's ends are the child's now.
        if let input { close(input.read) }
        close(output.write)
        close(errors.write)
        guard error == 0 else {
            if let input { close(input.write) }
            close(output.read)
            close(errors.read)
            return .failure(.spawn(SystemCallError(code: error)))
        }
        return .success(
            ChildProcess(
                pid: pid, pidfd: pidfd, standardInput: input?.write, standardOutput: output.read,
                standardError: errors.read))
    }

    /// How the process ended, once it has: it is reaped then, and this must not be called again. Nil while
    /// it runs.
    public func reapIfEnded() throws(SystemCallError) -> Termination? {
        var signaled: Int32 = 0
        var code: Int32 = 0
        switch hammock_reap(pidfd, &signaled, &code) {
        case 1: return signaled == 0 ? .exited(code) : .signaled(code)
        case 0: return nil
        default: throw SystemCallError(code: errno)
        }
    }

    /// Blocks until the process ends (in `poll` on its pidfd, so on a thread of its own), reaps it and
    /// closes the pidfd.
    public func waitForEnd() throws(SystemCallError) -> Termination {
        defer { close(pidfd) }
        while true {
            if let ended = try reapIfEnded() { return ended }
            var ready = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, -1) < 0 && errno != EINTR { throw SystemCallError(code: errno) }
        }
    }
}

/// Strings as a NULL-terminated array of C strings, as `execve` takes `argv` and `envp`, made once and
/// never changed.
///
/// `@unchecked Sendable`: the memory is written in `init` only, then read (by `posix_spawn`) from any task,
/// and freed in `deinit`.
public final class CStringArray: @unchecked Sendable {
    public let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    public init(_ strings: [String]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (index, string) in strings.enumerated() { pointers[index] = strdup(string) }
        pointers[strings.count] = nil
    }

    deinit {
        for index in 0..<count { free(pointers[index]) }
        pointers.deallocate()
    }
}

/// Where programs are found: this process's environment, and the look-up of a program on a `PATH`.
public enum ProcessEnvironment {
    /// This process's environment as it is now.
    public static func current() -> [String: String] {
        var values: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                values[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return values
    }

    /// `NAME=value` entries, as a process receives them.
    public static func entries(_ environment: [String: String]) -> [String] {
        environment.map { "\($0.key)=\($0.value)" }
    }

    /// The first executable regular file named `program` in the directories of `path` (an empty entry is
    /// the working directory), as a shell would find it; the usual directories when `path` is nil.
    public static func findOnPath(_ program: String, path: String?) -> String? {
        for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
            let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
            var info = stat()
            if access(candidate, X_OK) == 0, stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                return candidate
            }
        }
        return nil
    }
}

/// The bytes of a pipe as they come, read on a thread of its own (`name`) until the pipe's end, a read
/// error or the stop; the descriptor is closed then. The reading waits while `maximumWaiting` chunks wait
/// for the consumer, so a writer faster than its reader fills the pipe and blocks, rather than this
/// process's memory. Iterate it once.
///
/// The stop is for a pipe whose end may never come: the process that wrote it has ended, but one it left
/// (escaped from its group, `setsid`) still holds the write end. Once `stopDescriptor` is readable, what
/// the pipe holds at that moment is read without blocking and delivered, and the reading ends: a last line
/// written before the writer died is not lost, and nothing waits for the one that escaped.
public struct PipeChunks: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    private let chunks: AsyncStream<[UInt8]>
    /// How many more chunks the reading thread may hand over before one is taken.
    private let room: LockedCondition<Int>

    /// Throws when the reading thread cannot be made; the descriptor is closed then, and nothing is read.
    public init(
        reading descriptor: Int32, name: String, chunkSize: Int = 64 << 10, maximumWaiting: Int = 4,
        stopDescriptor: Int32? = nil
    ) throws(SystemCallError) {
        let (chunks, delivery) = AsyncStream.makeStream(of: [UInt8].self)
        let room = LockedCondition(maximumWaiting)
        self.chunks = chunks
        self.room = room
        // A consumer that stops (its task cancelled) takes nothing more: the reading goes on without waiting,
        // to the pipe's end, so that neither this thread nor the writer is left blocked.
        delivery.onTermination = { _ in
            room.withLock { $0 = .max / 2 }
            room.signal()
        }
        do throws(SystemCallError) {
            try OwnThread.tryStart(named: name) {
                Self.read(descriptor, chunkSize: chunkSize, stopDescriptor: stopDescriptor) { chunk in
                    room.withLock(when: { $0 > 0 }) { $0 -= 1 }
                    delivery.yield(chunk)
                }
                close(descriptor)
                delivery.finish()
            }
        } catch {
            close(descriptor)
            delivery.finish()
            throw error
        }
    }

    /// Reads `descriptor` to its end, or until `stopDescriptor` is readable and what the pipe held then is
    /// read.
    private static func read(
        _ descriptor: Int32, chunkSize: Int, stopDescriptor: Int32?, deliver: ([UInt8]) -> Void
    ) {
        var buffer = [UInt8](repeating: 0, count: chunkSize)
        /// Reads at most `limit` bytes; nil at the end or on an error, which a pipe cannot be read past.
        func readChunk(limit: Int) -> [UInt8]? {
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, Swift.min(limit, $0.count)) }
                if count < 0 && errno == EINTR { continue }
                return count > 0 ? Array(buffer[..<count]) : nil
            }
        }
        while true {
            if let stopDescriptor {
                var watched = [
                    pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: stopDescriptor, events: Int16(POLLIN), revents: 0),
                ]
                if poll(&watched, 2, -1) < 0 {
                    if errno == EINTR { continue }
                    break
                }
                if watched[1].revents != 0 {
                    // Only what is there now: this process is the pipe's one reader, so these reads never block,
                    // and a writer that goes on writing cannot keep the reading going.
                    var left = Int(hammock_pipe_buffered(descriptor))
                    while left > 0, let chunk = readChunk(limit: left) {
                        left -= chunk.count
                        deliver(chunk)
                    }
                    return
                }
            }
            guard let chunk = readChunk(limit: chunkSize) else { return }
            deliver(chunk)
        }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(chunks: chunks.makeAsyncIterator(), room: room) }

    public struct Iterator: AsyncIteratorProtocol {
        var chunks: AsyncStream<[UInt8]>.Iterator
        let room: LockedCondition<Int>

        public mutating func next() async -> [UInt8]? {
            guard let chunk = await chunks.next() else { return nil }
            room.withLock { $0 += 1 }
            room.signal()
            return chunk
        }
    }
}
