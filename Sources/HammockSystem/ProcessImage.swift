import Glibc

/// Replacing the running program (`execv`): what `hammock attach` does once its handshake is over, to go on
/// as `hammock-relay`, a program of a few hundred KiB, for as long as its bar runs.
public enum ProcessImage {
    /// Runs `path` with `arguments` (its `argv[0]` first) in place of this program: the same pid, the same
    /// environment, and the descriptors that are not close-on-exec (`keeping` are made so first). Returns
    /// only when that failed, with why.
    public static func replace(with path: String, arguments: [String], keeping descriptors: [Int32] = []) -> SystemCallError {
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFD, fcntl(descriptor, F_GETFD) & ~FD_CLOEXEC)
        }
        var pointers: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        pointers.append(nil)
        execv(path, pointers)
        let code = errno
        for pointer in pointers { free(pointer) }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        return SystemCallError(code: code)
    }
}
