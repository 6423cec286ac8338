import Glibc
import Synchronization

/// Held by the one engine of a socket for its whole life: `flock(LOCK_EX|LOCK_NB)` on `SOCKET.lock` (0600).
/// The kernel lets go when the engine dies (even by SIGKILL), so a stale socket is one whose lock is free.
///
/// The lock, not the socket, says who serves: a socket file outlives a killed engine, and a `connect` that
/// is refused cannot tell a dead engine from one that is starting. Two `hammock serve` (or two attaches
/// racing to start one) both try the lock; one gets it and binds, the other learns that an engine serves
/// already. The holder may then replace whatever socket file it finds (`UnixListener.listen`).
///
/// `flock` belongs to an open file description, not to a process: each `acquire` opens the file anew, so a
/// second `acquire` in the same process is refused while the first is held, as another process's is. The
/// descriptor is close-on-exec, so a plugin or command the engine starts does not keep the lock alive after
/// the engine. The lock file is never removed: a process that unlinked it could let a newcomer lock a fresh
/// file while another still holds the old one.
public final class EngineLock: Sendable {
    /// The lock file's path: the socket's, with `.lock` added.
    public let path: String
    /// -1 once released.
    private let descriptor: Atomic<Int32>

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = Atomic(descriptor)
    }

    deinit { release() }

    /// The lock file of the socket at `socketPath`.
    public static func lockPath(forSocket socketPath: String) -> String { socketPath + ".lock" }

    /// nil when another live process holds it (an engine serves this socket already).
    ///
    /// Throws when the lock file cannot be opened or made (the folder is missing or not writable) or is a
    /// symbolic link (`O_NOFOLLOW`: the folder is this user's own, see `SocketPath.prepareFolder`, but a
    /// link would be someone's trap).
    public static func acquire(forSocket path: String) throws(SocketError) -> EngineLock? {
        let lockPath = lockPath(forSocket: path)
        let descriptor = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw SocketError(path: lockPath, action: "open the engine's lock", code: errno) }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            close(descriptor)
            if code == EWOULDBLOCK { return nil }
            throw SocketError(path: lockPath, action: "lock the engine's lock", code: code)
        }
        return EngineLock(path: lockPath, descriptor: descriptor)
    }

    /// Lets go of the lock (closing its descriptor): another engine may start for the socket from now on.
    /// The owner calls it after it has closed its listener; it is called by `deinit` too, and a second call
    /// does nothing.
    public func release() {
        let descriptor = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        if descriptor >= 0 { close(descriptor) }
    }
}
