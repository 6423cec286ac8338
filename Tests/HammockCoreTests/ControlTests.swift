import HammockCore
import HammockJSON
import Testing

/// SPEC §6: control lines on stdin.
@Suite struct ControlLines {
    func parse(_ text: String) throws(ControlLineError) -> ControlCommand {
        try ControlRequest(line: Array(text.utf8)).command
    }

    func failure(_ text: String) -> String? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func everyOperation() throws {
        #expect(try parse(#"{"op":"load","source":"a"}"#) == .load(.source("a")))
        #expect(try parse(#"{"op":"load","view":"v"}"#) == .load(.view("v")))
        #expect(try parse(#"{"op":"loadIfNeeded","source":"a"}"#) == .loadIfNeeded(.source("a")))
        #expect(try parse(#"{"op":"retry","view":"repo_page"}"#) == .retry(.view("repo_page")))
        #expect(try parse(#"{"op":"cancel","source":"a"}"#) == .cancel(.source("a")))
        #expect(try parse(#"{"op":"wipe","view":"v"}"#) == .wipe(.view("v")))
        #expect(
            try parse(#"{"op":"override","source":"a","content":{"x":[1,null]}}"#)
                == .override(source: "a", content: ["x": [1, nil]]))
        #expect(try parse(#"{"op":"override","source":"a","content":null}"#) == .override(source: "a", content: .null))
        #expect(try parse(#"{"op":"snapshot"}"#) == .snapshot)
        #expect(try parse(#"{"op":"reload"}"#) == .reload)
        #expect(try parse(#" {"source":"a","op":"load","extra":1} "#) == .load(.source("a")))
    }

    @Test func notJSON() {
        let message = failure("load a")
        #expect(message?.hasPrefix("control line is not valid JSON: ") == true)
        #expect(message?.contains(" at byte 0") == true)
        #expect(failure(#"{"op":"load""#)?.hasPrefix("control line is not valid JSON: ") == true)
    }

    @Test func notAnObject() {
        #expect(
            failure(#"["load"]"#)
                == #"control line must be a JSON object like {"op":"load","source":"id"}, got an array"#)
        #expect(failure("42")?.hasSuffix("got a number") == true)
    }

    @Test func noOp() {
        #expect(
            failure(#"{"source":"a"}"#)
                == #"control line has no "op"; expected one of load, loadIfNeeded, retry, cancel, wipe, override, more, snapshot, reload"#)
        #expect(failure(#"{"op":5}"#) == #""op" must be a string, got a number"#)
    }

    @Test func unknownOp() {
        #expect(
            failure(#"{"op":"reboot","source":"a"}"#)
                == #"unknown op "reboot"; expected one of load, loadIfNeeded, retry, cancel, wipe, override, more, snapshot, reload"#)
    }

    @Test func missingTarget() {
        #expect(failure(#"{"op":"load"}"#) == #""load" needs a "source" or a "view""#)
        #expect(failure(#"{"op":"cancel"}"#) == #""cancel" needs a "source" or a "view""#)
        #expect(failure(#"{"op":"override","content":1}"#) == #""override" needs a "source" (a string)"#)
        #expect(failure(#"{"op":"override","source":"a"}"#) == #""override" needs a "content""#)
    }

    @Test func bothSourceAndView() {
        #expect(failure(#"{"op":"load","source":"a","view":"v"}"#) == #""load" takes either "source" or "view", not both"#)
    }

    @Test func targetMustBeAString() {
        #expect(failure(#"{"op":"load","source":1}"#) == #""source" and "view" must be strings"#)
        #expect(failure(#"{"op":"wipe","view":["v"]}"#) == #""source" and "view" must be strings"#)
    }

    /// Every command written in its declared form reads back as itself, and the form is the documented one.
    @Test func everyCommandRoundTrips() throws {
        let commands: [(ControlCommand, String)] = [
            (.load(.source("a")), #"{"op":"load","source":"a"}"#),
            (.loadIfNeeded(.view("v")), #"{"op":"loadIfNeeded","view":"v"}"#),
            (.retry(.source("a")), #"{"op":"retry","source":"a"}"#),
            (.cancel(.view("v")), #"{"op":"cancel","view":"v"}"#),
            (.wipe(.source("a")), #"{"op":"wipe","source":"a"}"#),
            (.override(source: "a", content: ["z": 1.50, "a": nil]), #"{"op":"override","source":"a","content":{"z":1.5,"a":null}}"#),
            (.override(source: "a", content: .null), #"{"op":"override","source":"a","content":null}"#),
            (.more(source: "a", count: 1), #"{"op":"more","source":"a"}"#),
            (.more(source: "a", count: 3), #"{"op":"more","source":"a","count":3}"#),
            (.snapshot, #"{"op":"snapshot"}"#),
            (.reload, #"{"op":"reload"}"#),
        ]
        for (command, text) in commands {
            #expect(try JSONValueEncoder().encode(command).jsonString == text)
            #expect(try parse(text) == command)
        }
        #expect(Set(commands.map(\.0.op)) == Set(ControlCommand.operations))
        let exact = try parse(#"{"op":"override","source":"a","content":[1.50,-0,12345678901234567890]}"#)
        #expect(exact == .override(source: "a", content: .array(["1.50", "-0", "12345678901234567890"].map { .number(JSONNumber(text: $0)!) })))
    }

    /// The issue 13 addition: a line may name itself with `"id"`, a string or a number kept as its text; a
    /// line that fails carries its id on the error whenever the id itself is valid.
    @Test func anIdIsAStringOrANumberKeptAsItsText() throws {
        func request(_ text: String) throws(ControlLineError) -> ControlRequest {
            try ControlRequest(line: Array(text.utf8))
        }
        #expect(try request(#"{"op":"load","source":"a","id":"r-1"}"#) == ControlRequest(.load(.source("a")), id: .string("r-1")))
        #expect(try request(#"{"op":"snapshot","id":12345678901234567890.50}"#).id == .number(JSONNumber(text: "12345678901234567890.50")!))
        #expect(try request(#"{"op":"snapshot"}"#).id == nil)
        for bad in ["true", "null", "[1]", #"{"n":1}"#] {
            do {
                _ = try request(#"{"op":"snapshot","id":\#(bad)}"#)
                Issue.record("id \(bad) was taken")
            } catch {
                #expect(error.message.hasPrefix(#""id" must be a string or a number, got "#))
                #expect(error.id == nil)
            }
        }
        do {
            _ = try request(#"{"op":"reboot","id":7}"#)
            Issue.record("an unknown op was taken")
        } catch {
            #expect(error.id == .number(7))
            #expect(error.message.hasPrefix(#"unknown op "reboot""#))
        }
        do {
            _ = try request(#"{"op":"load","source":1,"id":"x"}"#)
            Issue.record("a number source was taken")
        } catch {
            #expect(error == ControlLineError(#""source" and "view" must be strings"#, id: .string("x")))
        }
    }
}
