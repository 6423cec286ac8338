import Glibc
import HammockSystem
import Testing

/// `EngineLock` against the kernel's `flock`, held by this process and by real other processes (python3,
/// which locks the same way: `fcntl.flock` is `flock(2)`).
@Suite(.timeLimit(.minutes(1)))
struct EngineLockTests {
    /// python3 that locks `argv[1]` as an engine would, says "locked", and sleeps until killed; or, with
    /// `try` as `argv[2]`, tries once without waiting and says "locked" or "busy".
    static let locker = """
        import fcntl, sys, time
        f = open(sys.argv[1], "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (fcntl.LOCK_NB if len(sys.argv) > 2 else 0))
        except BlockingIOError:
            print("busy", flush=True)
            sys.exit(0)
        print("locked", flush=True)
        if len(sys.argv) <= 2:
            time.sleep(60)
        """

    @Test("a second acquire in the same process is nil while the first is held, and succeeds once it is released")
    func secondAcquireInProcess() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let socket = root.file("bar.sock")
        let first = try #require(try EngineLock.acquire(forSocket: socket))
        #expect(first.path == root.file("bar.sock.lock"))
        #expect(fileMode(first.path)?.permissions == 0o600)
        #expect(try EngineLock.acquire(forSocket: socket) == nil)
        first.release()
        // `flock` belongs to the open file description: a child that another test of this process is spawning
        // holds a copy of every descriptor until its exec closes the close-on-exec ones, so the lock can
        // outlive `release` by that moment. Ask again for a while, as a second engine would.
        var again = try EngineLock.acquire(forSocket: socket)
        for _ in 0..<100 where again == nil {
            try await Task.sleep(for: .milliseconds(10))
            again = try EngineLock.acquire(forSocket: socket)
        }
        #expect(again != nil)
        again?.release()
    }

    @Test("another process holding the lock makes acquire nil; once it is SIGKILLed, acquire succeeds")
    func heldByAnotherProcessUntilKilled() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let socket = root.file("bar.sock")
        let holder = try TestChild(["/usr/bin/python3", "-c", Self.locker, EngineLock.lockPath(forSocket: socket)])
        #expect(await holder.nextLine() == "locked")
        #expect(try EngineLock.acquire(forSocket: socket) == nil)
        #expect(try holder.kill() == .signaled(SIGKILL))
        let lock = try EngineLock.acquire(forSocket: socket)
        #expect(lock != nil)
        lock?.release()
    }

    @Test("while this process holds the lock, another process cannot take it")
    func heldHereRefusesAnotherProcess() async throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        let socket = root.file("bar.sock")
        let lock = try #require(try EngineLock.acquire(forSocket: socket))
        let busy = try TestChild(["/usr/bin/python3", "-c", Self.locker, lock.path, "try"])
        #expect(await busy.nextLine() == "busy")
        #expect(try busy.waitForEnd() == .exited(0))
        lock.release()
        let free = try TestChild(["/usr/bin/python3", "-c", Self.locker, lock.path, "try"])
        #expect(await free.nextLine() == "locked")
        #expect(try free.waitForEnd() == .exited(0))
    }

    @Test("the lock file is never followed through a symbolic link")
    func refusesASymlinkedLock() throws {
        let root = try SocketTestFolder()
        defer { root.remove() }
        #expect(symlink(root.file("elsewhere"), root.file("bar.sock.lock")) == 0)
        let error = try #require(throws: SocketError.self) { try EngineLock.acquire(forSocket: root.file("bar.sock")) }
        #expect(error.code == ELOOP)
        #expect(fileMode(root.file("elsewhere")) == nil)
    }
}
