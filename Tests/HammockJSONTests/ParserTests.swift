import HammockJSON
import Testing

private func parse(_ text: String) throws(JSONParseError) -> JSONValue {
    try JSONValue(parsing: text)
}

private func parseError(_ text: String) -> JSONParseError? {
    do {
        _ = try JSONValue(parsing: text)
        return nil
    } catch {
        return error
    }
}

private func parseError(bytes: [UInt8]) -> JSONParseError? {
    do {
        _ = try JSONValue(parsing: bytes)
        return nil
    } catch {
        return error
    }
}

@Suite struct AcceptedInput {
    @Test(arguments: [
        "null", "true", "false", "0", "-0", "1.0e+5", "1E-2", "-12.5e3", "\"\"", "\"x\"",
        "[]", "{}", "[[]]", "[1,2,3]", "{\"a\":{\"b\":[null]}}", " \t\r\n[ 1 , { \"a\" : 2 } ] \n",
        "\"\\u0000\"", "\"\\/\"", "[\"\\ud83d\\ude00\"]", "123456789012345678901234567890",
        "1e999", "{\"\":0}", "\"\u{7F}\"",
    ])
    func validDocumentsParseAndRoundTrip(text: String) throws {
        let value = try parse(text)
        let reparsed = try JSONValue(parsing: value.jsonBytes)
        #expect(reparsed == value)
    }

    @Test func topLevelScalars() throws {
        #expect(try parse("null") == .null)
        #expect(try parse(" true ") == .bool(true))
        #expect(try parse("false") == .bool(false))
        #expect(try parse("42") == .number(42))
        #expect(try parse("\"hi\"") == .string("hi"))
    }

    @Test func numbersKeepTheirText() throws {
        for text in ["1.0e+5", "-0", "12345678901234567890", "0.10", "1E2", "-0.0e-0", "9223372036854775808"] {
            let value = try parse(text)
            #expect(value.numberValue?.text == text)
            #expect(value.jsonString == text)
        }
        let line = #"{"id":12345678901234567890,"x":1.50}"#
        #expect(try parse(line).jsonString == line)
    }

    @Test func keyOrderIsKept() throws {
        let line = #"{"z":1,"a":2,"m":{"y":true,"b":false},"c":null}"#
        let value = try parse(line)
        #expect(value.objectValue.map { Array($0.keys) } == ["z", "a", "m", "c"])
        #expect(value.jsonString == line)
    }

    @Test func duplicateKeysLastValueWinsAtFirstPosition() throws {
        let value = try parse(#"{"a":1,"b":2,"a":3}"#)
        #expect(value.jsonString == #"{"a":3,"b":2}"#)
    }

    @Test func escapesDecode() throws {
        #expect(try parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(try parse(#""\u00e9\u00E9""#) == .string("éé"))
        #expect(try parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try parse(#""x\uD834\uDD1Ey""#) == .string("x𝄞y"))
        #expect(try parse("\"é😀\"") == .string("é😀"))
    }

    @Test func largeObjectWithHashedKeys() throws {
        var text = "{"
        for i in 0..<200 { text += (i == 0 ? "" : ",") + "\"k\(i)\":\(i)" }
        text += ",\"k7\":\"again\"}"
        let value = try parse(text)
        #expect(value.objectValue?.count == 200)
        #expect(value["k7"] == .string("again"))
        #expect(value["k199"] == .number(199))
        #expect(value.objectValue?.keys.first == "k0")
    }

    @Test func nestingUpTo512IsAllowed() throws {
        let text = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        let value = try parse(text)
        var depth = 0
        var current = value
        while let inner = current.arrayValue {
            depth += 1
            guard let first = inner.first else { break }
            current = first
        }
        #expect(depth == 512)
    }

    @Test func contiguousAndNonContiguousInputs() throws {
        let text = #"{"a":[1,"b"]}"#
        let expected: JSONValue = ["a": [1, "b"]]
        let bytes = Array(text.utf8)
        #expect(try JSONValue(parsing: bytes) == expected)
        #expect(try JSONValue(parsing: ("xx" + text).utf8.dropFirst(2)) == expected)
        let slice = Array(("[" + text + "]").utf8)[1...].dropLast()
        #expect(try JSONValue(parsing: slice) == expected)
        let fromRaw = bytes.withUnsafeBytes { raw in try? JSONValue(parsing: raw) }
        #expect(fromRaw == expected)
        #expect(try JSONValue(parsing: text.utf8.lazy.map { $0 }) == expected)
    }
}

@Suite struct RejectedInput {
    @Test(arguments: [
        "", " ", "[1,]", "[1,,2]", "[,1]", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":}", "{a:1}", "{'a':1}",
        "['a']", "01", "-01", "00", "1.", ".5", "-", "+1", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity",
        "tru", "nul", "True", "[1] x", "1 2", "[1", "{", "{\"a\":1", "\"abc", "\"\\x\"", "\"\\u12\"",
        "\"\\uZZZZ\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"", "\"a\tb\"",
        "\"a\nb\"", "\"\u{0}\"", "[1]/*c*/", "// c\n1", "[\"a\",]", "\u{FEFF}1", "[1]]", "]", "}",
        "\"\\", "{\"a\":1 \"b\":2}", "[1 2]", "\u{A0}1",
    ])
    func invalidDocumentsAreRejected(text: String) {
        #expect(parseError(text) != nil, "accepted \(text.debugDescription)")
    }

