import ArgumentParser
import FoundationEssentials
import Glibc
import HammockConformance
import HammockJSON
import HammockPluginHost

/// `hammock plugin ...`: tools for plugin authors.
struct PluginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plugin", abstract: "Tools for writing plugins.", subcommands: [PluginCheck.self])
}

struct PluginCheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Drive a plugin through the protocol and report every violation.",
        discussion: """
            Runs COMMAND as hammock would run a plugin and checks, in order: the handshake, the options \
            schema of each kind when its hello gives one (a well-formed JSON Schema), configure with \
            valid options (--options) and with an unknown key, a load, a load followed by cancel, a load of \
            a source never configured, a push (with --expect-push), and shutdown; and that every line it \
            wrote is protocol. Prints one line per check (`ok`, `FAIL` with what was expected and what \
            came, or `skip`) and exits 1 if any check failed. See docs/plugin-protocol.md.

              hammock plugin check --options '{"command":["echo","hi"]}' -- hammock-plugin-shell
            """)

    @Option(help: "The kind the plugin must serve (it must be among the kinds of its hello).")
    var kind: String?

    @Option(help: "Options (a JSON object) the plugin accepts for a source of that kind.")
    var options = Parsed(OptionsObject.empty)

    @Option(help: "Seconds a load may take (sent as its timeout; the answer may come 2 s later).")
    var loadTimeout = Parsed(OptionSeconds(.seconds(5)))

    @Option(help: "Wait up to this many seconds for a push from the configured source, and fail without one.")
    var expectPush: Parsed<OptionSeconds>?

    @Argument(parsing: .captureForPassthrough, help: "The plugin's command and its arguments, after --.")
    var command: [String] = []

    func run() async throws {
        try requirePluginGuard()
        var command = command
        if command.first == "--" { command.removeFirst() }
        guard let executable = command.first else { throw ValidationError("give the plugin's command after --") }
        let object = try options.value { ValidationError("--options \($0)") }.object
        let loadTimeout = try loadTimeout.value { ValidationError("--load-timeout: \($0)") }.duration
        let expectPush = try expectPush?.value { ValidationError("--expect-push: \($0)") }.duration
        // A bare name is looked for beside hammock first, as hammock looks for its plugins, then on PATH.
        if !executable.contains("/"), let directory = PluginResolver.currentExecutableDirectory,
            access(directory + "/" + executable, X_OK) == 0
        {
            command[0] = directory + "/" + executable
        }
        let settings = PluginConformance.Settings(
            command: command, kind: kind, options: object, loadTimeout: loadTimeout,
            expectPush: expectPush)
        let results = await PluginConformance.run(settings) { result in
            writeAll(result.description + "\n", to: STDOUT_FILENO)
        }
        let failed = results.filter { $0.verdict == .fail }.count
        let summary = failed == 0 ? "\(command.joined(separator: " ")): every check passed" : "\(command.joined(separator: " ")): \(failed) check\(failed == 1 ? "" : "s") failed"
        writeAll(summary + "\n", to: STDOUT_FILENO)
        if failed > 0 { throw ExitCode(1) }
    }
}
