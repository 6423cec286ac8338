@_spi(_Unicode) import Swift
import HammockJSON

/// Keeps a configuration's secrets out of everything hammock writes: stdout lines, logs, plugins' stderr.
///
/// Redaction works on values, never on the bytes of a finished line: a secret is replaced inside string
/// values (content, error messages, log text) and nowhere else, so a number that happens to contain a
/// secret's digits is left alone and every stdout line stays valid JSON whatever the secrets are. Which
/// values are secrets is decided by the configuration (where a value goes); every declared secret is
/// redacted, and the configuration refuses one too short to redact without eating the output.
///
/// Besides its plain form, each secret is also matched as it looks percent-encoded (a token in a query,
/// quoted back in a URL, with its hex digits in either case: servers echo `%2f` as often as `%2F`),
/// JSON-escaped (a plugin logging a JSON line that holds it) and with its control characters escaped (a
/// configuration diagnostic quoting it); and each of these in both Unicode normalization forms, composed
/// (NFC) and decomposed (NFD), since a server or a file system may hand back `é` as `e` and U+0301.
public struct Redactor: Sendable, Equatable {
    public static let replacement = "[redacted]"

    /// Longest first, so a secret that contains another is replaced whole. Matched as UTF-8 bytes, not as
    /// Characters: a secret followed by a combining mark must still be found.
    private let needles: [[UInt8]]

    public init(secrets: some Sequence<String>) {
        var needles = Set<[UInt8]>()
        for written in secrets where !written.isEmpty {
            let composed = String(String.UnicodeScalarView(written._nfc))
            let decomposed = String(String.UnicodeScalarView(written._nfd))
            // Told apart by their bytes: as Strings the forms are equal (Swift compares canonically).
            var forms: [String] = []
            for form in [written, composed, decomposed] where !forms.contains(where: { $0.utf8.elementsEqual(form.utf8) }) {
                forms.append(form)
            }
            for secret in forms {
                needles.insert(Self.foldingPercentHex(Array(secret.utf8)))
                needles.insert(Array(secret.percentEncodedForURL.utf8))
                var escaped: [UInt8] = []
                writeJSONString(secret, into: &escaped)
                needles.insert(Self.foldingPercentHex(Array(escaped.dropFirst().dropLast())))
                needles.insert(Self.foldingPercentHex(Array(secret.escapingControlCharacters.utf8)))
            }
        }
        self.needles = needles.sorted { $0.count != $1.count ? $0.count > $1.count : $0.lexicographicallyPrecedes($1) }
    }

    public static let none = Redactor(secrets: [String]())

    /// The first `limit` bytes of `bytes` as text, redacted before they are cut (and `…` after a cut). Cut
    /// first, a line could end inside a secret, and the start of a secret is no longer that secret: no
    /// redaction after the cut would find it. Only as much as the cut keeps, and the longest needle
    /// beyond, is looked at, so a long line costs no more than a short one.
    public func excerpt(_ bytes: [UInt8], limit: Int) -> String {
        let window = min(bytes.count, limit + (needles.first?.count ?? 0))
        var head = Array(bytes[..<window])
        redact(&head)
        guard head.count > limit || bytes.count > window else { return String(decoding: head, as: UTF8.self) }
        // A cut on a scalar's boundary: before the last scalar that would not end by the cut (`head` may
        // itself end inside one).
        var end = min(limit, head.count)
        var start = end - 1
        while start > 0, head[start] & 0xC0 == 0x80 { start -= 1 }
        if start >= 0 {
            let lead = head[start]
            let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
            if start + length > end { end = start }
        }
        return String(decoding: head[..<end], as: UTF8.self) + "…"
    }

    /// `text`'s first `limit` bytes, redacted before the cut: see `excerpt(_:limit:)`.
    public func excerpt(_ text: String, limit: Int) -> String { excerpt(Array(text.utf8), limit: limit) }

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
    ///
    /// The needles are searched for in a copy of the text whose percent-escapes have upper-case hex digits
    /// (the needles are folded the same way), and replaced at the same places in the text itself: the copy
    /// has the text's length, so its places are the text's.
    @discardableResult
    public func redact(_ bytes: inout [UInt8]) -> Bool {
        var changed = false
        let folded = Self.foldingPercentHex(bytes)
        // Only a text with a lower-case escape needs the copy kept in step; most texts have none.
        var haystack: [UInt8]? = folded == bytes ? nil : folded
        for needle in needles where bytes.count >= needle.count {
            guard (haystack ?? bytes).firstRange(of: needle) != nil else { continue }
            changed = true
            if let searched = haystack {
                (haystack, bytes) = Self.replacing(needle, with: Self.marker, in: searched, alongside: bytes)
            } else {
                bytes = Self.replacing(needle, with: Self.marker, in: bytes)
            }
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

    /// `needle` replaced wherever it stands in `searched`, in `searched` and at the same places in `text`
    /// (of the same length).
    private static func replacing(
        _ needle: [UInt8], with replacement: [UInt8], in searched: [UInt8], alongside text: [UInt8]
    ) -> ([UInt8], [UInt8]) {
        var newSearched: [UInt8] = []
        var newText: [UInt8] = []
        newSearched.reserveCapacity(searched.count)
        newText.reserveCapacity(text.count)
        var rest = searched[...]
        while let range = rest.firstRange(of: needle) {
            newSearched += rest[rest.startIndex..<range.lowerBound]
            newText += text[rest.startIndex..<range.lowerBound]
            newSearched += replacement
            newText += replacement
            rest = rest[range.upperBound...]
        }
        newSearched += rest
        newText += text[rest.startIndex...]
        return (newSearched, newText)
    }

    /// `bytes` with the hex digits of every percent-escape (`%2f`) in upper case (`%2F`); the same length.
    static func foldingPercentHex(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "%")) else { return bytes }
        var folded = bytes
        var index = 0
        while index + 2 < folded.count {
            if folded[index] == UInt8(ascii: "%"), isHex(folded[index + 1]), isHex(folded[index + 2]) {
                for digit in index + 1...index + 2 where folded[digit] >= UInt8(ascii: "a") { folded[digit] -= 0x20 }
                index += 3
            } else {
                index += 1
            }
        }
        return folded
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
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
