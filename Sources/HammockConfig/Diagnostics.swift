import HammockCore
import HammockYAML

/// One problem in a configuration file, at the place a person must edit.
public struct Diagnostic: Sendable, Hashable, Comparable {
    public var mark: YAMLMark
    public var message: String

    public init(_ mark: YAMLMark, _ message: String) {
        self.mark = mark
        self.message = message
    }

    public static func < (lhs: Diagnostic, rhs: Diagnostic) -> Bool {
        (lhs.mark, lhs.message) < (rhs.mark, rhs.message)
    }

    /// `file:line:column: message`, the form editors and terminals turn into a link. Control characters
    /// (an ESC or a CR in a quoted id or value) are shown escaped: a diagnostic must not move the cursor,
    /// recolour the terminal or overwrite the line it is on.
    public func formatted(file: String) -> String {
        "\(file.escapingControlCharacters):\(mark.line):\(mark.column): \(message.escapingControlCharacters)"
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

    public init(file: String, diagnostics: [Diagnostic], partial: LoadedConfiguration? = nil) {
        self.file = file
        self.diagnostics = diagnostics.sorted()
        self.partial = partial
    }

    /// The secrets the file declared, as far as it was read.
    public var secrets: Set<String> { partial?.configuration.secrets ?? [] }

    public var description: String {
        diagnostics.map { $0.formatted(file: file) }.joined(separator: "\n")
    }
}
