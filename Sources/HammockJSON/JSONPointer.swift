/// An RFC 6901 JSON Pointer, kept as its decoded reference tokens.
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible {
    public let tokens: [String]

    public init(tokens: [String]) {
        self.tokens = tokens
    }

    /// Parses pointer text: "" is the whole document, anything else must start with "/".
    /// "~0" stands for "~" and "~1" for "/"; any other "~" is invalid, so this returns nil.
    public init?(_ text: String) {
        guard !text.isEmpty else {
            self.tokens = []
            return
        }
        let utf8 = Array(text.utf8)
        guard utf8[0] == UInt8(ascii: "/") else { return nil }
        var tokens: [String] = []
        var current: [UInt8] = []
        var index = 1
        while index < utf8.count {
            let byte = utf8[index]
            switch byte {
            case UInt8(ascii: "/"):
                tokens.append(String(decoding: current, as: UTF8.self))
                current.removeAll(keepingCapacity: true)
            case UInt8(ascii: "~"):
                guard index + 1 < utf8.count else { return nil }
                index += 1
                switch utf8[index] {
                case UInt8(ascii: "0"): current.append(UInt8(ascii: "~"))
                case UInt8(ascii: "1"): current.append(UInt8(ascii: "/"))
                default: return nil
                }
            default:
                current.append(byte)
            }
            index += 1
        }
        tokens.append(String(decoding: current, as: UTF8.self))
        self.tokens = tokens
    }

    /// The pointer text, with "~" and "/" in tokens re-escaped.
    public var description: String {
        var text = ""
        for token in tokens {
            text += "/"
            for character in token.unicodeScalars {
                switch character {
                case "~": text += "~0"
                case "/": text += "~1"
                default: text.unicodeScalars.append(character)
                }
            }
        }
        return text
    }

    public func appending(_ token: String) -> JSONPointer {
        JSONPointer(tokens: tokens + [token])
    }
}

extension JSONValue {
    /// The value the pointer refers to, or nil when it leads nowhere. Array tokens must be canonical
    /// decimal indices ("0", "12"); "01", "+1" and "-" (past the end) refer to nothing.
    public subscript(pointer: JSONPointer) -> JSONValue? {
        var current = self
        for token in pointer.tokens {
            switch current {
            case .object(let object):
                guard let member = object[token] else { return nil }
                current = member
            case .array(let elements):
                guard let index = canonicalArrayIndex(token), index < elements.count else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }
}

private func canonicalArrayIndex(_ token: String) -> Int? {
    let utf8 = token.utf8
    guard let first = utf8.first, utf8.allSatisfy({ JSONNumber.isDigit($0) }) else { return nil }
    guard first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
    return Int(token)  // nil on overflow, which no array reaches anyway
}
