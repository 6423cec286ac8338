import Glibc

/// A socket, its folder or its lock that could not be used: which file, what was being done, and why (the
/// errno's text, or the problem hammock refused on its own).
///
/// `code` keeps the errno so that a caller can branch on it: a client tells "nobody listens" (`ENOENT`,
/// `ECONNREFUSED`: start an engine) from "not allowed" (`EACCES`) from the rest.
public struct SocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file the failure is about: the socket, its folder or its lock (or a descriptor systemd passed).
    public let path: String
    /// What could not be done, a phrase that follows "cannot": "bind the socket", "use the folder".
    public let action: String
    /// The failed system call's errno; nil when hammock refused on its own (see `problem`), unless an errno
    /// says the same (`ENAMETOOLONG` for a path too long for a socket).
    public let code: Int32?
    /// Why hammock refused, when it did on its own; the description says it instead of the errno's text.
    public let problem: String?

    /// A system call failed with `code`.
    public init(path: String, action: String, code: Int32) {
        self.path = path
        self.action = action
        self.code = code
        problem = nil
    }

    /// hammock refuses on its own: nothing failed, but what it found is not safe or not what it needs;
    /// `code`, when given, is the errno that says the same to a caller that branches on it.
    public init(path: String, action: String, problem: String, code: Int32? = nil) {
        self.path = path
        self.action = action
        self.code = code
        self.problem = problem
    }

    /// No engine serves the socket: there is no socket file (`ENOENT`), or nothing listens on it any more
    /// (`ECONNREFUSED`: a stale socket, left by an engine that died). A client may start an engine then.
    public var nobodyListens: Bool { code == ENOENT || code == ECONNREFUSED }

    public var description: String {
        let reason = problem ?? code.map { String(cString: strerror($0)) } ?? "unknown error"
        return "cannot \(action) \(path): \(reason)"
    }
}

/// Where a configuration's engine listens (issue 27).
///
/// One socket per configuration file, so that every consumer of a configuration finds the one engine that
/// serves it, and consumers of two configurations never meet. The name is made from the file's canonical
/// path alone: any consumer computes it without asking anyone.
public enum SocketPath {
    /// The longest path a Unix socket may have: `sun_path` holds 108 bytes, the last one the NUL.
    public static let maximumLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    /// `$XDG_RUNTIME_DIR/hammock/NAME.sock`, or `/tmp/hammock-UID/NAME.sock` when XDG_RUNTIME_DIR is unset
    /// or empty. NAME: the configuration file's base name without extension, reduced to [A-Za-z0-9._-],
    /// then "-" and 16 hex digits of a stable 64-bit hash (FNV-1a) of the canonical path, so two files
    /// named `bar.yaml` in different folders get different sockets. The whole path stays within sun_path
    /// (107 bytes): shorten the base name, never the hash.
    ///
    /// The base name is there for people (`ls`, `ss -x`), the hash for the machine: it alone tells two
    /// configurations apart, so it is never cut. Each byte outside [A-Za-z0-9._-] becomes `_`. When even an
    /// empty base name does not fit (a runtime folder of some 80 bytes), the name is the hash alone, and a
    /// folder too long for that gives a path that `listen` and `connect` refuse with ENAMETOOLONG.
    public static func forConfiguration(canonicalPath: String, environment: [String: String]) -> String {
        let folder: String
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            folder = trimmingTrailingSlashes(runtime) + "/hammock"
        } else {
            folder = "/tmp/hammock-\(getuid())"
        }
        let hash = hexadecimal(fnv1a(canonicalPath))
        let fixed = folder.utf8.count + "/".utf8.count + "-".utf8.count + hash.utf8.count + ".sock".utf8.count
        let room = maximumLength - fixed
        let base = baseName(of: canonicalPath).prefix(max(room, 0))
        return base.isEmpty ? "\(folder)/\(hash).sock" : "\(folder)/\(base)-\(hash).sock"
    }

    /// Makes the socket's folder (mode 0700) if missing. Refuses (a clear error naming the path and what is
    /// wrong) a folder that is a symlink, not a directory, not owned by this user, or open to group/others:
    /// under /tmp another user could have made it first.
    ///
    /// Such a folder could let that user replace the socket by one of theirs (and read what consumers send,
    /// control lines included) or see the states. Only the last component is made: a missing parent (an
    /// `XDG_RUNTIME_DIR` that does not exist) is an error, not something to make.
    public static func prepareFolder(of socketPath: String) throws(SocketError) {
        let folder = parent(of: socketPath)
        let action = "use the socket's folder"
        if mkdir(folder, 0o700) == 0 {
            // The umask may have taken bits away; the folder must be usable by its owner.
            guard chmod(folder, 0o700) == 0 else { throw SocketError(path: folder, action: action, code: errno) }
        } else if errno != EEXIST {
            throw SocketError(path: folder, action: "make the socket's folder", code: errno)
        }
        var status = stat()
        guard lstat(folder, &status) == 0 else { throw SocketError(path: folder, action: action, code: errno) }
        switch status.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK:
            throw SocketError(
                path: folder, action: action,
                problem: "it is a symbolic link; the socket's folder must be a directory of this user's own")
        default:
            throw SocketError(path: folder, action: action, problem: "it is not a directory")
        }
        guard status.st_uid == geteuid() else {
            throw SocketError(
                path: folder, action: action,
                problem: "it belongs to user \(status.st_uid), not to this user (\(geteuid())); another user may have made it")
        }
        let permissions = status.st_mode & 0o7777
        guard permissions & 0o077 == 0 else {
            throw SocketError(
                path: folder, action: action,
                problem: "it is open to group or others (mode \(octal(permissions))); it must be 0700 (chmod 700 it, or remove it)")
        }
    }

    /// The folder that holds `path`: "." for a bare name, "/" for a name at the root.
    static func parent(of path: String) -> String {
        let trimmed = trimmingTrailingSlashes(path)
        guard let slash = trimmed.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        let folder = trimmingTrailingSlashes(String(trimmed[..<slash]))
        return folder.isEmpty ? "/" : folder
    }

    /// The file's name without its folder and its extension (the part from its last dot, when that dot is
    /// not the first character: `.hammock` keeps its name), each byte outside [A-Za-z0-9._-] made `_`.
    static func baseName(of path: String) -> String {
        var name = Array(path.utf8)
        if let slash = name.lastIndex(of: UInt8(ascii: "/")) { name.removeSubrange(...slash) }
        if let dot = name.lastIndex(of: UInt8(ascii: ".")), dot > 0 { name.removeSubrange(dot...) }
        let allowed = { (byte: UInt8) -> Bool in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                return true
            default: return false
            }
        }
        return String(decoding: name.map { allowed($0) ? $0 : UInt8(ascii: "_") }, as: UTF8.self)
    }

    /// FNV-1a, 64 bits, over the UTF-8 bytes: small, stable across runs, builds and machines (Swift's
    /// `Hasher` is seeded per process), and spread well enough for file names.
    static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    private static func hexadecimal(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    private static func trimmingTrailingSlashes(_ path: String) -> String {
        var path = Substring(path)
        while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() }
        return String(path)
    }
}
