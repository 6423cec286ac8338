import Foundation
import HammockJSON
import Testing

/// `JSONValueEncoder` and `JSONValueDecoder`: order, exact numbers, optionals, unknown keys, error paths.
@Suite struct Coding {
    struct Reading: Codable, Equatable {
        var zone: String
        var at: Int
        var note: String?
        var raw: JSONValue
    }

    struct Batch: Codable, Equatable {
        var name: String
        var readings: [Reading]
        var limits: [String: Double]?
    }

    func encode(_ value: some Encodable) throws -> JSONValue { try JSONValueEncoder().encode(value) }

    func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        try JSONValueDecoder().decode(T.self, from: JSONValue(parsing: text))
    }

    /// The summary of the error decoding `text` as `T` throws, or nil when it decodes.
    func failure<T: Decodable>(_ type: T.Type, _ text: String) throws -> String? {
        do {
            _ = try JSONValueDecoder().decode(T.self, from: JSONValue(parsing: text))
            return nil
        } catch let error as DecodingError {
            return error.summary
        }
    }

    @Test func membersKeepTheOrderTheyAreEncodedIn() throws {
        let reading = Reading(zone: "oslo", at: 3, note: nil, raw: ["z": 1, "a": 2, "m": [3, ["y": nil, "b": true]]])
        #expect(try encode(reading).jsonString == #"{"zone":"oslo","at":3,"raw":{"z":1,"a":2,"m":[3,{"y":null,"b":true}]}}"#)
        let decoded = try decode(Reading.self, #"{"raw":{"z":1,"a":2},"at":3,"zone":"oslo"}"#)
        #expect(decoded.raw.jsonString == #"{"z":1,"a":2}"#)
    }

    @Test func numbersKeepTheirText() throws {
        for text in ["1e400", "-0", "12345678901234567890", "1.0", "1E+2", "-0.000", "0.1"] {
            let value = try JSONValue(parsing: #"{"zone":"z","at":1,"raw":\#(text)}"#)
            let reading = try JSONValueDecoder().decode(Reading.self, from: value)
            #expect(reading.raw == .number(try #require(JSONNumber(text: text))))
            #expect(try encode(reading) == value, "\(text)")
            #expect(try JSONValueDecoder().decode(JSONNumber.self, from: .number(#require(JSONNumber(text: text)))).text == text)
        }
        #expect(try encode(-0.0).jsonString == "-0")
        #expect(try encode(UInt64.max).jsonString == "18446744073709551615")
        #expect(try encode(Int64.min).jsonString == "-9223372036854775808")
        #expect(try encode(0.1 as Float).jsonString == "0.10000000149011612")
        #expect(try decode(Double.self, "-0").sign == .minus)
        #expect(try decode(UInt64.self, "12345678901234567890") == 12_345_678_901_234_567_890)
        #expect(try decode(Int.self, "1e3") == 1000)
        #expect(try decode(Int.self, "2.50e1") == 25)
        #expect(try decode(Int8.self, "-128") == -128)
    }

    @Test func numbersThatDoNotFitAreErrorsThatSaySo() throws {
        #expect(try failure(Int.self, "12345678901234567890") == "the value must be an integer from -9223372036854775808 to 9223372036854775807, got 12345678901234567890")
        #expect(try failure(Int8.self, "200") == "the value must be an integer from -128 to 127, got 200")
        #expect(try failure(Int.self, "1.5") == "the value must be an integer, got 1.5")
        #expect(try failure(Double.self, "1e400") == "the value must be a number Double can hold, got 1e400")
        #expect(try failure(Float.self, "1e39") == "the value must be a number Float can hold, got 1e39")
        #expect(throws: EncodingError.self) { try encode(Double.nan) }
        #expect(throws: EncodingError.self) { try encode(["x": Double.infinity]) }
    }

    @Test func nestedValuesRoundTrip() throws {
        let batch = Batch(
            name: "b",
            readings: [
                Reading(zone: "a", at: 1, note: "first", raw: [1, "two", nil]),
                Reading(zone: "b", at: -2, note: nil, raw: .object([:])),
            ],
            limits: ["high": 30.5])
        let json = try encode(batch)
        #expect(
            json.jsonString
                == #"{"name":"b","readings":[{"zone":"a","at":1,"note":"first","raw":[1,"two",null]},{"zone":"b","at":-2,"raw":{}}],"limits":{"high":30.5}}"#)
        #expect(try JSONValueDecoder().decode(Batch.self, from: json) == batch)
    }

    @Test func absentAndNullOptionalsAreBothNil() throws {
        #expect(try decode(Reading.self, #"{"zone":"z","at":1,"raw":0}"#).note == nil)
        #expect(try decode(Reading.self, #"{"zone":"z","at":1,"raw":0,"note":null}"#).note == nil)
        // encodeIfPresent leaves nil out; encoding the optional itself writes null.
        #expect(try encode(Reading(zone: "z", at: 1, note: nil, raw: 0))["note"] == nil)
        #expect(try encode([nil, 1] as [Int?]).jsonString == "[null,1]")
        // A JSONValue member that is null is the value null, not a missing member.
        #expect(try decode(Reading.self, #"{"zone":"z","at":1,"raw":null}"#).raw == .null)
        #expect(try failure(Reading.self, #"{"zone":"z","at":1}"#) == #""raw" is missing"#)
    }

    @Test func unknownMembersAreIgnored() throws {
        let reading = try decode(Reading.self, #"{"zone":"z","extra":{"deep":[1]},"at":1,"raw":0,"more":null}"#)
        #expect(reading == Reading(zone: "z", at: 1, note: nil, raw: 0))
    }

    @Test func errorsNameTheMemberByItsPath() throws {
        #expect(try failure(Reading.self, #"{"zone":"z","raw":0}"#) == #""at" is missing"#)
        #expect(try failure(Reading.self, #"{"zone":"z","at":"3","raw":0}"#) == #""at" must be an integer, got a string"#)
        #expect(try failure(Reading.self, #"{"zone":null,"at":3,"raw":0}"#) == #""zone" must be a string, got null"#)
        #expect(try failure(Reading.self, #"[1]"#) == "the value must be an object, got an array")
        #expect(
            try failure(Batch.self, #"{"name":"b","readings":[{"zone":"a","at":1,"raw":0},{"zone":7,"at":1,"raw":0}]}"#)
                == #""readings/1/zone" must be a string, got a number"#)
        #expect(try failure(Batch.self, #"{"name":"b","readings":[{"at":1,"raw":0}]}"#) == #""readings/0/zone" is missing"#)
        #expect(try failure(Batch.self, #"{"name":"b","readings":{}}"#) == #""readings" must be a list, got an object"#)
        #expect(try failure([String: Int].self, #"{"a/b~c":true}"#) == #""a~1b~0c" must be an integer, got a boolean"#)
        #expect(try failure([Int].self, #"[1,2,"x"]"#) == #""2" must be an integer, got a string"#)

        var caught: DecodingError?
        do { _ = try decode(Batch.self, #"{"name":"b","readings":[{"zone":"a","at":true,"raw":0}]}"#) } catch let error as DecodingError {
            caught = error
        }
        #expect(caught?.pointer == JSONPointer("/readings/0/at"))
        guard case .typeMismatch(let type, _)? = caught else {
            Issue.record("expected a type mismatch, got \(String(describing: caught))")
            return
        }
        #expect(type is Int.Type)
    }

    @Test func pointersAreWrittenAsTheirText() throws {
        #expect(try encode(JSONPointer("/headers/Accept")) == "/headers/Accept")
        #expect(try decode(JSONPointer.self, #""/a~1b""#).tokens == ["a/b"])
        #expect(try failure(JSONPointer.self, #""a""#) == #"the value must be a JSON Pointer (empty, or "/" before each key), got "a""#)
    }

    /// A hand-written Codable type that uses nested, unkeyed and super containers.
    struct Envelope: Codable, Equatable {
        var tags: [String]
        var header: [String: Int]
        var body: JSONValue

        enum Key: String, CodingKey { case meta, tags, header, body }

        init(tags: [String], header: [String: Int], body: JSONValue) {
            self.tags = tags
            self.header = header
            self.body = body
        }

        func encode(to encoder: any Encoder) throws {
            var fields = encoder.container(keyedBy: Key.self)
            var meta = fields.nestedContainer(keyedBy: Key.self, forKey: .meta)
            var tagList = meta.nestedUnkeyedContainer(forKey: .tags)
            for tag in tags { try tagList.encode(tag) }
            try meta.encode(header, forKey: .header)
            try body.encode(to: fields.superEncoder(forKey: .body))
        }

        init(from decoder: any Decoder) throws {
            let fields = try decoder.container(keyedBy: Key.self)
            let meta = try fields.nestedContainer(keyedBy: Key.self, forKey: .meta)
            var tagList = try meta.nestedUnkeyedContainer(forKey: .tags)
            var tags: [String] = []
            while !tagList.isAtEnd { tags.append(try tagList.decode(String.self)) }
            self.tags = tags
            header = try meta.decode([String: Int].self, forKey: .header)
            body = try JSONValue(from: fields.superDecoder(forKey: .body))
        }
    }

    @Test func nestedAndSuperContainers() throws {
        let envelope = Envelope(tags: ["x", "y"], header: ["n": 1], body: ["k": 1.50])
        let json = try encode(envelope)
        #expect(json.jsonString == #"{"meta":{"tags":["x","y"],"header":{"n":1}},"body":{"k":1.5}}"#)
        #expect(try JSONValueDecoder().decode(Envelope.self, from: json) == envelope)
        let exact = try decode(Envelope.self, #"{"meta":{"tags":[],"header":{}},"body":{"k":1.50}}"#)
        #expect(exact.body.jsonString == #"{"k":1.50}"#, "a JSONValue read through a decoder keeps its text")
    }

    @Test func aValueThatEncodesNothingIsAnError() {
        struct Nothing: Encodable {
            func encode(to encoder: any Encoder) throws {}
        }
        #expect(throws: EncodingError.self) { try encode(Nothing()) }
        #expect((try? encode(["inner": Nothing()]))?.jsonString == #"{"inner":{}}"#)
    }

    /// Through any other coder a JSONValue is plain JSON (there the coder decides the order and the numbers).
    @Test func otherCodersSeePlainJSON() throws {
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(#"{"a":[1,2.5,"x",null,true,{"b":-3}]}"#.utf8))
        #expect(value["a"] == [1, 2.5, "x", nil, true, ["b": -3]])
        let small: JSONValue = ["n": 12, "s": "t"]
        let text = String(decoding: try JSONEncoder().encode(small), as: UTF8.self)
        #expect(try JSONValue(parsing: text)["n"] == 12)
    }
}
