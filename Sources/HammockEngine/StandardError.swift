import Foundation
import HammockCore
import Logging

/// hammock's stderr, shared by its logs and its plugins' stderr: one `write` per line, so lines from
/// different plugins never interleave, and every line passes the redactor first.
public struct StandardError: Sendable {
    public let secrets: Secrets

    public init(secrets: Secrets) { self.secrets = secrets }

    /// A plugin's line, as `kind: line`.
    func write(prefix: String, line: [UInt8]) {
        var bytes = Array(prefix.utf8)
        bytes += [UInt8(ascii: ":"), UInt8(ascii: " ")]
        bytes += line
        bytes.append(UInt8(ascii: "\n"))
        write(bytes)
    }

    public func write(_ text: String) { write(Array(text.utf8)) }

    private func write(_ bytes: [UInt8]) {
        var bytes = bytes
        secrets.redactor.redact(&bytes)
        bytes.withUnsafeBytes { _ = Glibc.write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

/// swift-log's handler for hammock: `hammock: error: message key=value` on stderr, secrets redacted.
public struct StandardErrorLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let output: StandardError

    public init(level: Logger.Level, output: StandardError) {
        logLevel = level
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = metadata
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let suffix = fields.sorted { $0.key < $1.key }.map { " \($0.key)=\($0.value)" }.joined()
        output.write("hammock: \(event.level): \(event.message)\(suffix)\n")
    }
}
