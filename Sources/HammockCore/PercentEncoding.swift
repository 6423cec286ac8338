/// `%XX` escapes in URL parts: a JSON Schema `$ref`'s fragment, an HTTP request's query.
public enum PercentEncoding {
    /// `text` with each `%XX` as its byte; with `plusIsSpace` (a query's fields), `+` as a space. Nil for a
    /// `%` not followed by two hex digits, or bytes that are not UTF-8.
    public static func decoded(_ text: some StringProtocol, plusIsSpace: Bool = false) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// `text` as `application/x-www-form-urlencoded` writes a field (HTML forms, RFC 6749 §B): ALPHA, DIGIT
    /// and `-._*` as they are, a space as `+`, every other byte as `%XX`. The rest kind's OAuth2 requests are
    /// written with it, and the engine finds their secrets in that form with it too.
    public static func formEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var result = String.UnicodeScalarView()
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                result.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                result.append("+")
            default:
                result.append("%")
                result.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                result.append(Unicode.Scalar(hex[Int(byte & 0xF)]))
            }
        }
        return String(result)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
