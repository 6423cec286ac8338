import Glibc
import HammockSystem
import Testing

/// Another user against the engine's socket: a real client (python3) run as `nobody` through `setpriv`. The
/// tests run as root, which the kernel's permission checks let through, so the other user must be a
/// process of its own.
@Suite(
    .timeLimit(.minutes(1)),
    .enabled(
        if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0 && access("/usr/bin/python3", X_OK) == 0,
        "needs root, setpriv and /usr/bin/python3"))
struct SocketOtherUserTests {
    /// Connects to `argv[1]` and prints "connected" (then waits for the server to close), or the errno's name.
    static let client = """
        import errno, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sys.argv[1])
        except OSError as e:
            print(errno.errorcode.get(e.errno, str(e.errno)), flush=True)
            sys.exit(0)
        print("connected", flush=True)
        s.recv(1)
        """

    static func clientAsNobody(_ path: String) throws -> TestChild {
        try TestChild([
            "/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", client,
            path,
        ])
    }

    @Test("another user cannot connect to the 0600 socket, in its 0700 folder or in one opened to all")
    func refusedByTheModes() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        // The test's folder sits in /tmp (1777); `nobody` may look into it only when the test opens it.
        #expect(chmod(root.path, 0o755) == 0)
        let path = root.file("hammock/bar.sock")
        try SocketPath.prepareFolder(of: path)
        let listener = try UnixListener.listen(at: path)
        defer { listener.close() }

        let throughPrivateFolder = try Self.clientAsNobody(path)
        #expect(await throughPrivateFolder.nextLine() == "EACCES")
        // Killed, not waited for: a client that did connect would wait for the server.
        _ = try throughPrivateFolder.kill()

        // Only the socket's own mode stands in the way now.
        #expect(chmod(root.file("hammock"), 0o755) == 0)
        let throughOpenFolder = try Self.clientAsNobody(path)
        #expect(await throughOpenFolder.nextLine() == "EACCES")
        _ = try throughOpenFolder.kill()
    }

    /// Modes are the first guard; the peer's credentials the second, which the engine checks on every
    /// connection in case a user opened the socket up.
    @Test("a socket opened to everyone lets the other user connect, and accept reports its uid and gid")
    func peerCredentialsOfAnotherUser() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        #expect(chmod(root.path, 0o755) == 0)
        let path = root.file("bar.sock")
        let listener = try UnixListener.listen(at: path)
        defer { listener.close() }
        #expect(chmod(path, 0o666) == 0)
        let stop = try Descriptor.makePipe()
        defer {
            close(stop.read)
            close(stop.write)
        }
        let nobody = try Self.clientAsNobody(path)
        #expect(await nobody.nextLine() == "connected")
        let connection = try #require(listener.accept(stopDescriptor: stop.read))
        #expect(connection.peer?.uid == 65534)
        #expect(connection.peer?.gid == 65534)
        // setpriv execs python3 in its own process: the peer is the child itself.
        #expect(connection.peer?.pid == nobody.process.pid)
        close(connection.descriptor)
        #expect(try nobody.waitForEnd() == .exited(0))
    }
}
