import HammockCore
import HammockJSON
import HammockPluginKit
import HammockYAML

/// How a command's stdout becomes a source's content.
enum OutputFormat: String, Sendable, CaseIterable {
    /// The whole output as one string; the single trailing newline nearly every command prints is not data.
    case text
    /// One string per line; a final newline does not make an empty last line.
    case lines
    case json
    /// JSON Lines: one JSON value per line, as an array (`JSONValue.parseLines`).
    case jsonl
    case yaml

    /// Stream mode turns every line into a value of its own, which only text and JSON can do.
    var worksPerLine: Bool { self == .text || self == .json }

    /// The content of a whole output (poll mode).
    func parse(output bytes: [UInt8]) -> Result<JSONValue, SourceError> {
        switch self {
        case .text:
            var text = bytes[...]
            if text.last == UInt8(ascii: "\n") { text = text.dropLast() }
            return .success(.string(String(decoding: text, as: UTF8.self)))
        case .lines:
            var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            if lines.last?.isEmpty == true { lines.removeLast() }
            return .success(.array(lines.map { .string(String(decoding: withoutCarriageReturn($0), as: UTF8.self)) }))
        case .json:
            if bytes.allSatisfy(isJSONWhitespace) { return .failure(parseFailure("stdout is empty, expected JSON")) }
            do {
                return .success(try JSONValue(parsing: bytes))
            } catch {
                if let count = JSONValue.jsonLinesCount(bytes) {
                    return .failure(parseFailure("stdout is not one JSON value but \(count) lines of JSON; set parse: jsonl"))
                }
                return .failure(parseFailure("stdout is not JSON: \(error.message) at byte \(error.offset)"))
            }
        case .jsonl:
            do {
                return .success(.array(try JSONValue.parseLines(bytes)))
            } catch {
                return .failure(parseFailure("stdout is not JSON Lines: \(error)"))
            }
        case .yaml:
            do {
                guard let node = try YAML.parse(String(decoding: bytes, as: UTF8.self)) else { return .success(.null) }
                return yamlToJSON(node).mapError { parseFailure("stdout is not YAML that JSON can carry: \($0)") }
            } catch {
                return .failure(parseFailure("stdout is not YAML: \(error.description)"))
            }
        }
    }

    /// The content of one line (stream mode). Nil for a line that carries nothing (a blank line in JSON).
    func parse(line bytes: ArraySlice<UInt8>) -> Result<JSONValue, SourceError>? {
        let line = withoutCarriageReturn(bytes)
        switch self {
        case .json:
            if line.allSatisfy(isJSONWhitespace) { return nil }
            do {
                return .success(try JSONValue(parsing: line))
            } catch {
                return .failure(parseFailure("a line of output is not JSON: \(error.message) at byte \(error.offset)"))
            }
        default:
            return .success(.string(String(decoding: line, as: UTF8.self)))
        }
    }
}

private func parseFailure(_ message: String) -> SourceError {
    SourceError(message: message, code: .parseFailed)
}

private func withoutCarriageReturn(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    line.last == UInt8(ascii: "\r") ? line.dropLast() : line
}

private func isJSONWhitespace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
}
