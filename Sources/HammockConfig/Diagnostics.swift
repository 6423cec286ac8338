import HammockCore
import HammockYAML

/// One problem in a configuration file, at the place a person must edit.
public struct Diagnostic: Sendable, Hashable, Comparable {
    public var mark: YAMLMark
    public var message: String
    /// The file the mark is in, when the configuration spans files (`include:`, a base in another file);
    /// nil means the configuration's main file.
    public var file: String?

    public init(_ mark: YAMLMark, _ message: String, file: String? = nil) {
        self.mark = mark
        self.message = message
        self.file = file
    }

    public static func < (lhs: Diagnostic, rhs: Diagnostic) -> Bool {
        (lhs.file ?? "", lhs.mark, lhs.message) < (rhs.file ?? "", rhs.mark, rhs.message)
    }

    /// `file:line:column: message`, the form editors and terminals turn into a link, with the diagnostic's
    /// own file when it has one, else `file`. Control characters (an ESC or a CR in a quoted id or value) are
    /// shown escaped: a diagnostic must not move the cursor, recolour the terminal or overwrite the line it
    /// is on.
    public func formatted(file: String) -> String {
        let file = self.file ?? file
        return "\(file.escapingControlCharacters):\(mark.line):\(mark.column): \(message.escapingControlCharacters)"
    }
}

/// Every problem found in a configuration, reported together so a person fixes them in one pass.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public var file: String
    public var diagnostics: [Diagnostic]
    /// The configuration as far as it could be read, when the file parsed: its sources' plugins can still
    /// check their own keys, so every problem is reported in one pass, and its secrets are known, so no
    /// message shows one.
    public var partial: LoadedConfiguration?
    /// Every file and included directory read before the problems were found, for `--watch-config`: the
    /// fix of a bad edit is a change to one of them.
    public var readFrom: ConfigurationFiles

    public init(
        file: String, diagnostics: [Diagnostic], partial: LoadedConfiguration? = nil,
        readFrom: ConfigurationFiles? = nil
    ) {
        self.file = file
        // A base used by several sources would otherwise report its one problem once for each of them.
        self.diagnostics = Array(Set(diagnostics)).sorted()
        self.partial = partial
        self.readFrom = readFrom ?? partial?.files ?? ConfigurationFiles(files: [file])
    }

    /// This error with what the plugins said of the sources that did read (`partial`), so that one report
    /// holds every problem: at start, at a reload, and in `hammock check` alike. A plugin's problem at a place
    /// the file's own problems already name is left out: a value the engine refused (an unset variable,
    /// say) would only be refused again.
    public func adding(pluginProblems: [Diagnostic]) -> ConfigurationError {
        let marked = Set(diagnostics.map { Place(file: $0.file ?? file, mark: $0.mark) })
        let added = pluginProblems.filter { !marked.contains(Place(file: $0.file ?? file, mark: $0.mark)) }
        return ConfigurationError(file: file, diagnostics: diagnostics + added, partial: partial, readFrom: readFrom)
    }

    /// The secrets the file declared, as far as it was read.
    public var secrets: Set<String> { partial?.configuration.secrets ?? [] }

    public var description: String {
        diagnostics.map { $0.formatted(file: file) }.joined(separator: "\n")
    }
}

/// What a configuration was read from: its main file, the files it includes, and the directories it
/// includes (whose `*.yaml` files come and go).
public struct ConfigurationFiles: Sendable, Hashable {
    /// In the order they were read, the main file first.
    public var files: [String]
    public var directories: [String]

    public init(files: [String] = [], directories: [String] = []) {
        self.files = files
        self.directories = directories
    }
}
