import HammockJSON

/// Keeps a configuration's secrets out of everything hammock writes: stdout lines, logs, plugins' stderr.
///
/// Redaction works on values, never on the bytes of a finished line: a secret is replaced inside string
/// values (content, error messages, log text) and nowhere else, so a number that happens to contain a
/// secret's digits is left alone and every stdout line stays valid JSON whatever the secrets are. Which
/// values are secrets is decided by the configuration (where a value goes); every declared secret is
/// redacted, whatever its length.
///
/// Besides its plain form, each secret is also matched as it looks percent-encoded (a token in a query,
/// quoted back in a URL), JSON-escaped (a plugin logging a JSON line that holds it) and with its control
/// characters escaped (a configuration diagnostic quoting it).
public struct Redactor: Sendable, Equatable {
    public static let replacement = "[redacted]"

    /// Longest first, so a secret that contains another is replaced whole. Matched as UTF-8 bytes, not as
    /// Characters: a secret followed by a combining mark must still be found.
    private let needles: [[UInt8]]

    public init(secrets: some Sequence<String>) {
        var needles = Set<[UInt8]>()
        for secret in secrets where !secret.isEmpty {
            needles.insert(Array(secret.utf8))
            needles.insert(Array(secret.percentEncodedForURL.utf8))
            var escaped: [UInt8] = []
            writeJSONString(secret, into: &escaped)
            needles.insert(Array(escaped.dropFirst().dropLast()))
            needles.insert(Array(secret.escapingControlCharacters.utf8))
        }
        self.needles = needles.sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
    }

    public static let none = Redactor(secrets: [String]())

    public var isEmpty: Bool { needles.isEmpty }

    /// `text` with every occurrence of a secret replaced by `[redacted]`. A needle is valid UTF-8, so a match
    /// starts and ends on scalar boundaries and the result is valid UTF-8 too.
    public func redact(_ text: String) -> String {
        guard !needles.isEmpty else { return text }
        var bytes = Array(text.utf8)
        guard redact(&bytes) else { return text }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Redacts text held as bytes (a plugin's stderr line); true when anything was replaced.
    ///
    /// Each needle is first replaced by a marker no text holds (a noncharacter), and the markers become
    /// `[redacted]` at the end: a shorter secret must not match inside the replacement of a longer one.
    @discardableResult
    public func redact(_ bytes: inout [UInt8]) -> Bool {
        var changed = false
        for needle in needles where bytes.count >= needle.count {
            guard bytes.firstRange(of: needle) != nil else { continue }
            changed = true
            bytes = Self.replacing(needle, with: Self.marker, in: bytes)
        }
        if changed { bytes = Self.replacing(Self.marker, with: Self.replacementBytes, in: bytes) }
        return changed
    }

    private static func replacing(_ needle: [UInt8], with replacement: [UInt8], in bytes: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var rest = bytes[...]
        while let range = rest.firstRange(of: needle) {
            result += rest[rest.startIndex..<range.lowerBound]
            result += replacement
            rest = rest[range.upperBound...]
        }
        result += rest
        return result
    }

    private static let replacementBytes = Array(replacement.utf8)
    /// U+FFFF, a noncharacter: valid UTF-8 that no secret or text is expected to hold.
    private static let marker: [UInt8] = [0xEF, 0xBF, 0xBF]

    /// A copy of `value` with every string in it (object keys included) redacted; numbers, booleans and
    /// the structure are untouched.
    public func redact(_ value: JSONValue) -> JSONValue {
        guard !needles.isEmpty else { return value }
        return redacted(value) ?? value
    }

    /// The redacted value, or nil when nothing in it holds a secret: the common case, which then costs a
    /// search per string and no copy of the value.
    private func redacted(_ value: JSONValue) -> JSONValue? {
        switch value {
        case .null, .bool, .number:
            return nil
        case .string(let string):
            var bytes = Array(string.utf8)
            return redact(&bytes) ? .string(String(decoding: bytes, as: UTF8.self)) : nil
        case .array(let items):
            guard let first = items.indices.first(where: { redacted(items[$0]) != nil }) else { return nil }
            var copy = items
            for index in first..<copy.count { copy[index] = redact(copy[index]) }
            return .array(copy)
        case .object(let object):
            let changes = object.contains { key, member in
                var keyBytes = Array(key.utf8)
                return redact(&keyBytes) || redacted(member) != nil
            }
            guard changes else { return nil }
            var copy = JSONObject(minimumCapacity: object.count)
            for (key, member) in object { copy[redact(key)] = redact(member) }
            return .object(copy)
        }
    }
}

extension JSONValue {
    /// Appends compact JSON with every string value passed through `redactor` first.
    public func write(into buffer: inout [UInt8], redactor: Redactor) {
        if redactor.isEmpty { write(into: &buffer) } else { redactor.redact(self).write(into: &buffer) }
    }
}
