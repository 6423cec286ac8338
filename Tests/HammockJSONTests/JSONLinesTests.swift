import HammockJSON
import Testing

/// JSON Lines (`parse: jsonl` in the rest, file and shell kinds): one value per line, read as an array.
@Suite struct JSONLinesTests {
    private func lines(_ text: String) throws(JSONLinesError) -> [JSONValue] {
        try JSONValue.parseLines(Array(text.utf8))
    }

    @Test func oneValuePerLineBlankLinesAndCarriageReturnsSkipped() throws {
        #expect(try lines(#"{"id":0}"# + "\n" + #"{"id":1}"# + "\n") == [["id": 0], ["id": 1]])
        #expect(try lines("1\r\n\r\n  \n\"two\"\r\n[3]") == [1, "two", [3]])
        #expect(try lines("") == [])
        #expect(try lines("\n\n") == [])
    }

    @Test func aBadLineIsNamedByItsNumberAndColumn() {
        #expect(throws: JSONLinesError(line: 3, column: 6, message: "expected ':' after an object key")) {
            try lines("{}\n{}\n{\"a\" 1}\n")
        }
        let error = #expect(throws: JSONLinesError.self) { try lines("[1,\n2]\n") }
        #expect(error?.line == 1)
        #expect(error?.description.hasPrefix("line 1 is not JSON: ") == true)
        // Two values on one line are not JSON Lines either.
        #expect((#expect(throws: JSONLinesError.self) { try lines("1 2\n") })?.line == 1)
    }

    @Test func jsonLinesCountHintsOnlyWhenThereAreSeveralValues() {
        #expect(JSONValue.jsonLinesCount(Array("{}\n{}\n{}\n".utf8)) == 3)
        #expect(JSONValue.jsonLinesCount(Array("{}\n".utf8)) == nil)
        #expect(JSONValue.jsonLinesCount(Array("{}\n{\n".utf8)) == nil)
    }
}
