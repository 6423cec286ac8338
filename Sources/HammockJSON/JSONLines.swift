/// Why a JSON Lines text is not one: the line (1-based) and the byte column in it (1-based), because a user
/// goes looking with an editor or `sed -n Np`, not with a byte offset into a whole body.
public struct JSONLinesError: Error, Sendable, Hashable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var message: String

    public init(line: Int, column: Int, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    public var description: String { "line \(line) is not JSON: \(message) at column \(column)" }
}

extension JSONValue {
    /// Reads JSON Lines (jsonlines.org; NDJSON is the same): one JSON value per line, as an array of them.
    ///
    /// A line ends at `\n`; a `\r` before it is not part of the value. Blank lines are skipped: the final
    /// newline, and the empty lines a streaming server sends to keep a connection alive, carry no value.
    /// A line that holds more than one value, or a value across lines, is an error, as the format says.
    public static func parseLines(_ bytes: some Collection<UInt8>) throws(JSONLinesError) -> [JSONValue] {
        let array = Array(bytes)
        var values: [JSONValue] = []
        var lineNumber = 0
        var start = 0
        while start < array.count {
            lineNumber += 1
            let end = array[start...].firstIndex(of: newline) ?? array.count
            var line = array[start..<end]
            if line.last == carriageReturn { line = line.dropLast() }
            if !line.allSatisfy(isWhitespace) {
                do {
                    values.append(try JSONValue(parsing: line))
                } catch {
                    throw JSONLinesError(line: lineNumber, column: error.offset + 1, message: error.message)
                }
            }
            start = end + 1
        }
        return values
    }
}

private let newline = UInt8(ascii: "\n")
private let carriageReturn = UInt8(ascii: "\r")

private func isWhitespace(_ byte: UInt8) -> Bool {
    byte == 0x20 || byte == 0x09 || byte == 0x0D
}

extension JSONValue {
    /// How many values `bytes` holds as JSON Lines, when it is not one JSON value but two or more lines of
    /// them: a parse error can then say `parse: jsonl` instead of only where the first value ended.
    public static func jsonLinesCount(_ bytes: some Collection<UInt8>) -> Int? {
        guard let values = try? parseLines(bytes), values.count > 1 else { return nil }
        return values.count
    }
}
