import OrderedCollections

/// Why a line is not JSON, and where: `offset` is the byte offset into the input, so a log line can
/// point at the exact spot in what a plugin sent.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public var offset: Int
    public var message: String

    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONValue {
    /// Parses exactly one JSON value (surrounding whitespace allowed). Strict: no comments, no trailing
    /// commas, no NaN, no leading zeros, no control characters in strings, valid \u escapes including
    /// surrogate pairs (a lone surrogate is an error), invalid UTF-8 is an error. Duplicate object keys:
    /// the last value wins, at the first key's position. Nesting is limited to 512 levels.
    ///
    /// Contiguous inputs (`[UInt8]`, `ArraySlice<UInt8>`, `UnsafeRawBufferPointer`, `Data`) are parsed
    /// in place; anything else is copied once into an array first.
    public init(parsing bytes: some Collection<UInt8>) throws(JSONParseError) {
        let result: Result<JSONValue, JSONParseError>
        if let contiguous = bytes.withContiguousStorageIfAvailable({ JSONParser.parse($0) }) {
            result = contiguous
        } else if let raw = bytes as? UnsafeRawBufferPointer {
            result = raw.withMemoryRebound(to: UInt8.self) { JSONParser.parse($0) }
        } else {
            result = Array(bytes).withUnsafeBufferPointer { JSONParser.parse($0) }
        }
        self = try result.get()
    }

    public init(parsing text: String) throws(JSONParseError) {
        var text = text
        self = try text.withUTF8 { JSONParser.parse($0) }.get()
    }
}

/// An iterative parser over a byte buffer.
///
/// It keeps its own stacks instead of recursing so hostile nesting can never exhaust the thread's
/// stack, and it collects container elements in flat scratch stacks so each array or object is
/// allocated once, at its final size, when it closes.
struct JSONParser {
    static let maximumDepth = 512

    private let bytes: UnsafeBufferPointer<UInt8>
    private var pos = 0
    /// Reused for strings that contain escapes.
    private var scratch: [UInt8] = []

    private struct Frame {
        var isObject: Bool
        /// Where this container's elements start in `values` (and members' keys in `keys`).
        var valueStart: Int
        var keyStart: Int
    }

    private var frames: [Frame] = []
    private var values: [JSONValue] = []
    private var keys: [String] = []

