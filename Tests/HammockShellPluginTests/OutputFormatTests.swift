import HammockCore
import HammockJSON
import Testing

@testable import HammockShellPlugin

/// How a command's stdout becomes content, in-process: a whole output (poll mode) and one line (stream).
@Suite struct OutputFormatTests {
    private func output(_ format: OutputFormat, _ text: String) -> Result<JSONValue, SourceError> {
        format.parse(output: Array(text.utf8))
    }

    private func line(_ format: OutputFormat, _ text: String) -> Result<JSONValue, SourceError>? {
        format.parse(line: Array(text.utf8)[...])
    }

    @Test func textLosesOneTrailingNewlineOnly() throws {
        #expect(try output(.text, "hi\n").get() == "hi")
        #expect(try output(.text, "a\n\n").get() == "a\n")
        #expect(try output(.text, "no newline").get() == "no newline")
        #expect(try output(.text, "").get() == "")
        #expect(try output(.text, "crlf\r\n").get() == "crlf\r")
    }

    @Test func textTakesBadUTF8AsReplacementCharacters() throws {
        #expect(format(.text, bytes: [0x61, 0xFF, 0x62]) == "a\u{FFFD}b")
    }

    private func format(_ format: OutputFormat, bytes: [UInt8]) -> JSONValue? {
        try? format.parse(output: bytes).get()
    }

    @Test func linesAreAnArrayWithoutCarriageReturnsOrALastEmptyLine() throws {
        #expect(try output(.lines, "one\ntwo\nthree\n").get() == ["one", "two", "three"])
        #expect(try output(.lines, "one\r\n\r\nthree").get() == ["one", "", "three"])
        #expect(try output(.lines, "").get() == [])
        #expect(try output(.lines, "\n").get() == [""])
        #expect(try output(.lines, "a\n\n").get() == ["a", ""])
    }

    @Test func jsonIsParsedAndAFailureSaysWhereAndWhy() throws {
        #expect(try output(.json, #"{"a": [1, true], "b": null}"#).get() == ["a": [1, true], "b": nil])
        #expect(try output(.json, "  42\n").get() == 42)
        for empty in ["", " \n\t\r\n"] {
            #expect(output(.json, empty) == .failure(SourceError(message: "stdout is empty, expected JSON", code: .parseFailed)))
        }
        guard case .failure(let error) = output(.json, "not json") else {
            Issue.record("garbage parsed as JSON")
            return
        }
        #expect(error.code == .parseFailed)
        #expect(error.message.hasPrefix("stdout is not JSON: "), "\(error.message)")
        #expect(error.message.hasSuffix(" at byte 0"), "\(error.message)")
        guard case .failure(let late) = output(.json, #"{"a": tru}"#) else {
            Issue.record("a bad literal parsed as JSON")
            return
        }
        #expect(late.message.hasSuffix(" at byte 6"), "\(late.message)")
    }

    @Test func yamlIsParsedAndWhatJSONCannotCarryIsAFailure() throws {
        #expect(try output(.yaml, "name: x\ncount: 3\nflag: on\n").get() == ["name": "x", "count": 3, "flag": "on"])
        #expect(try output(.yaml, "").get() == .null)
        #expect(try output(.yaml, "- 1\n- two\n").get() == [1, "two"])
        guard case .failure(let notJSON) = output(.yaml, "x: .inf\n") else {
            Issue.record("infinity became a value")
            return
        }
        #expect(notJSON.code == .parseFailed)
        #expect(notJSON.message.hasPrefix("stdout is not YAML that JSON can carry: "), "\(notJSON.message)")
        guard case .failure(let broken) = output(.yaml, "a: [1, 2\nb: 3\n") else {
            Issue.record("broken YAML parsed")
            return
        }
        #expect(broken.code == .parseFailed)
        #expect(broken.message.hasPrefix("stdout is not YAML: "), "\(broken.message)")
    }

    @Test func aLineOfTextIsItselfWithoutACarriageReturn() throws {
        #expect(try line(.text, "hello")?.get() == "hello")
        #expect(try line(.text, "hello\r")?.get() == "hello")
        // A blank line is a value in text mode: a status line can be cleared.
        #expect(try line(.text, "")?.get() == "")
    }

    @Test func aLineOfJSONIsAValueABlankOneNothing() throws {
        #expect(try line(.json, #"{"n": 1}"#)?.get() == ["n": 1])
        #expect(try line(.json, "[1]\r")?.get() == [1])
        #expect(line(.json, "") == nil)
        #expect(line(.json, " \t\r") == nil)
        guard case .failure(let error)? = line(.json, "oops") else {
            Issue.record("a bad line parsed")
            return
        }
        #expect(error.code == .parseFailed)
        #expect(error.message.hasPrefix("a line of output is not JSON: "), "\(error.message)")
        #expect(error.message.hasSuffix(" at byte 0"), "\(error.message)")
    }

    @Test func onlyTextAndJSONWorkPerLine() {
        #expect(OutputFormat.allCases.filter(\.worksPerLine) == [.text, .json])
    }
}

extension OutputFormatTests {
    @Test func jsonlIsAnArrayOfTheLinesValues() throws {
        #expect(try output(.jsonl, "{\"a\":1}\n\n[2]\n").get() == [["a": 1], [2]])
        guard case .failure(let error) = output(.jsonl, "{}\n{oops}\n") else {
            Issue.record("a bad line parsed")
            return
        }
        #expect(error.message.hasPrefix("stdout is not JSON Lines: line 2 is not JSON: "), "\(error.message)")
        #expect(error.code == .parseFailed)
    }

    @Test func jsonThatIsJSONLinesSaysSo() {
        guard case .failure(let error) = output(.json, "{}\n{}\n") else {
            Issue.record("two values parsed as one")
            return
        }
        #expect(error.message == "stdout is not one JSON value but 2 lines of JSON; set parse: jsonl")
    }
}
