import Glibc
import Testing

@testable import HammockSystem
import HammockTestSupport

/// `UnixListener` and `UnixSocket` with real sockets in a real folder.
@Suite(.timeLimit(.minutes(1)))
struct UnixSocketTests {
    @Test("listen makes a 0600 socket in the 0700 folder; a client connects; close removes the file")
    func privateSocket() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let path = root.file("hammock/bar.sock")
        try SocketPath.prepareFolder(of: path)
        let listener = try UnixListener.listen(at: path)
        #expect(fileMode(path)?.type == S_IFSOCK)
        #expect(fileMode(path)?.permissions == 0o600)
        #expect(fileMode(root.file("hammock"))?.permissions == 0o700)
        #expect(listener.path == path && listener.ownsPath)
        let client = try UnixSocket.connect(to: path)
        close(client)
        listener.close()
        #expect(fileMode(path) == nil, "the socket file is gone")
        listener.close()
    }

    /// What an engine killed by SIGKILL leaves: the file of a bound socket, with nothing behind it.
    @Test("a stale socket refuses connections as nobody listening, and listen replaces it")
    func staleSocketIsReplaced() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let path = root.file("bar.sock")
        let dead = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = try UnixSocket.address(of: path, action: "test")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(dead, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(bound == 0)
        #expect(Glibc.listen(dead, 1) == 0)
        close(dead)
        #expect(fileMode(path)?.type == S_IFSOCK)
        let refused = try #require(throws: SocketError.self) { try UnixSocket.connect(to: path) }
        #expect(refused.code == ECONNREFUSED && refused.nobodyListens, "\(refused)")

        let listener = try UnixListener.listen(at: path)
        defer { listener.close() }
        let client = try UnixSocket.connect(to: path)
        close(client)
    }

    @Test("a regular file at the path is refused and left as it was")
    func regularFileIsLeft() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let path = root.file("bar.sock")
        let file = open(path, O_CREAT | O_WRONLY, 0o600)
        #expect(write(file, "keep me", 7) == 7)
        close(file)
        let error = try #require(throws: SocketError.self) { try UnixListener.listen(at: path) }
        #expect(error.path == path)
        #expect(error.description.contains("not a socket"), "\(error)")
        #expect(fileMode(path)?.type == S_IFREG)
        var bytes = [UInt8](repeating: 0, count: 16)
        let reading = open(path, O_RDONLY)
        let count = read(reading, &bytes, 16)
        close(reading)
        #expect(String(decoding: bytes.prefix(max(count, 0)), as: UTF8.self) == "keep me")
    }

    @Test("nobody there is ENOENT, a path too long for a socket is ENAMETOOLONG, each naming the path")
    func connectErrorsKeepErrno() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let missing = try #require(throws: SocketError.self) { try UnixSocket.connect(to: root.file("absent.sock")) }
        #expect(missing.code == ENOENT && missing.nobodyListens)
        #expect(missing.description.contains(root.file("absent.sock")), "\(missing)")
        let long = root.file(String(repeating: "x", count: 120) + ".sock")
        let tooLong = try #require(throws: SocketError.self) { try UnixSocket.connect(to: long) }
        #expect(tooLong.code == ENAMETOOLONG && !tooLong.nobodyListens)
        #expect(throws: SocketError.self) { try UnixListener.listen(at: long) }
        #expect(fileMode(long) == nil)
    }

    @Test("accept waits, and returns nil once the stop descriptor is written")
    func acceptStops() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let listener = try UnixListener.listen(at: root.file("bar.sock"))
        defer { listener.close() }
        let stop = try Descriptor.makePipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        // nil: still waiting; .some(nil): returned without a connection.
        let result = LockedCondition<Int32??>(nil)
        OwnThread.start(named: "test.accept") {
            let connection = listener.accept(stopDescriptor: stop.read)
            result.withLock { $0 = .some(connection?.descriptor) }
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(result.withLock { $0 } == nil, "accept returned before anything happened")
        #expect(write(stop.write, "x", 1) == 1)
        // Bounded: an accept that missed the stop would wait for ever, and the test with it.
        let deadline = ContinuousClock.now + .seconds(10)
        while result.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(result.withLock { $0 } == .some(nil))
    }

    @Test("an accepted connection is close-on-exec and blocking, carries this process's pid and uid, and carries bytes")
    func acceptedConnection() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let listener = try UnixListener.listen(at: root.file("bar.sock"))
        defer { listener.close() }
        let stop = try Descriptor.makePipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        let client = try UnixSocket.connect(to: root.file("bar.sock"))
        defer { close(client) }
        #expect(fcntl(client, F_GETFD) & FD_CLOEXEC != 0)
        let connection = try #require(listener.accept(stopDescriptor: stop.read))
        defer { close(connection.descriptor) }
        #expect(connection.peer == PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()))
        #expect(UnixSocket.peerCredentials(of: client) == PeerCredentials(pid: getpid(), uid: getuid(), gid: getgid()))
        #expect(fcntl(connection.descriptor, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(connection.descriptor, F_GETFL) & O_NONBLOCK == 0)
        try Descriptor.writeAll(Array("hello\n".utf8), to: client)
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = read(connection.descriptor, &bytes, 16)
        #expect(String(decoding: bytes.prefix(max(count, 0)), as: UTF8.self) == "hello\n")
    }

    @Test("close leaves a path that is no longer its socket (another file took its place)")
    func closeSparesAReplacedPath() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let path = root.file("bar.sock")
        let listener = try UnixListener.listen(at: path)
        #expect(unlink(path) == 0)
        let file = open(path, O_CREAT | O_WRONLY, 0o600)
        close(file)
        listener.close()
        #expect(fileMode(path)?.type == S_IFREG)
    }

    /// How a client learns that an engine is there but takes nobody (stopped, or hung): a connect to a full
    /// backlog waits, and gives up after its timeout.
    @Test("a connect to a full backlog gives up after its timeout with EAGAIN")
    func connectTimesOut() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let path = root.file("bar.sock")
        let listener = try UnixListener.listen(at: path, backlog: 0)
        defer { listener.close() }
        // A connect that waits blocks its thread: one of its own, not one of the cooperative pool's.
        let (waiting, failure, waited) = try await onOwnThread("the connects to a full backlog") {
            () -> ([Int32], SocketError?, Duration) in
            var waiting: [Int32] = []
            let start = ContinuousClock.now
            var failure: SocketError?
            for _ in 0..<4 {
                do throws(SocketError) {
                    waiting.append(try UnixSocket.connect(to: path, timeout: .milliseconds(200)))
                } catch {
                    failure = error
                    break
                }
            }
            return (waiting, failure, ContinuousClock.now - start)
        }
        defer { for descriptor in waiting { close(descriptor) } }
        #expect(failure?.code == EAGAIN, "\(String(describing: failure))")
        #expect(waited >= .milliseconds(190) && waited < .seconds(10), "waited \(waited)")
    }

    @Test("with setSendTimeout, sendAll to a client that reads nothing fails with EAGAIN after the timeout")
    func sendTimeout() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let listener = try UnixListener.listen(at: root.file("bar.sock"))
        defer { listener.close() }
        let stop = try Descriptor.makePipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        let client = try UnixSocket.connect(to: root.file("bar.sock"))
        defer { close(client) }
        let connection = try #require(listener.accept(stopDescriptor: stop.read))
        defer { close(connection.descriptor) }
        UnixSocket.setSendTimeout(connection.descriptor, .milliseconds(100))
        let chunk = [UInt8](repeating: 0x61, count: 1 << 16)
        // A send that waits blocks its thread: one of its own, not one of the cooperative pool's.
        let (failure, waited) = try await onOwnThread("the sends to a client that reads nothing") {
            [descriptor = connection.descriptor] () -> (SystemCallError?, Duration) in
            let start = ContinuousClock.now
            var failure: SystemCallError?
            for _ in 0..<1000 {
                do throws(SystemCallError) {
                    try UnixSocket.sendAll(chunk, to: descriptor)
                } catch {
                    failure = error
                    break
                }
            }
            return (failure, ContinuousClock.now - start)
        }
        #expect(failure?.code == EAGAIN)
        #expect(waited >= .milliseconds(90) && waited < .seconds(10), "waited \(waited)")
        #expect((UnixSocket.unsentBytes(of: connection.descriptor) ?? 0) > 0, "the client has read nothing")
    }

    @Test("sendAll to a peer that is gone fails with EPIPE, without a SIGPIPE; unsentBytes falls as the peer reads")
    func sendToAGonePeer() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let listener = try UnixListener.listen(at: root.file("bar.sock"))
        defer { listener.close() }
        let stop = try Descriptor.makePipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        let client = try UnixSocket.connect(to: root.file("bar.sock"))
        let connection = try #require(listener.accept(stopDescriptor: stop.read))
        defer { close(connection.descriptor) }
        #expect(UnixSocket.unsentBytes(of: connection.descriptor) == 0)
        try UnixSocket.sendAll(Array("hello\n".utf8), to: connection.descriptor)
        #expect((UnixSocket.unsentBytes(of: connection.descriptor) ?? 0) > 0)
        var bytes = [UInt8](repeating: 0, count: 16)
        #expect(read(client, &bytes, 16) == 6)
        #expect(UnixSocket.unsentBytes(of: connection.descriptor) == 0)
        close(client)
        // SIGPIPE's default would end the test process here. A process another test of this process spawns at
        // this moment holds a copy of `client` until its exec closes it (close-on-exec), and the peer is gone
        // only then: the send is tried again until it fails, for at most 10 s.
        var failure: SystemCallError?
        let deadline = ContinuousClock.now + .seconds(10)
        // Sent once more after the deadline: a sleep may end long after it when the pool is busy.
        while true {
            do throws(SystemCallError) {
                try UnixSocket.sendAll(Array("more\n".utf8), to: connection.descriptor)
            } catch {
                failure = error
                break
            }
            guard ContinuousClock.now < deadline else { break }
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(failure == SystemCallError(code: EPIPE))
    }
}
