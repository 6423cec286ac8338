import HammockCore
import HammockJSON
import HammockPluginKit
import HammockYAML

/// Turns a file's bytes into content. Every failure says what the file is not and where it went wrong,
/// because the user fixes it in an editor and needs a place to look.
func parseContent(_ bytes: [UInt8], as format: ParseFormat) -> Result<JSONValue, SourceError> {
    // Editors on Windows like to start UTF-8 files with a byte order mark; no format here wants it.
    let skipped = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    let body = bytes[skipped...]
    switch format {
    case .json:
        do {
            return .success(try JSONValue(parsing: body))
        } catch {
            if let count = JSONValue.jsonLinesCount(body) {
                return .failure(parseFailure("not one JSON value but \(count) lines of JSON; set parse: jsonl"))
            }
            let offset = skipped + error.offset
            let (line, column) = lineAndColumn(of: offset, in: bytes)
            return .failure(parseFailure("not JSON: \(error.message) at byte \(offset) (line \(line), column \(column))"))
        }
    case .jsonl:
        do {
            return .success(.array(try JSONValue.parseLines(body)))
        } catch {
            return .failure(parseFailure("not JSON Lines: \(error)"))
        }
    case .yaml:
        let text: String
        switch utf8Text(body, offset: skipped) {
        case .success(let decoded): text = decoded
        case .failure(let failure): return .failure(failure)
        }
        do {
            guard let root = try YAML.parse(text) else { return .success(.null) }
            return yamlToJSON(root).mapError { parseFailure("not usable as JSON: \($0.message) at line \($0.mark.line), column \($0.mark.column)") }
        } catch {
            return .failure(parseFailure("not YAML: \(error.message) at line \(error.mark.line), column \(error.mark.column)"))
        }
    case .text:
        // Like a shell's $(…): the newline every editor adds at the end is not part of the value.
        var end = body.endIndex
        if end > body.startIndex, body[end - 1] == newline { end -= 1 }
        if end > body.startIndex, body[end - 1] == carriageReturn { end -= 1 }
        return utf8Text(body[..<end], offset: skipped).map(JSONValue.string)
    case .lines:
        // Split on bytes, not Characters: Swift treats "\r\n" as one Character that is not "\n".
        // Empty lines in the middle are kept so positions match the file; only the final newline does
        // not start another line.
        var lines = body.split(separator: newline, omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() }
        var offset = skipped
        var array: [JSONValue] = []
        for line in lines {
            let content = line.last == carriageReturn ? line.dropLast() : line
            switch utf8Text(content, offset: offset) {
            case .success(let text): array.append(.string(text))
            case .failure(let failure): return .failure(failure)
            }
            offset += line.count + 1
        }
        return .success(.array(array))
    }
}

private let newline = UInt8(ascii: "\n")
private let carriageReturn = UInt8(ascii: "\r")

private func parseFailure(_ message: String) -> SourceError {
    SourceError(message: message, code: .parseFailed)
}

/// Rejects rather than repairs bad UTF-8: a replacement character in the content would hide that the file
/// is not the text the user thinks it is.
private func utf8Text(_ bytes: ArraySlice<UInt8>, offset base: Int) -> Result<String, SourceError> {
    var iterator = bytes.makeIterator()
    var parser = Unicode.UTF8.ForwardParser()
    var offset = base
    while true {
        switch parser.parseScalar(from: &iterator) {
        case .valid(let scalar): offset += scalar.count
        case .emptyInput: return .success(String(decoding: bytes, as: UTF8.self))
        case .error: return .failure(parseFailure("not UTF-8 text: invalid byte at byte \(offset)"))
        }
    }
}

/// 1-based, counting characters in the line, as editors show them.
private func lineAndColumn(of offset: Int, in bytes: [UInt8]) -> (line: Int, column: Int) {
    let prefix = bytes[..<min(offset, bytes.count)]
    let line = prefix.reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    let lineStart = prefix.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
    return (line, String(decoding: bytes[lineStart..<prefix.endIndex], as: UTF8.self).count + 1)
}
