import Glibc
import Testing

@testable import HammockSystem

/// `UnixListener.fromSystemd` with a real listening socket and the real environment variables of systemd's
/// socket activation (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`).
///
/// In-process, with the passed socket at a descriptor the test owns rather than at 3 (`fromSystemd` is
/// `fromSystemd(firstDescriptor: 3)`): descriptor 3 of the test process belongs to the test runner, whose
/// other threads go on using it while a test runs. Serialized: the variables are the process's.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct SystemdActivationTests {
    /// A listening Unix stream socket at `path`, as systemd makes it for `ListenStream=`.
    static func listeningSocket(at path: String, listens: Bool = true) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = try UnixSocket.address(of: path, action: "test")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        if listens { try #require(Glibc.listen(descriptor, 8) == 0) }
        return descriptor
    }

    static func activate(pid: Int32 = getpid(), count: String = "1") {
        setenv("LISTEN_PID", "\(pid)", 1)
        setenv("LISTEN_FDS", count, 1)
        setenv("LISTEN_FDNAMES", "hammock", 1)
    }

    static var variablesAreGone: Bool {
        getenv("LISTEN_PID") == nil && getenv("LISTEN_FDS") == nil && getenv("LISTEN_FDNAMES") == nil
    }

    @Test("socket-activated: the passed socket listens, close-on-exec; the variables are gone; close leaves systemd's file")
    func activated() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let path = root.file("bar.sock")
        let passed = try Self.listeningSocket(at: path)
        #expect(fcntl(passed, F_GETFD) & FD_CLOEXEC == 0)
        Self.activate()
        let listener = try #require(try UnixListener.fromSystemd(firstDescriptor: passed))
        #expect(Self.variablesAreGone)
        #expect(listener.path == path)
        #expect(!listener.ownsPath)
        #expect(fcntl(passed, F_GETFD) & FD_CLOEXEC != 0, "a plugin the engine starts must not inherit it")

        let stop = try Descriptor.makePipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        let client = try UnixSocket.connect(to: path)
        defer { close(client) }
        let connection = try #require(listener.accept(stopDescriptor: stop.read))
        #expect(connection.peer?.pid == getpid())
        close(connection.descriptor)
        listener.close()
        #expect(fileMode(path)?.type == S_IFSOCK, "the socket file is systemd's")
    }

    @Test("not socket-activated: nil, whether the variables are missing or name another process, and they are gone")
    func notActivated() throws {
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        #expect(try UnixListener.fromSystemd() == nil)
        Self.activate(pid: getppid())
        #expect(try UnixListener.fromSystemd() == nil)
        #expect(Self.variablesAreGone)
        Self.activate(count: "0")
        #expect(try UnixListener.fromSystemd() == nil)
        #expect(Self.variablesAreGone)
    }

    @Test("a passed descriptor that is not a listening Unix stream socket is refused, saying what systemd should pass")
    func notAListener() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let bound = try Self.listeningSocket(at: root.file("bar.sock"), listens: false)
        defer { close(bound) }
        Self.activate()
        let error = try #require(throws: SocketError.self) { try UnixListener.fromSystemd(firstDescriptor: bound) }
        #expect(error.description.contains("not a listening Unix stream socket"), "\(error)")
        #expect(Self.variablesAreGone)

        let pipe = try Descriptor.makePipe()
        defer {
            close(pipe.read)
            close(pipe.write)
        }
        Self.activate()
        #expect(throws: SocketError.self) { try UnixListener.fromSystemd(firstDescriptor: pipe.read) }
    }
}