    @Test(arguments: [
        [0x22, 0xFF, 0x22],  // never valid
        [0x22, 0xC0, 0x80, 0x22],  // overlong NUL
        [0x22, 0xC3, 0x22],  // truncated
        [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-8 encoded surrogate
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // above U+10FFFF
        [0x22, 0xE0, 0x80, 0x80, 0x22],  // overlong three-byte
        [0x22, 0x80, 0x22],  // lone continuation
        [0x22, 0xE2, 0x82],  // truncated at end of input
        [0x22, 0x5C, 0x6E, 0xFF, 0x22],  // after an escape
    ] as [[UInt8]])
    func invalidUTF8IsAnError(bytes: [UInt8]) {
        let failure = parseError(bytes: bytes)
        #expect(failure?.message == "invalid UTF-8")
    }

    @Test func deepNestingFailsCleanly() {
        let failure = parseError(String(repeating: "[", count: 100_000))
        #expect(failure == JSONParseError(offset: 512, message: "nesting deeper than 512 levels"))
        let objects = String(repeating: "{\"a\":", count: 100_000)
        #expect(parseError(objects)?.message == "nesting deeper than 512 levels")
        #expect(parseError(String(repeating: "[", count: 513) + String(repeating: "]", count: 513))?.offset == 512)
    }

    @Test func errorOffsetsPointAtTheProblem() {
        #expect(parseError("[1,]") == JSONParseError(offset: 3, message: "expected a value"))
        #expect(parseError(#"{"a" 1}"#) == JSONParseError(offset: 5, message: "expected ':' after an object key"))
        #expect(parseError(#"{"a":1 "b":2}"#) == JSONParseError(offset: 7, message: "expected ',' or '}' after an object member"))
        #expect(parseError("[1 2]") == JSONParseError(offset: 3, message: "expected ',' or ']' after an array element"))
        #expect(parseError(#"{"a":1,}"#)?.offset == 7)
        #expect(parseError("[01]") == JSONParseError(offset: 1, message: "leading zeros are not allowed in numbers"))
        #expect(parseError("  \"abc") == JSONParseError(offset: 2, message: "unterminated string"))
        #expect(parseError("\"ab\tc\"") == JSONParseError(offset: 3, message: "unescaped control character in a string"))
        #expect(parseError(#"["x\ud800"]"#) == JSONParseError(offset: 3, message: "lone surrogate in \\u escape"))
        #expect(parseError(#""\q""#) == JSONParseError(offset: 1, message: "invalid escape sequence"))
        #expect(parseError("true false") == JSONParseError(offset: 5, message: "trailing characters after the value"))
        #expect(parseError("[tru]") == JSONParseError(offset: 1, message: "invalid literal (expected 'true')"))
        #expect(parseError("")?.offset == 0)
        #expect(parseError("1.e3") == JSONParseError(offset: 2, message: "expected a digit after the decimal point"))
        #expect(parseError(bytes: [0x5B, 0x22, 0x61, 0xC3, 0x28, 0x22, 0x5D]) == JSONParseError(offset: 3, message: "invalid UTF-8"))
    }

    @Test func errorDescriptionNamesTheOffset() {
        #expect(JSONParseError(offset: 4, message: "unterminated string").description == "unterminated string at byte 4")
    }

    @Test func hostileInputsNeverCrash() {
        // A cheap deterministic fuzz: mutate valid documents byte by byte and make sure parsing returns.
        let seeds = [#"{"a":[1,2.5e-3,"x\u00e9\ud83d\ude00",true,null],"b":{"c":-0}}"#, "[[[[{}]]]]", #""é😀\n""#]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        var accepted = 0
        for seed in seeds {
            let original = Array(seed.utf8)
            for _ in 0..<3_000 {
                var bytes = original
                for _ in 0..<(1 + Int(next() % 3)) {
                    let index = Int(next() % UInt64(bytes.count))
                    switch next() % 3 {
                    case 0: bytes[index] = UInt8(truncatingIfNeeded: next())
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(UInt8(truncatingIfNeeded: next()), at: index)
                    }
                    if bytes.isEmpty { bytes = [0x20] }
                }
                if let value = try? JSONValue(parsing: bytes) {
                    accepted += 1
                    #expect((try? JSONValue(parsing: value.jsonBytes)) == value)
                }
            }
        }
        #expect(accepted > 0)
    }
}
