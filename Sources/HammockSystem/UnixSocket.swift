import CHammockSystem
import Glibc
import Synchronization

/// Who is at the other end of a Unix socket, as the kernel recorded it when the connection was made
/// (`SO_PEERCRED`): the engine refuses a connection of another user by its `uid`, which the peer cannot forge.
public struct PeerCredentials: Sendable, Equatable {
    public let pid: Int32
    public let uid: UInt32
    public let gid: UInt32

    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }
}

/// A connection a `UnixListener` accepted. Its descriptor is the caller's, to close.
public struct AcceptedConnection: Sendable {
    /// Close-on-exec and blocking: the engine serves each connection on threads of its own (`LineReader`,
    /// a writer), which block on it.
    public let descriptor: Int32
    /// nil only when the kernel would not say (the connection already gone).
    public let peer: PeerCredentials?
}

/// A listening Unix stream socket.
///
/// One thread accepts (`accept(stopDescriptor:)`, blocking in `poll`), and hands each connection on; the
/// owner stops that thread by making the stop descriptor readable, then calls `close()`. Closing while
/// another thread still waits in `accept` would let the descriptor's number be reused under its `poll`.
public final class UnixListener: Sendable {
    /// The socket's path: the one this listener bound, or the one systemd bound (from `getsockname`; empty
    /// for a socket without a path).
    public let path: String
    /// Whether this listener bound `path` itself, and so removes it at `close()`. A socket systemd passed
    /// is systemd's: its file stays for the next activation.
    public let ownsPath: Bool
    /// The bound file's device and inode: `close()` removes the path only while it is still this socket.
    private let boundFile: (device: UInt64, inode: UInt64)?
    /// -1 once closed.
    private let descriptor: Atomic<Int32>

    private init(descriptor: Int32, path: String, ownsPath: Bool, boundFile: (device: UInt64, inode: UInt64)?) {
        self.descriptor = Atomic(descriptor)
        self.path = path
        self.ownsPath = ownsPath
        self.boundFile = boundFile
    }

    deinit { close() }

