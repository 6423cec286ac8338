import HammockCore
import HammockJSON
import Testing

@Suite struct DurationParsing {
    func parsed(_ text: String) -> Duration? { try? parseDuration(text).get() }

    func problem(_ text: String) -> String? {
        if case .failure(let problem) = parseDuration(text) { return problem.message }
        return nil
    }

    @Test func validForms() {
        #expect(parsed("250ms") == .milliseconds(250))
        #expect(parsed("5s") == .seconds(5))
        #expect(parsed("2m") == .seconds(120))
        #expect(parsed("1h") == .seconds(3600))
        #expect(parsed("1.5s") == .milliseconds(1500))
        #expect(parsed("1m30s") == .seconds(90))
        #expect(parsed("1h2m3s4ms") == .milliseconds(3_723_004))
        #expect(parsed(" 5s ") == .seconds(5))
        #expect(parsed("0s") == .zero)
    }

    @Test func noUnit() {
        #expect(problem("5") == #""5" has no unit; write 5s, 5ms, 5m or 5h"#)
        #expect(problem("1.5") == #""1.5" has no unit; write 1.5s, 1.5ms, 1.5m or 1.5h"#)
    }

    @Test func garbage() {
        let expected = { (text: String) in #""\#(text)" is not a duration; write e.g. 250ms, 5s, 2m, 1h or 1m30s"# }
        for text in ["soon", "5 s", "5sec", "s", "-5s", "5d", "1.2.3s", "5s5"] {
            #expect(problem(text) == expected(text), "\(text)")
        }
        #expect(problem("") == "expected a duration such as 250ms, 5s, 2m or 1h")
        #expect(problem("   ") == "expected a duration such as 250ms, 5s, 2m or 1h")
    }

    @Test func tooLong() {
        #expect(problem("999999999999h") == #""999999999999h" is too long"#)
    }

    @Test func humanReadableRoundTrips() {
        #expect(Duration.milliseconds(250).humanReadable == "250ms")
        #expect(Duration.seconds(90).humanReadable == "1m30s")
        #expect(Duration.seconds(3600).humanReadable == "1h")
        #expect(Duration.zero.humanReadable == "0s")
        for text in ["250ms", "5s", "2m", "1h", "1m30s", "1h2m3s4ms"] {
            #expect(parsed(text)?.humanReadable == text)
        }
    }
}

@Suite struct TemplateParsing {
    @Test func noTemplate() throws {
        #expect(try Template.parse("https://example.com/a") == nil)
        #expect(try Template.parse("a { b } c}}") == nil)
    }

    @Test func referencesAndLiterals() throws {
        let template = try #require(try Template.parse("https://api.github.com/users/{{ repo.owner.login }}/x"))
        #expect(template.summary == ["'https://api.github.com/users/'", "repo.owner.login", "'/x'"])
        #expect(template.references.map(\.source) == ["repo"])
        #expect(template.references.map(\.path) == [["owner", "login"]])
        #expect(template.references.map(\.description) == ["repo.owner.login"])
        #expect(template.references.first?.pointer == JSONPointer("/owner/login"))
    }

    @Test func wholeSourceTightBracesAndIndices() throws {
        let template = try #require(try Template.parse("{{a}}-{{ b-2.items.0.name_x }}"))
        #expect(template.summary == ["a", "'-'", "b-2.items.0.name_x"])
        #expect(template.references.map(\.path) == [[], ["items", "0", "name_x"]])
    }

    @Test func invalid() {
        func message(_ text: String) -> String? {
            do {
                _ = try Template.parse(text)
                return nil
            } catch {
                return error.message
            }
        }
        #expect(message("x {{ repo.owner") == #"unclosed "{{" in template (expected "}}")"#)
        #expect(message("{{ }}") == #""{{  }}" is not a reference; write {{ source }} or {{ source.key.0.key }}"#)
        #expect(message("{{ a..b }}") == #""{{ a..b }}" is not a reference; write {{ source }} or {{ source.key.0.key }}"#)
        #expect(message("{{ a.b. }}") == #""{{ a.b. }}" is not a reference; write {{ source }} or {{ source.key.0.key }}"#)
        #expect(message("{{ a | upper }}") == #""{{ a | upper }}" is not a reference; write {{ source }} or {{ source.key.0.key }}"#)
        #expect(message("{{ .a }}") == #""{{ .a }}" is not a reference; write {{ source }} or {{ source.key.0.key }}"#)
    }

    @Test func rendering() throws {
        let template = try #require(try Template.parse("http://x/{{ post.user }}?n={{ post.n }}&all={{ post }}"))
        let post: JSONValue = ["user": "a b/c&d", "n": 3]
        #expect(
            template.render(percentEncode: false) { $0 == "post" ? post : nil }
                == .success(#"http://x/a b/c&d?n=3&all={"user":"a b/c&d","n":3}"#))
        #expect(
            template.render(percentEncode: true) { $0 == "post" ? post : nil }
                == .success("http://x/a%20b%2Fc%26d?n=3&all=%7B%22user%22%3A%22a%20b%2Fc%26d%22%2C%22n%22%3A3%7D"))
        #expect(template.render(percentEncode: true) { _ in nil } == .failure(.inputMissing("post")))
        guard case .failure(let missing) = template.render(percentEncode: true, content: { _ in ["n": 1] }) else {
            Issue.record("a missing value must fail")
            return
        }
        #expect(missing.message == #"{{ post.user }} has no value in the content of "post""#)
        #expect(TemplateResolutionProblem.inputMissing("post").message == #"waiting for "post", which has no content yet"#)
    }

    @Test func percentEncodingKeepsUnreservedAndEncodesUTF8() throws {
        let template = try #require(try Template.parse("http://x/{{ s }}"))
        #expect(template.render(percentEncode: true) { _ in "Az09-._~ é" } == .success("http://x/Az09-._~%20%C3%A9"))
    }

    @Test func aReferenceThatOpensTheURLSuppliesItsBaseUnencoded() throws {
        let template = try #require(try Template.parse("{{ repo.url }}/stats?q={{ repo.url }}"))
        let content: JSONValue = ["url": "https://api.example.com/repos/a b"]
        #expect(
            template.render(percentEncode: true) { _ in content }
                == .success("https://api.example.com/repos/a b/stats?q=https%3A%2F%2Fapi.example.com%2Frepos%2Fa%20b"))
    }

    @Test func resolvedOptionsFillsNestedValues() throws {
        let definition = SourceDefinition(
            id: "user", kind: "shell", options: ["command": ["echo", "{{ post.id }}"], "env": ["X": "{{ post.id }}!"]],
            templates: [
                TemplatedOption(pointer: JSONPointer("/command/1")!, template: try #require(try Template.parse("{{ post.id }}")), percentEncode: false),
                TemplatedOption(pointer: JSONPointer("/env/X")!, template: try #require(try Template.parse("{{ post.id }}!")), percentEncode: false),
            ])
        #expect(definition.inputs == ["post"])
        let resolved = definition.resolvedOptions { $0 == "post" ? ["id": 7] : nil }
        #expect(resolved == .success(["command": ["echo", "7"], "env": ["X": "7!"]]))
    }
}

extension Template {
    /// Literals in quotes, references as `source.path`.
    var summary: [String] {
        parts.map {
            switch $0 {
            case .literal(let text): "'\(text)'"
            case .reference(let reference): reference.description
            }
        }
    }
}
