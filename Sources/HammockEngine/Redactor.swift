import HammockJSON

/// Keeps values that came from the environment (`${TOKEN}`) out of everything hammock writes: stdout lines,
/// its logs, and its plugins' stderr.
///
/// Redaction works on the bytes about to be written, so it holds whatever path a secret took (an error
/// message quoting a URL, a plugin logging its request). Secrets are matched both as they are and as they
/// appear escaped inside a JSON string. Values shorter than `minimumLength` are not treated as secrets: a
/// `${PORT}` of `8080` must not blank out every 8080 in the data.
public struct Redactor: Sendable {
    public static let minimumLength = 6
    public static let replacement = Array("[redacted]".utf8)

    private let needles: [[UInt8]]

    public init(secrets: Set<String>) {
        var needles = Set<[UInt8]>()
        for secret in secrets where secret.utf8.count >= Self.minimumLength {
            needles.insert(Array(secret.utf8))
            var escaped: [UInt8] = []
            writeJSONString(secret, into: &escaped)
            needles.insert(Array(escaped.dropFirst().dropLast()))
        }
        // Longest first, so a secret that contains another is replaced whole.
        self.needles = needles.sorted { $0.count > $1.count }
    }

    public var isEmpty: Bool { needles.isEmpty }

    public func redact(_ bytes: inout [UInt8]) {
        for needle in needles where bytes.count >= needle.count {
            guard let first = bytes.firstRange(of: needle) else { continue }
            var result: [UInt8] = []
            result.reserveCapacity(bytes.count)
            var rest = bytes[...]
            var match: Range<Int>? = first
            while let range = match {
                result += rest[rest.startIndex..<range.lowerBound]
                result += Self.replacement
                rest = rest[range.upperBound...]
                match = rest.firstRange(of: needle)
            }
            result += rest
            bytes = result
        }
    }

    public func redact(_ text: String) -> String {
        guard !isEmpty else { return text }
        var bytes = Array(text.utf8)
        redact(&bytes)
        return String(decoding: bytes, as: UTF8.self)
    }
}