    /// Binds `path` (mode 0600: bind under a umask of 0177, or fchmod before bind is impossible on Linux, so set
    /// the umask around bind with care, or chmod right after bind inside the 0700 folder) and listens.
    /// The caller holds the `EngineLock`, so a file already at `path` is a stale socket of a dead engine:
    /// unlinked and replaced. A path that exists and is not a socket is refused, not removed.
    ///
    /// The mode is set by `chmod` right after `bind`, not through the umask: the umask is the process's, and
    /// another thread making a file or a folder meanwhile (the cache's writes) would get it too. Between the
    /// two calls the socket has the umask's mode (0755 under the usual 022, which lets no one else connect,
    /// since a connect needs write permission), inside the folder that `SocketPath.prepareFolder` made 0700.
    /// The listening descriptor is close-on-exec and non-blocking (a connection that goes away between
    /// `poll` and `accept` must not block the accepting thread).
    public static func listen(at path: String, backlog: Int32 = 128) throws(SocketError) -> UnixListener {
        var address = try UnixSocket.address(of: path, action: "listen on")
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & S_IFMT == S_IFSOCK else {
                throw SocketError(
                    path: path, action: "listen on",
                    problem: "a file that is not a socket is there; hammock replaces only a stale socket and leaves this one alone")
            }
            // A stale socket: the caller holds the engine's lock, so no live engine listens on it.
            guard unlink(path) == 0 || errno == ENOENT else {
                throw SocketError(path: path, action: "remove the stale socket", code: errno)
            }
        } else if errno != ENOENT {
            throw SocketError(path: path, action: "listen on", code: errno)
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(path: path, action: "make a socket for", code: errno) }
        func fail(_ action: String, unlinking: Bool) -> SocketError {
            let error = SocketError(path: path, action: action, code: errno)
            Glibc.close(descriptor)
            if unlinking { unlink(path) }
            return error
        }
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw fail("bind the socket", unlinking: false) }
        guard chmod(path, 0o600) == 0 else { throw fail("make the socket private (chmod 600)", unlinking: true) }
        guard Glibc.listen(descriptor, backlog) == 0 else { throw fail("listen on", unlinking: true) }
        guard setNonBlocking(descriptor) else { throw fail("make non-blocking the listener of", unlinking: true) }
        var made = stat()
        guard lstat(path, &made) == 0 else { throw fail("listen on", unlinking: false) }
        return UnixListener(
            descriptor: descriptor, path: path, ownsPath: true,
            boundFile: (UInt64(made.st_dev), UInt64(made.st_ino)))
    }

    /// systemd socket activation: when LISTEN_PID is this process and LISTEN_FDS >= 1, the listener on
    /// descriptor 3 (checked to be a listening AF_UNIX stream socket); unsets the variables so children do not
    /// inherit them. nil when not socket-activated.
    ///
    /// As `sd_listen_fds(1)` does, without libsystemd: the variables (`LISTEN_FDNAMES` too) are removed
    /// whether or not they were this process's, and every passed descriptor is made close-on-exec. Only the
    /// first is used (a `.socket` unit for hammock has one `ListenStream=`); the others stay open, unused.
    public static func fromSystemd() throws(SocketError) -> UnixListener? {
        try fromSystemd(firstDescriptor: 3)
    }

    /// `fromSystemd()`, with the first passed descriptor at `firstDescriptor` instead of systemd's 3: for
    /// tests, which must not take descriptor 3 from under the test runner's other threads.
    static func fromSystemd(firstDescriptor: Int32) throws(SocketError) -> UnixListener? {
        let listenPID = getenv("LISTEN_PID").map { String(cString: $0) }
        let listenFDs = getenv("LISTEN_FDS").map { String(cString: $0) }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        guard let listenPID, Int32(listenPID) == getpid(), let listenFDs, let count = Int32(listenFDs), count >= 1
        else { return nil }
        for offset in 0..<count { _ = fcntl(firstDescriptor + offset, F_SETFD, FD_CLOEXEC) }
        let descriptor = firstDescriptor
        let name = "descriptor \(descriptor) from systemd (LISTEN_FDS=\(count))"
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw SocketError(path: name, action: "listen on", code: errno) }
        guard status.st_mode & S_IFMT == S_IFSOCK, option(descriptor, SO_DOMAIN) == AF_UNIX,
            option(descriptor, SO_TYPE) == Int32(SOCK_STREAM.rawValue), option(descriptor, SO_ACCEPTCONN) == 1
        else {
            throw SocketError(
                path: name, action: "listen on",
                problem: "it is not a listening Unix stream socket (the .socket unit needs ListenStream= with a path)")
        }
        guard setNonBlocking(descriptor) else { throw SocketError(path: name, action: "listen on", code: errno) }
        return UnixListener(descriptor: descriptor, path: boundPath(of: descriptor), ownsPath: false, boundFile: nil)
    }

    /// Waits for a connection or for `stopDescriptor` to be readable (nil then). The accepted descriptor is
    /// close-on-exec and blocking, with its peer's credentials (SO_PEERCRED).
    ///
    /// Also nil once the listener is closed. A connection that went away before it was taken is skipped.
    /// When the process (or the system) is out of descriptors, the connection waits in the backlog and this
    /// tries again every 100 ms, in `poll` on `stopDescriptor`: the listener stays readable meanwhile, and
    /// retrying at once would spin a core.
    public func accept(stopDescriptor: Int32) -> AcceptedConnection? {
        let listening = descriptor.load(ordering: .acquiring)
        guard listening >= 0 else { return nil }
        while true {
            var watched = [
                pollfd(fd: listening, events: Int16(POLLIN), revents: 0),
                pollfd(fd: stopDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&watched, 2, -1) < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if watched[1].revents != 0 || watched[0].revents & Int16(POLLNVAL) != 0 { return nil }
            let accepted = hammock_accept(listening)
            if accepted >= 0 {
                return AcceptedConnection(descriptor: accepted, peer: UnixSocket.peerCredentials(of: accepted))
            }
            switch errno {
            case EAGAIN, EWOULDBLOCK, EINTR, ECONNABORTED, EPROTO:
                continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                var stop = pollfd(fd: stopDescriptor, events: Int16(POLLIN), revents: 0)
                if poll(&stop, 1, 100) > 0 { return nil }
            default:
                return nil  // EBADF, EINVAL: the listener is closed or no longer listens
            }
        }
    }

    /// Closes the listening descriptor and unlinks the path it bound (not one systemd owns).
    ///
    /// The path is removed first, and only while it is still the socket this listener bound: a client that
    /// comes meanwhile finds no socket (`ENOENT`), never one nobody will accept on. A second call does
    /// nothing.
    public func close() {
        let listening = descriptor.exchange(-1, ordering: .acquiringAndReleasing)
        guard listening >= 0 else { return }
        if ownsPath, let boundFile {
            var status = stat()
            if lstat(path, &status) == 0, UInt64(status.st_dev) == boundFile.device,
                UInt64(status.st_ino) == boundFile.inode
            {
                unlink(path)
            }
        }
        Glibc.close(listening)
    }

    private static func setNonBlocking(_ descriptor: Int32) -> Bool {
        let flags = fcntl(descriptor, F_GETFL)
        return flags >= 0 && fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0
    }

    private static func option(_ descriptor: Int32, _ name: Int32) -> Int32? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
    }

    private static func boundPath(of descriptor: Int32) -> String {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0 else { return "" }
        let pathLength = Int(length) - MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        guard pathLength > 0 else { return "" }
        return withUnsafeBytes(of: &address.sun_path) { bytes in
            let used = bytes.prefix(pathLength)
            // An abstract socket's name starts with a NUL; a path's ends with one.
            guard used.first != 0 else { return "@" + String(decoding: used.dropFirst(), as: UTF8.self) }
            return String(decoding: used.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}

/// The client's side of a Unix socket, and what both sides set on a connection.
public enum UnixSocket {
    /// Connects (blocking, close-on-exec). Errors keep errno so a caller can tell "nobody listens"
    /// (ENOENT, ECONNREFUSED: start an engine) from "not allowed" (EACCES) from the rest.
    ///
    /// A connect waits while the listener's backlog is full (an engine that accepts nothing: stopped, or
    /// hung); with `timeout` it gives up after that long with `EAGAIN` (the kernel bounds the wait by the
    /// socket's send timeout, which is reset afterwards).
    public static func connect(to path: String, timeout: Duration? = nil) throws(SocketError) -> Int32 {
        var address = try address(of: path, action: "connect to")
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(path: path, action: "make a socket to connect to", code: errno) }
        if let timeout { setSendTimeout(descriptor, timeout) }
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected != 0 {
            var code = errno
            // A signal cut the wait short; the connection goes on being made, and is ready once writable.
            if code == EINTR { code = finishConnecting(descriptor) }
            if code != 0 {
                Glibc.close(descriptor)
                throw SocketError(path: path, action: "connect to the socket", code: code)
            }
        }
        if timeout != nil { setSendTimeout(descriptor, .zero) }
        return descriptor
    }

    /// The peer of the connected socket `descriptor`, as the kernel recorded it at connect (`SO_PEERCRED`);
    /// nil when the kernel would not say.
    public static func peerCredentials(of descriptor: Int32) -> PeerCredentials? {
        var pid: Int32 = 0
        var uid: UInt32 = 0
        var gid: UInt32 = 0
        guard hammock_peer_credentials(descriptor, &pid, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(pid: pid, uid: uid, gid: gid)
    }

    /// SO_SNDTIMEO: a write that cannot go on for this long fails with EAGAIN (how a refused client's last
    /// line, and a client's own control lines, give up on a peer that reads nothing).
    ///
    /// `.zero` waits without limit again. A timeout under a microsecond is a microsecond: zero would mean
    /// no limit.
    public static func setSendTimeout(_ descriptor: Int32, _ timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        var microseconds = attoseconds / 1_000_000_000_000
        if seconds == 0 && microseconds == 0 && attoseconds > 0 { microseconds = 1 }
        var value = timeval(tv_sec: Int(max(seconds, 0)), tv_usec: Int(max(microseconds, 0)))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes all of `bytes` to the connected socket `descriptor`, for a writer that gives up on a reader
    /// that takes nothing: `EINTR` is retried, and every other failure is thrown at once, `EAGAIN` included
    /// (the send timeout ran out: `setSendTimeout`), and `EPIPE` (the peer is gone) without a `SIGPIPE`
    /// (`MSG_NOSIGNAL`), whatever the process does with that signal.
    ///
    /// Not `Descriptor.writeAll`: that one takes `EAGAIN` for a descriptor someone made non-blocking and
    /// waits in `poll` for room without a limit, which would undo the timeout. A part of `bytes` may have
    /// gone before a failure: the connection is the writer's to drop then, not to write on.
    public static func sendAll(_ bytes: [UInt8], to descriptor: Int32) throws(SystemCallError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent >= 0 {
                offset += sent
            } else if errno != EINTR {
                throw SystemCallError(code: errno)
            }
        }
    }

    /// How much the socket `descriptor` has sent that its peer has not read yet (ioctl SIOCOUTQ; for a Unix
    /// socket, the memory the queued data takes, a little more than its bytes), or nil when the kernel
    /// would not say. For a server that watches a client fall behind before its writes block.
    public static func unsentBytes(of descriptor: Int32) -> Int? {
        let count = hammock_socket_unsent(descriptor)
        return count >= 0 ? Int(count) : nil
    }

    /// `sockaddr_un` for `path`, or an error when it cannot be one: empty, holding a NUL, or longer than
    /// `SocketPath.maximumLength` (the kernel would cut it, and bind or connect a different name).
    static func address(of path: String, action: String) throws(SocketError) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, !bytes.contains(0) else {
            throw SocketError(path: path, action: action, problem: "a socket's path must be a non-empty file name")
        }
        guard bytes.count <= SocketPath.maximumLength else {
            throw SocketError(
                path: path, action: action,
                problem: "the path has \(bytes.count) bytes; a Unix socket's may have at most \(SocketPath.maximumLength)",
                code: ENAMETOOLONG)
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return address
    }

    /// Waits for a connect that a signal interrupted to finish; its outcome, as an errno (0: connected).
    private static func finishConnecting(_ descriptor: Int32) -> Int32 {
        var ready = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
        while poll(&ready, 1, -1) < 0 {
            if errno != EINTR { return errno }
        }
        var code: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &code, &length) == 0 else { return errno }
        return code
    }
}
