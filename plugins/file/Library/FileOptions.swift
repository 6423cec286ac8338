import FoundationEssentials
import Glibc
import HammockCore
import HammockJSON
import HammockPluginKit

/// How a file's bytes become content.
enum ParseFormat: String, Sendable, CaseIterable {
    case json, jsonl, yaml, text, lines

    /// Files mostly say what they are by their extension; anything unrecognised is taken as text because
    /// text never fails on valid UTF-8, so a wrong guess still shows the user something.
    static func guess(for path: String) -> ParseFormat {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return .text }
        switch name[name.index(after: dot)...].lowercased() {
        case "json": return .json
        case "jsonl", "ndjson": return .jsonl
        case "yaml", "yml": return .yaml
        default: return .text
        }
    }
}

/// A `file` source's options, checked.
struct FileOptions: Sendable {
    static let known = ["path", "parse", "watch", "maxBytes", "debounce"]
    static let defaultMaxBytes = 10 << 20
    /// Long enough to cover an editor's truncate-then-write or write-temp-then-rename (microseconds apart),
    /// short enough that a human sees the update as immediate.
    static let defaultDebounce = Duration.milliseconds(50)

    /// Absolute and lexically normalised, so the watcher can name the parent directory and walk up from it.
    var path: String
    var parse: ParseFormat
    var watch: Bool
    var maxBytes: Int
    var debounce: Duration

    init(_ options: JSONValue, home: String?, workingDirectory: String) throws(OptionProblems) {
        var reader = OptionReader(options, known: Self.known, kind: "file")
        let rawPath = reader.string("path", required: true)
        let parse = reader.choice("parse", ParseFormat.allCases.map(\.rawValue)).flatMap(ParseFormat.init(rawValue:))
        // On unless turned off: someone who declares a file expects its edits on screen, as with every other
        // kind that keeps itself fresh, and a watch costs next to nothing.
        let watch = reader.bool("watch") ?? true
        let maxBytes = reader.integer("maxBytes", minimum: 1, size: true) ?? Self.defaultMaxBytes
        let debounce = reader.duration("debounce") ?? Self.defaultDebounce

        var resolved: String?
        if let rawPath {
            switch Self.resolve(rawPath, home: home, workingDirectory: workingDirectory) {
            case .success(let path): resolved = path
            case .failure(let problem): reader.problem("path", problem.message)
            }
        }
        try reader.finish()

        self.path = resolved!
        self.parse = parse ?? ParseFormat.guess(for: resolved!)
        self.watch = watch
        self.maxBytes = maxBytes
        self.debounce = debounce
    }

    struct PathProblem: Error { var message: String }

    /// `~` and `~/…` use $HOME; relative paths are relative to the working directory hammock gave us.
    /// `..` is resolved by text, not by following symlinks, so the watcher's notion of "parent directory"
    /// is the one the user wrote.
    static func resolve(_ raw: String, home: String?, workingDirectory: String) -> Result<String, PathProblem> {
        guard !raw.isEmpty else { return .failure(PathProblem(message: "path must not be empty")) }
        var text = raw
        if text == "~" || text.hasPrefix("~/") {
            guard let home, !home.isEmpty else {
                return .failure(PathProblem(message: "path starts with ~ but $HOME is not set"))
            }
            text = home + text.dropFirst()
        } else if text.hasPrefix("~") {
            return .failure(PathProblem(message: "path: ~user is not supported; write the full path or ~/…"))
        }
        if !text.hasPrefix("/") { text = workingDirectory + "/" + text }
        if text.hasSuffix("/") { return .failure(PathProblem(message: "path \"\(raw)\" names a directory, not a file")) }

        var components: [Substring] = []
        for component in text.split(separator: "/") {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        let last = raw.split(separator: "/").last
        guard !components.isEmpty, last != ".", last != ".." else {
            return .failure(PathProblem(message: "path \"\(raw)\" names a directory, not a file"))
        }
        return .success("/" + components.joined(separator: "/"))
    }
}
