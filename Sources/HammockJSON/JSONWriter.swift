extension JSONValue {
    /// Appends compact JSON (no spaces) with object keys in their stored order and numbers as their
    /// literal text. Strings are escaped minimally; non-ASCII is written as raw UTF-8 and "/" is left alone.
    ///
    /// Recursion depth follows the value's nesting: parsed values are at most 512 deep.
    public func write(into buffer: inout [UInt8]) {
        switch self {
        case .null:
            appendASCII("null", to: &buffer)
        case .bool(let value):
            appendASCII(value ? "true" : "false", to: &buffer)
        case .number(let number):
            appendUTF8(of: number.text, to: &buffer)
        case .string(let string):
            writeJSONString(string, into: &buffer)
        case .array(let elements):
            buffer.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { buffer.append(UInt8(ascii: ",")) }
                first = false
                element.write(into: &buffer)
            }
            buffer.append(UInt8(ascii: "]"))
        case .object(let object):
            buffer.append(UInt8(ascii: "{"))
            var first = true
            for (key, value) in object {
                if !first { buffer.append(UInt8(ascii: ",")) }
                first = false
                writeJSONString(key, into: &buffer)
                buffer.append(UInt8(ascii: ":"))
                value.write(into: &buffer)
            }
            buffer.append(UInt8(ascii: "}"))
        }
    }

    public var jsonBytes: [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(64)
        write(into: &buffer)
        return buffer
    }

    public var jsonString: String {
        String(decoding: jsonBytes, as: UTF8.self)
    }
}

/// Writes a Swift string as a JSON string literal (with quotes), for callers that assemble lines by hand.
/// Only `"`, `\` and control characters are escaped; runs of plain bytes are copied in bulk.
public func writeJSONString(_ string: String, into buffer: inout [UInt8]) {
    buffer.append(UInt8(ascii: "\""))
    if string.utf8.withContiguousStorageIfAvailable({ appendEscaped($0, to: &buffer) }) == nil {
        var native = string
        native.withUTF8 { appendEscaped($0, to: &buffer) }
    }
    buffer.append(UInt8(ascii: "\""))
}

private func appendEscaped(_ bytes: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) {
    var runStart = 0
    for index in 0..<bytes.count {
        let byte = bytes[index]
        guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
        if runStart < index {
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
        }
        runStart = index + 1
        buffer.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"))
        case 0x0A: buffer.append(UInt8(ascii: "n"))
        case 0x09: buffer.append(UInt8(ascii: "t"))
        case 0x0D: buffer.append(UInt8(ascii: "r"))
        case 0x08: buffer.append(UInt8(ascii: "b"))
        case 0x0C: buffer.append(UInt8(ascii: "f"))
        default:
            let hex: StaticString = "0123456789abcdef"
            buffer.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            buffer.append(hex.utf8Start[Int(byte >> 4)])
            buffer.append(hex.utf8Start[Int(byte & 0x0F)])
        }
    }
    if runStart < bytes.count {
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
    }
}

private func appendASCII(_ literal: StaticString, to buffer: inout [UInt8]) {
    buffer.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
}

private func appendUTF8(of string: String, to buffer: inout [UInt8]) {
    if string.utf8.withContiguousStorageIfAvailable({ buffer.append(contentsOf: $0) }) == nil {
        buffer.append(contentsOf: string.utf8)
    }
}

extension JSONValue {
    /// JSON for people and diffs: two spaces a level, a space after each colon, a list of scalars on one
    /// line; keys in their stored order. Ends without a newline.
    public var prettyJSONString: String {
        var text = ""
        writePretty(into: &text, indent: "")
        return text
    }

    private func writePretty(into text: inout String, indent: String) {
        let inner = indent + "  "
        switch self {
        case .array(let elements) where elements.isEmpty || elements.allSatisfy(\.isScalar):
            text += "[" + elements.map(\.jsonString).joined(separator: ", ") + "]"
        case .array(let elements):
            text += "[\n"
            for (index, element) in elements.enumerated() {
                text += inner
                element.writePretty(into: &text, indent: inner)
                text += index == elements.count - 1 ? "\n" : ",\n"
            }
            text += indent + "]"
        case .object(let object) where object.isEmpty:
            text += "{}"
        case .object(let object):
            text += "{\n"
            for (index, (key, value)) in object.enumerated() {
                text += inner + JSONValue.string(key).jsonString + ": "
                value.writePretty(into: &text, indent: inner)
                text += index == object.count - 1 ? "\n" : ",\n"
            }
            text += indent + "}"
        default:
            text += jsonString
        }
    }

    private var isScalar: Bool {
        switch self {
        case .array, .object: false
        default: true
        }
    }
}
