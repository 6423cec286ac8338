/// A JSON number kept as its literal text, so 64-bit ids and decimal strings pass through exactly.
///
/// Equality and hashing use the text: `1.0` and `1` are different numbers here, because the engine's
/// promise is to pass numbers through unchanged, not to normalise them.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral
{
    /// Always a valid RFC 8259 number literal.
    public let text: String

    /// Skips validation; only for text the parser or a formatter has already checked.
    init(uncheckedText text: String) {
        self.text = text
    }

    /// Returns nil unless `text` is exactly one RFC 8259 number (no surrounding whitespace, no `+`,
    /// no leading zeros, no `NaN` or `Infinity`).
    public init?(text: String) {
        var copy = text
        let valid = copy.withUTF8 { bytes in
            JSONNumber.literalLength(in: bytes, from: 0) == bytes.count && !bytes.isEmpty
        }
        guard valid else { return nil }
        self.text = text
    }

    public init(_ value: Int) {
        self.text = String(value)
    }

    /// Integral values within ±2^53 print as integers ("3", not "3.0") because that is what other
    /// JSON producers write for them; everything else gets the shortest text that reads back as the
    /// same Double. JSON has no NaN or infinity, so those trap: use `init?(exactly:)` for untrusted values.
    public init(_ value: Double) {
        precondition(value.isFinite, "JSONNumber(Double): \(value) is not finite and JSON has no NaN or infinity; use JSONNumber(exactly:)")
        self.text = JSONNumber.format(value)
    }

    /// Nil for NaN and infinities, otherwise the same text as `init(_: Double)`.
    public init?(exactly value: Double) {
        guard value.isFinite else { return nil }
        self.text = JSONNumber.format(value)
    }

    public init(integerLiteral value: Int) {
        self.init(value)
    }

    public init(floatLiteral value: Double) {
        self.init(value)
    }

    public var description: String { text }

    /// The nearest Double; literals beyond Double's range give ±infinity, as strtod does.
    public var doubleValue: Double {
        Double(text) ?? .nan  // unreachable for valid text, kept non-trapping on principle
    }

    /// The value as an Int when it is exactly an integer that fits: "42", "-7", "1e3" and "2.50e1"
    /// qualify; "1.5", "1e-1" and "9223372036854775808" do not.
    public var intValue: Int? {
        if let plain = Int(text) { return plain }
        return Array(text.utf8).withUnsafeBufferPointer { JSONNumber.exactInteger($0) }
    }

    private static let exactDoubleIntegerLimit: Double = 9_007_199_254_740_992  // 2^53

    private static func format(_ value: Double) -> String {
        if value == 0 { return value.sign == .minus ? "-0" : "0" }
        // A truncating conversion plus a comparison, because the rounding functions would pull in libm.
        if value.magnitude <= exactDoubleIntegerLimit {
            let integer = Int64(value)
            if Double(integer) == value { return String(integer) }
        }
        // Swift's description is the shortest round-trip form ("0.1", "1e+300") but pads the exponent
        // to two digits ("1e-05"); drop the padding so the text matches what other producers write.
        let text = value.description
        guard let e = text.utf8.firstIndex(of: UInt8(ascii: "e")) else { return text }
        var bytes = Array(text.utf8[..<e])
        bytes.append(UInt8(ascii: "e"))
        var rest = text.utf8[text.utf8.index(after: e)...].makeIterator()
        var sawDigit = false
        while let byte = rest.next() {
            if byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") {
                bytes.append(byte)
            } else if byte == UInt8(ascii: "0") && !sawDigit {
                continue
            } else {
                sawDigit = true
                bytes.append(byte)
            }
        }
        if !sawDigit { bytes.append(UInt8(ascii: "0")) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Length of the number literal starting at `start`, or nil if the bytes there do not start a
    /// valid one. Shared with the parser so both agree on what a number is.
    static func literalLength(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        switch scanLiteral(in: bytes, from: start) {
        case .success(let end): return end - start
        case .failure: return nil
        }
    }

    /// Scans one number literal; on failure gives the offending offset and the reason.
    static func scanLiteral(
        in bytes: UnsafeBufferPointer<UInt8>, from start: Int
    ) -> Result<Int, JSONParseError> {
        let end = bytes.count
        var pos = start
        if pos < end && bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < end, isDigit(bytes[pos]) else {
            return .failure(JSONParseError(offset: pos, message: "expected a digit in the number"))
        }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if pos < end && isDigit(bytes[pos]) {
                return .failure(JSONParseError(offset: pos - 1, message: "leading zeros are not allowed in numbers"))
            }
        } else {
            while pos < end && isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < end && bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard pos < end, isDigit(bytes[pos]) else {
                return .failure(JSONParseError(offset: pos, message: "expected a digit after the decimal point"))
            }
            while pos < end && isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < end && (bytes[pos] | 0x20) == UInt8(ascii: "e") {
            pos += 1
            if pos < end && (bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-")) { pos += 1 }
            guard pos < end, isDigit(bytes[pos]) else {
                return .failure(JSONParseError(offset: pos, message: "expected a digit in the exponent"))
            }
            while pos < end && isDigit(bytes[pos]) { pos += 1 }
        }
        return .success(pos)
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// Decides exactly whether a validated literal with a fraction or exponent is an integer that fits
    /// in Int, without going through Double (which would blur large values).
    private static func exactInteger(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var pos = 0
        let negative = bytes[0] == UInt8(ascii: "-")
        if negative { pos = 1 }
        var digits: [UInt8] = []
        var fractionDigits = 0
        var inFraction = false
        while pos < bytes.count, bytes[pos] == UInt8(ascii: ".") || isDigit(bytes[pos]) {
            if bytes[pos] == UInt8(ascii: ".") {
                inFraction = true
            } else {
                digits.append(bytes[pos])
                if inFraction { fractionDigits += 1 }
            }
            pos += 1
        }
        var exponent = 0
        if pos < bytes.count {  // at 'e' or 'E'
            pos += 1
            var exponentNegative = false
            if bytes[pos] == UInt8(ascii: "-") || bytes[pos] == UInt8(ascii: "+") {
                exponentNegative = bytes[pos] == UInt8(ascii: "-")
                pos += 1
            }
            while pos < bytes.count {
                // Anything past a few digits is far outside Int's range either way.
                if exponent < 100_000 { exponent = exponent * 10 + Int(bytes[pos] - UInt8(ascii: "0")) }
                pos += 1
            }
            if exponentNegative { exponent = -exponent }
        }
        // value = digits × 10^(exponent - fractionDigits)
        guard let firstSignificant = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }) else { return 0 }
        digits.removeFirst(firstSignificant)
        var scale = exponent - fractionDigits
        while scale < 0 {
            guard digits.last == UInt8(ascii: "0") else { return nil }
            digits.removeLast()
            scale += 1
        }
        guard digits.count + scale <= 19 else { return nil }
        digits.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: scale))
        if negative { digits.insert(UInt8(ascii: "-"), at: 0) }
        return Int(String(decoding: digits, as: UTF8.self))
    }
}
