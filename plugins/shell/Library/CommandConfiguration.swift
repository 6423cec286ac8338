import Glibc
import HammockSystem

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
        self.environment = options.environment.isEmpty ? pluginEnvironmentArray : CStringArray(ProcessEnvironment.entries(environment))
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

/// This process's environment, read once.
private let pluginEnvironment = ProcessEnvironment.current()

private let pluginEnvironmentArray = CStringArray(ProcessEnvironment.entries(pluginEnvironment))

/// The first executable file named `program` in the directories of `path`, as a shell would find it.
func findOnPath(_ program: String, path: String?) -> String? { ProcessEnvironment.findOnPath(program, path: path) }