    private init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        // One allocation per stack covers typical lines; growing from empty would cost several.
        frames.reserveCapacity(8)
        values.reserveCapacity(16)
        keys.reserveCapacity(16)
    }

    static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<JSONValue, JSONParseError> {
        var parser = JSONParser(bytes: bytes)
        do {
            return .success(try parser.parseDocument())
        } catch {
            return .failure(error)
        }
    }

    // MARK: - Structure

    private mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try parseValue()
        skipWhitespace()
        if pos != bytes.count {
            throw error("trailing characters after the value", at: pos)
        }
        return value
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        nextValue: while true {
            skipWhitespace()
            guard pos < bytes.count else { throw error("expected a value but the input ended", at: pos) }
            var value: JSONValue
            switch bytes[pos] {
            case UInt8(ascii: "{"):
                guard frames.count < Self.maximumDepth else {
                    throw error("nesting deeper than \(Self.maximumDepth) levels", at: pos)
                }
                pos += 1
                skipWhitespace()
                if pos < bytes.count && bytes[pos] == UInt8(ascii: "}") {
                    pos += 1
                    value = .object([:])
                } else {
                    frames.append(Frame(isObject: true, valueStart: values.count, keyStart: keys.count))
                    try parseKey(after: "'{'")
                    continue nextValue
                }
            case UInt8(ascii: "["):
                guard frames.count < Self.maximumDepth else {
                    throw error("nesting deeper than \(Self.maximumDepth) levels", at: pos)
                }
                pos += 1
                skipWhitespace()
                if pos < bytes.count && bytes[pos] == UInt8(ascii: "]") {
                    pos += 1
                    value = .array([])
                } else {
                    frames.append(Frame(isObject: false, valueStart: values.count, keyStart: keys.count))
                    continue nextValue
                }
            case UInt8(ascii: "\""):
                value = .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = .number(try parseNumber())
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw error("expected a value", at: pos)
            }

            // A value is complete: hand it to the enclosing container, closing containers as they end.
            while let frame = frames.last {
                values.append(value)
                skipWhitespace()
                let byte: UInt8 = pos < bytes.count ? bytes[pos] : 0
                if frame.isObject {
                    if byte == UInt8(ascii: ",") {
                        pos += 1
                        try parseKey(after: "','")
                        continue nextValue
                    }
                    guard byte == UInt8(ascii: "}") else {
                        throw error("expected ',' or '}' after an object member", at: pos)
                    }
                    pos += 1
                    value = .object(closeObject(frame))
                } else {
                    if byte == UInt8(ascii: ",") {
                        pos += 1
                        continue nextValue
                    }
                    guard byte == UInt8(ascii: "]") else {
                        throw error("expected ',' or ']' after an array element", at: pos)
                    }
                    pos += 1
                    value = .array(Array(values[frame.valueStart...]))
                    values.removeSubrange(frame.valueStart...)
                }
                frames.removeLast()
            }
            return value
        }
    }

    /// Reads `"key" :` and leaves the key on the key stack for the member's value.
    private mutating func parseKey(after what: String) throws(JSONParseError) {
        skipWhitespace()
        guard pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") else {
            throw error("expected a string key after \(what)", at: pos)
        }
        keys.append(try parseString())
        skipWhitespace()
        guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else {
            throw error("expected ':' after an object key", at: pos)
        }
        pos += 1
    }

    private mutating func closeObject(_ frame: Frame) -> JSONObject {
        let count = keys.count - frame.keyStart
        var object = JSONObject(minimumCapacity: count)
        var valueIndex = frame.valueStart
        for keyIndex in frame.keyStart..<keys.count {
            // Subscript assignment makes a repeated key's last value win.
            object[keys[keyIndex]] = values[valueIndex]
            valueIndex += 1
        }
        keys.removeSubrange(frame.keyStart...)
        values.removeSubrange(frame.valueStart...)
        return object
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while pos < bytes.count {
            switch bytes[pos] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                pos += 1
            default:
                return
            }
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let length = literal.utf8CodeUnitCount
        let start = literal.utf8Start
        for i in 0..<length {
            guard pos + i < bytes.count, bytes[pos + i] == start[i] else {
                throw error("invalid literal (expected '\(literal)')", at: pos)
            }
        }
        pos += length
    }

    // MARK: - Scalars

    private mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = pos
        switch JSONNumber.scanLiteral(in: bytes, from: start) {
        case .success(let end):
            pos = end
            return JSONNumber(uncheckedText: String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
        case .failure(let failure):
            throw failure
        }
    }

    /// Parses a string starting at its opening quote. The common case, no escapes, is one scan and one
    /// `String(decoding:)` of the slice; only escaped strings go through the scratch buffer.
    private mutating func parseString() throws(JSONParseError) -> String {
        let quote = pos
        pos += 1
        let start = pos
        while pos < bytes.count {
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self)
                pos += 1
                return text
            } else if byte == UInt8(ascii: "\\") {
                return try parseEscapedString(quote: quote, start: start)
            } else if byte < 0x20 {
                throw error("unescaped control character in a string", at: pos)
            } else if byte < 0x80 {
                pos += 1
            } else {
                try skipUTF8Sequence()
            }
        }
        throw error("unterminated string", at: quote)
    }

    /// Continues a string at its first backslash, copying the decoded text into `scratch`.
    private mutating func parseEscapedString(quote: Int, start: Int) throws(JSONParseError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<pos]))
        while pos < bytes.count {
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                pos += 1
                return String(decoding: scratch, as: UTF8.self)
            } else if byte == UInt8(ascii: "\\") {
                try parseEscape()
            } else if byte < 0x20 {
                throw error("unescaped control character in a string", at: pos)
            } else if byte < 0x80 {
                scratch.append(byte)
                pos += 1
            } else {
                let sequenceStart = pos
                try skipUTF8Sequence()
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[sequenceStart..<pos]))
            }
        }
        throw error("unterminated string", at: quote)
    }

    /// Decodes one escape at `pos` (the backslash) into `scratch`.
    private mutating func parseEscape() throws(JSONParseError) {
        let escapeStart = pos
        pos += 1
        guard pos < bytes.count else { throw error("unterminated string", at: escapeStart) }
        let decoded: UInt8
        switch bytes[pos] {
        case UInt8(ascii: "\""): decoded = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): decoded = UInt8(ascii: "\\")
        case UInt8(ascii: "/"): decoded = UInt8(ascii: "/")
        case UInt8(ascii: "b"): decoded = 0x08
        case UInt8(ascii: "f"): decoded = 0x0C
        case UInt8(ascii: "n"): decoded = 0x0A
        case UInt8(ascii: "r"): decoded = 0x0D
        case UInt8(ascii: "t"): decoded = 0x09
        case UInt8(ascii: "u"):
            pos += 1
            let unit = try parseHex4(escapeStart: escapeStart)
            var scalar = UInt32(unit)
            if 0xD800...0xDBFF ~= unit {
                guard pos + 1 < bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u") else {
                    throw error("lone surrogate in \\u escape", at: escapeStart)
                }
                let lowStart = pos
                pos += 2
                let low = try parseHex4(escapeStart: lowStart)
                guard 0xDC00...0xDFFF ~= low else {
                    throw error("lone surrogate in \\u escape", at: escapeStart)
                }
                scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
            } else if 0xDC00...0xDFFF ~= unit {
                throw error("lone surrogate in \\u escape", at: escapeStart)
            }
            appendUTF8(scalar)
            return
        default:
            throw error("invalid escape sequence", at: escapeStart)
        }
        scratch.append(decoded)
        pos += 1
    }

    private mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        guard pos + 4 <= bytes.count else { throw error("invalid \\u escape", at: escapeStart) }
        var unit: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[pos]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape", at: escapeStart)
            }
            unit = unit << 4 | UInt16(digit)
            pos += 1
        }
        return unit
    }

    private mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `pos` (RFC 3629: no overlong forms, no surrogates,
    /// nothing above U+10FFFF) and steps over it. Checking here, rather than letting
    /// `String(decoding:)` repair the bytes, is what makes invalid UTF-8 an error with an offset.
    private mutating func skipUTF8Sequence() throws(JSONParseError) {
        let lead = bytes[pos]
        let length: Int
        var secondLow: UInt8 = 0x80
        var secondHigh: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; secondLow = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; secondHigh = 0x9F
        case 0xF0: length = 4; secondLow = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; secondHigh = 0x8F
        default: throw error("invalid UTF-8", at: pos)
        }
        guard pos + length <= bytes.count else { throw error("invalid UTF-8", at: pos) }
        guard secondLow...secondHigh ~= bytes[pos + 1] else { throw error("invalid UTF-8", at: pos) }
        var i = 2
        while i < length {
            guard bytes[pos + i] & 0xC0 == 0x80 else { throw error("invalid UTF-8", at: pos) }
            i += 1
        }
        pos += length
    }

    private func error(_ message: String, at offset: Int) -> JSONParseError {
        JSONParseError(offset: offset, message: message)
    }
}
