import Glibc

/// How to start a source's command, worked out once when the source is configured.
///
/// A source polled every second starts its command 86,400 times a day. Resolving the program on `PATH`,
/// copying this process's environment and turning both into C strings each time cost more CPU than the
/// command itself (`cat /proc/loadavg`), so all of it happens here, once: the environment is the plugin's
/// own (fixed for its life) with the source's `env` on top, and the program's path is looked up on that
/// environment's `PATH`. A program not found now is looked up again at each run, so one installed later
/// is found then.
struct CommandPlan: Sendable {
    /// The program's path, or nil when it was not found on `PATH` when the source was configured.
    let executable: String?
    /// What the user named: the program for messages and for a later look-up.
    let program: String
    let arguments: CStringArray
    let environment: CStringArray
    let path: String?
    let workingDirectory: String?

    init(_ options: ShellOptions) {
        var environment = pluginEnvironment
        for (name, value) in options.environment { environment[name] = value }
        // Sources without `env` of their own share one copy: thousands of them must not each hold one.
        self.environment = options.environment.isEmpty ? pluginEnvironmentArray : CStringArray(entries(environment))
        path = environment["PATH"]
        workingDirectory = options.workingDirectory
        switch options.program {
        case .argv(let argv):
            program = argv[0]
            executable = program.contains("/") ? program : findOnPath(program, path: path)
            arguments = CStringArray(argv)
        case .script(let script):
            program = "/bin/sh"
            executable = program
            arguments = CStringArray(["sh", "-c", script])
        }
    }

    /// The path to start: found when the source was configured, else looked for now.
    func resolvedExecutable() -> String? { executable ?? findOnPath(program, path: path) }
}

/// Strings as a NULL-terminated array of C strings, as `execve` takes `argv` and `envp`, made once and
/// never changed.
///
/// `@unchecked Sendable`: the memory is written in `init` only, then read (by `posix_spawn`) from any task,
/// and freed in `deinit`.
final class CStringArray: @unchecked Sendable {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [String]) {
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

/// This process's environment, read once.
private let pluginEnvironment: [String: String] = {
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
}()

private let pluginEnvironmentArray = CStringArray(entries(pluginEnvironment))

/// `NAME=value` entries, as the process receives them.
private func entries(_ environment: [String: String]) -> [String] {
    environment.map { "\($0.key)=\($0.value)" }
}

/// The first executable file named `program` in the directories of `path`, as a shell would find it.
func findOnPath(_ program: String, path: String?) -> String? {
    for directory in (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
        let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + program
        var info = stat()
        if access(candidate, X_OK) == 0, stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
            return candidate
        }
    }
    return nil
}
