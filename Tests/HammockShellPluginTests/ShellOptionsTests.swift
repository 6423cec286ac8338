import HammockJSON
import HammockPluginKit
import Testing

@testable import HammockShellPlugin

/// A shell source's options, checked in-process: what each key gives and every way it can be wrong.
@Suite struct ShellOptionsTests {
    /// The problems with `options` by pointer, or nil when they are accepted.
    private func problems(_ options: JSONValue) -> [String: String]? {
        do {
            _ = try ShellOptions(options)
            return nil
        } catch {
            return Dictionary(error.problems.map { ($0.pointer.description, $0.message) }, uniquingKeysWith: { $0 + "; " + $1 })
        }
    }

    @Test func aCommandAloneTakesTheDefaults() throws {
        let options = try ShellOptions(["command": ["echo", "hi"]])
        guard case .argv(let argv) = options.program else {
            Issue.record("not argv: \(options.program)")
            return
        }
        #expect(argv == ["echo", "hi"])
        #expect(options.environment.isEmpty)
        #expect(options.workingDirectory == nil)
        #expect(options.parse == .text)
        #expect(options.mode == .poll)
        #expect(options.maxBytes == 10 << 20)
    }

    @Test func everyKeySet() throws {
        let options = try ShellOptions([
            "script": "echo $A | tr a b", "env": ["B": "2", "A": 1, "C": false], "cwd": "/tmp", "parse": "json",
            "maxBytes": "64KiB", "mode": "stream",
        ])
        guard case .script(let script) = options.program else {
            Issue.record("not a script: \(options.program)")
            return
        }
        #expect(script == "echo $A | tr a b")
        #expect(options.environment.map(\.0) == ["B", "A", "C"])
        #expect(options.environment.map(\.1) == ["2", "1", "false"])
        #expect(options.workingDirectory == "/tmp")
        #expect(options.parse == .json)
        #expect(options.maxBytes == 65_536)
        #expect(options.mode == .stream)
    }

    @Test func everyParseFormatWorksInPollMode() throws {
        for format in OutputFormat.allCases {
            #expect(try ShellOptions(["command": ["true"], "parse": .string(format.rawValue)]).parse == format)
        }
    }

    @Test func aProgramIsNeeded() {
        #expect(problems(["parse": "text"]) == [
            "": #"a shell source needs "command" (a list of arguments) or "script" (run by /bin/sh -c)"#
        ])
        #expect(problems(["command": ["true"], "script": "true"]) == ["/script": #"give either "command" or "script", not both"#])
        #expect(problems(["command": ["", "x"]]) == ["/command/0": "command[0] must name a program"])
        #expect(problems(["command": []]) == ["/command": "command must not be empty"])
        #expect(problems(["script": "  \n"]) == ["/script": "script must not be empty"])
    }

    @Test func optionsThatAreNoMapping() {
        #expect(problems(["echo", "hi"]) == [
            "": "the options of a shell source must be a mapping, found an array; "
                + #"a shell source needs "command" (a list of arguments) or "script" (run by /bin/sh -c)"#
        ])
    }

    @Test func badTypesAreReportedAtTheirPlace() {
        #expect(problems(["command": ["ls", 3], "env": ["A": ["x"]], "cwd": 5, "maxBytes": true]) == [
            "/command/1": "command[1] must be a string, found a number",
            "/env/A": "env.A must be a string, found an array",
            "/cwd": "cwd must be a string, found a number",
            "/maxBytes": "maxBytes must be a whole number from 1 to 1073741824 (or a size such as 64KiB, 10MiB; at most 1024 MiB)",
        ])
        #expect(problems(["script": ["echo"]]) == ["/script": "script must be a string, found an array"])
        #expect(problems(["command": "echo hi"]) == ["/command": "command must be a list of strings, found a string"])
        #expect(problems(["command": ["true"], "env": "A=1"]) == [
            "/env": "env must be a mapping of names to values, found a string"
        ])
    }

    @Test func badValues() {
        #expect(problems(["command": ["true"], "env": ["": "x", "A=B": "y", "OK": "z"]]) == [
            "/env/": #""" is not a valid environment variable name"#,
            "/env/A=B": #""A=B" is not a valid environment variable name"#,
        ])
        #expect(problems(["command": ["true"], "cwd": ""]) == ["/cwd": "cwd must not be empty"])
        #expect(problems(["command": ["true"], "maxBytes": 0])?["/maxBytes"] != nil)
        #expect(problems(["command": ["true"], "parse": "xml"]) == ["/parse": #"parse must be one of text, lines, json, jsonl, yaml, found "xml""#])
        #expect(problems(["command": ["true"], "parse": "jsno"]) == [
            "/parse": #"parse must be one of text, lines, json, jsonl, yaml, found "jsno" (did you mean "json"?)"#
        ])
        #expect(problems(["command": ["true"], "mode": "strem"]) == [
            "/mode": #"mode must be one of poll, stream, found "strem" (did you mean "stream"?)"#
        ])
    }

    @Test(arguments: [OutputFormat.lines, .yaml])
    func streamModeTakesOnlyFormatsThatWorkPerLine(_ format: OutputFormat) {
        #expect(problems(["script": "true", "mode": "stream", "parse": .string(format.rawValue)]) == [
            "/parse": "parse: \(format.rawValue) does not work in stream mode, where each line is one value (use text or json)"
        ])
    }

    @Test func anUnknownKeyGetsAHint() {
        #expect(problems(["comand": ["ls"], "command": ["ls"]]) == [
            "/comand": #"unknown key "comand" in a shell source (did you mean "command"?)"#
        ])
        #expect(problems(["command": ["ls"], "shell": "bash"])?["/shell"]?.hasPrefix(#"unknown key "shell" in a shell source; expected one of: command, script, env, cwd, parse, maxBytes, mode, kind"#) == true)
    }

    @Test func everyProblemIsReportedAtOnce() {
        let found = problems(["comand": ["ls"], "parse": "xml", "maxBytes": "lots", "mode": "watch"])
        #expect(found.map { $0.keys.sorted() } == ["", "/comand", "/maxBytes", "/mode", "/parse"])
    }
}
