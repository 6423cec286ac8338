import Glibc
import Subprocess

/// How to start a source's command, worked out once when the source is configured.
///
/// A source polled every second starts its command 86,400 times a day. Resolving the program on `PATH`
/// and copying this process's environment each time cost more CPU than the command itself (`cat
/// /proc/loadavg`), so both happen here, once: the environment is the plugin's own (fixed for its life)
/// with the source's `env` on top, and the program's path is looked up on that environment's `PATH`.
/// A program not found now is left to be looked up at each run, so one installed later is found then.
func makeConfiguration(_ options: ShellOptions) -> Subprocess.Configuration {
    var platform = PlatformOptions()
    // A group of its own: one signal reaches every process the command starts, and never the plugin.
    platform.processGroupID = 0
    platform.teardownSequence = [
        .gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: ProcessGroupHandle.gracePeriod)
    ]
    var environment = pluginEnvironment
    for (name, value) in options.environment { environment[name] = value }
    // Sources without `env` of their own share one copy: thousands of them must not each hold one.
    let entries = options.environment.isEmpty ? pluginEnvironmentEntries : environmentEntries(environment)
    let executable: Executable
    let arguments: [String]
    switch options.program {
    case .argv(let argv):
        let program = argv[0]
        if program.contains("/") {
            executable = .path(.init(program))
        } else if let found = findOnPath(program, path: environment["PATH"]) {
            executable = .path(.init(found))
        } else {
            executable = .name(program)
        }
        arguments = Array(argv.dropFirst())
    case .script(let script):
        executable = .path("/bin/sh")
        arguments = ["-c", script]
    }
    return Subprocess.Configuration(
        executable: executable, arguments: Arguments(arguments), environment: .custom(entries),
        workingDirectory: options.workingDirectory.map { .init($0) }, platformOptions: platform)
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

private let pluginEnvironmentEntries = environmentEntries(pluginEnvironment)

/// `NAME=value` entries, NUL-terminated, as the process receives them.
private func environmentEntries(_ environment: [String: String]) -> [[UInt8]] {
    environment.map { Array("\($0.key)=\($0.value)\0".utf8) }
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
