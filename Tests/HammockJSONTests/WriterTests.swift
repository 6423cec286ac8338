import HammockJSON
import Testing

@Suite struct Writing {
    @Test func compactOutputKeepsOrder() {
        let value: JSONValue = ["type": "newData", "id": 42, "content": ["temp": -3.5, "ok": true, "tags": ["a", "b"], "none": nil]]
        #expect(value.jsonString == #"{"type":"newData","id":42,"content":{"temp":-3.5,"ok":true,"tags":["a","b"],"none":null}}"#)
        #expect(JSONValue.array([]).jsonString == "[]")
        #expect(JSONValue.object([:]).jsonString == "{}")
    }

    @Test func stringEscapesAreMinimal() {
        #expect(JSONValue.string("\u{01}").jsonString == #""\u0001""#)
        #expect(JSONValue.string("\u{1F}").jsonString == #""\u001f""#)
        #expect(JSONValue.string("a\tb").jsonString == #""a\tb""#)
        #expect(JSONValue.string("\n\r\u{8}\u{C}").jsonString == #""\n\r\b\f""#)
        #expect(JSONValue.string("q\"b\\").jsonString == #""q\"b\\""#)
        #expect(JSONValue.string("a/b").jsonString == #""a/b""#)
        #expect(JSONValue.string("é").jsonBytes == [0x22, 0xC3, 0xA9, 0x22])
        #expect(JSONValue.string("\u{7F}").jsonString == "\"\u{7F}\"")
        #expect(JSONValue.string("\u{0}").jsonString == #""\u0000""#)
    }

    @Test func surrogatePairEscapeBecomesRawUTF8() throws {
        let value = try JSONValue(parsing: #""\ud83d\ude00""#)
        #expect(value.jsonBytes == [0x22, 0xF0, 0x9F, 0x98, 0x80, 0x22])
        #expect(value.jsonString == "\"😀\"")
    }

    @Test func writeJSONStringForHandBuiltLines() {
        var line: [UInt8] = Array(#"{"source":"#.utf8)
        writeJSONString("s\"1", into: &line)
        line.append(UInt8(ascii: "}"))
        #expect(String(decoding: line, as: UTF8.self) == #"{"source":"s\"1"}"#)
        var bridged: [UInt8] = []
        writeJSONString(String("x\ty".utf8.map { Character(Unicode.Scalar($0)) }), into: &bridged)
        #expect(String(decoding: bridged, as: UTF8.self) == #""x\ty""#)
    }

    @Test func writeAppendsToExistingBuffer() {
        var buffer: [UInt8] = Array("> ".utf8)
        JSONValue.array([1, "x"]).write(into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == #"> [1,"x"]"#)
    }

    @Test func roundTripIsByteExact() throws {
        let lines = [
            #"{"type":"newData","source":"s1","id":42,"content":{"temp":-3.5,"ok":true,"tags":["a","b"]}}"#,
            #"[1.0e+5,-0,12345678901234567890,0.000001,1E400,"\u001f","é",{"":[]}]"#,
            #"{"b":{"z":null,"a":[true,false]},"a":"x\"y\\z"}"#,
        ]
        for line in lines {
            #expect(try JSONValue(parsing: line).jsonString == line)
        }
    }

    @Test func descriptionIsCompactJSON() {
        let value: JSONValue = ["a": [1, 2.5]]
        #expect(value.description == #"{"a":[1,2.5]}"#)
    }
}

@Suite struct Accessors {
    @Test func typedAccessors() throws {
        let value = try JSONValue(parsing: #"{"s":"x","b":true,"n":7,"a":[1],"o":{},"z":null}"#)
        #expect(value["s"]?.stringValue == "x")
        #expect(value["b"]?.boolValue == true)
        #expect(value["n"]?.numberValue?.intValue == 7)
        #expect(value["a"]?.arrayValue == [1])
        #expect(value["o"]?.objectValue == [:])
        #expect(value["z"]?.isNull == true)
        #expect(value["missing"] == nil)
        #expect(value["s"]?.boolValue == nil)
        #expect(JSONValue.array([])["s"] == nil)
        #expect(value["s"]?.isNull == false)
    }

    @Test func kindNames() {
        let kinds: [JSONValue] = [nil, true, 1, "s", [], [:]]
        #expect(kinds.map(\.kindName) == ["null", "a boolean", "a number", "a string", "an array", "an object"])
    }

    @Test func dictionaryLiteralRepeatedKeyLastWins() {
        let value: JSONValue = ["a": 1, "b": 2, "a": 3]
        #expect(value.jsonString == #"{"a":3,"b":2}"#)
    }
}
