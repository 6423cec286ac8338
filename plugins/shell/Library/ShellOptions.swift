import HammockCore
import HammockJSON
import HammockPluginKit

/// A `shell` source's options, checked once at configure time so that a load never meets a bad option.
struct ShellOptions: Sendable {
    enum Program: Sendable {
        /// Run directly, no shell: the user's arguments reach the program exactly as written.
        case argv([String])
        /// Run by `/bin/sh -c`, for pipes, redirections and the rest of the shell's language.
        case script(String)
    }

    enum Mode: String, Sendable {
        case poll, stream
    }

    var program: Program
    var environment: [(String, String)]
    var workingDirectory: String?
    var parse: OutputFormat
    var maxBytes: Int
    var mode: Mode

    static let keys = ["command", "script", "env", "cwd", "parse", "maxBytes", "mode"]
    static let defaultMaxBytes = 10 << 20

    init(_ options: JSONValue) throws(OptionProblems) {
        var reader = OptionReader(options, known: Self.keys, kind: "shell")
        if options.objectValue == nil {
            reader.problem(at: JSONPointer(tokens: []), "the options of a shell source must be a mapping, found \(options.kindName)")
        }
        let command = reader.stringList("command")
        let script = reader.string("script")
        switch (reader.has("command"), reader.has("script")) {
        case (false, false):
            reader.problem(at: JSONPointer(tokens: []), "a shell source needs \"command\" (a list of arguments) or \"script\" (run by /bin/sh -c)")
        case (true, true):
            reader.problem("script", "give either \"command\" or \"script\", not both")
        default:
            break
        }
        if let command, command.first?.isEmpty == true {
            reader.problem(at: JSONPointer(tokens: ["command", "0"]), "command[0] must name a program")
        }
        if let script, script.allSatisfy(\.isWhitespace) {
            reader.problem("script", "script must not be empty")
        }
        let environment = reader.stringMap("env") ?? []
        for (name, _) in environment where name.isEmpty || name.contains("=") || name.contains("\0") {
            reader.problem(at: JSONPointer(tokens: ["env", name]), "\"\(name)\" is not a valid environment variable name")
        }
        let workingDirectory = reader.string("cwd")
        if workingDirectory?.isEmpty == true { reader.problem("cwd", "cwd must not be empty") }
        let mode = reader.choice("mode", Mode.allNames).flatMap(Mode.init(rawValue:)) ?? .poll
        let parse = reader.choice("parse", OutputFormat.allCases.map(\.rawValue)).flatMap(OutputFormat.init(rawValue:)) ?? .text
        if mode == .stream && !parse.worksPerLine {
            reader.problem(
                "parse", "parse: \(parse.rawValue) does not work in stream mode, where each line is one value (use text or json)")
        }
        let maxBytes = reader.integer("maxBytes", minimum: 1, size: true) ?? Self.defaultMaxBytes
        try reader.finish()

        self.program = command.map(Program.argv) ?? .script(script ?? "")
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.parse = parse
        self.maxBytes = maxBytes
        self.mode = mode
    }
}

extension ShellOptions.Mode {
    static let allNames = ["poll", "stream"]
}
