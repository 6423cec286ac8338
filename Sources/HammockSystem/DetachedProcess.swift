import CHammockSystem
import Glibc

/// A process started to outlive its starter: `hammock attach` starting the `hammock serve` that every
/// consumer of a configuration then shares.
///
/// Not `ChildProcess`: that one keeps its child close (a process group of the caller's session, pipes the
/// caller reads, a pidfd the caller waits on), because the caller stops it. A detached process is nobody's
/// to stop: it has a session of its own (`setsid`: a terminal's hang-up or Ctrl-C, or a bar's signal to its
/// process group, never reaches it), reads /dev/null, writes nothing on stdout, logs to `standardError`
/// (a file), and inherits no other descriptor, so it holds none of the caller's pipes open after the
/// caller has gone.
public enum DetachedProcess {
    /// Starts `path` with `arguments` (`argv`, its first element included) and `environment`; its pid, or
    /// the spawn's errno.
    ///
    /// The process is this process's child while this one lives: a thread of its own reaps it when it ends
    /// (a `serve` that lost the race to another exits at once, and must not stay a zombie under a
    /// long-running `attach`). Once this process exits, init (or the nearest subreaper) adopts it.
    public static func spawn(
        path: String, arguments: [String], environment: [String: String], standardError: Int32
    ) -> Result<pid_t, SystemCallError> {
        let argv = CStringArray(arguments)
        let envp = CStringArray(ProcessEnvironment.entries(environment))
        var pid: pid_t = 0
        // `hammock_spawn`, as `ChildProcess`'s, but in a session of its own, with stdin and stdout /dev/null and no
        // pidfd (this process only reaps it).
        let error = hammock_spawn(path, argv.pointers, envp.pointers, nil, -1, -1, standardError, 1, &pid, nil)
        guard error == 0 else { return .failure(SystemCallError(code: error)) }
        OwnThread.start(named: "hammock.reap") { [pid] in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        return .success(pid)
    }

    /// The running executable's path (`/proc/self/exe`): a `hammock` starts its `serve` from the same
    /// build, whatever `PATH` says.
    public static var currentExecutable: String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
