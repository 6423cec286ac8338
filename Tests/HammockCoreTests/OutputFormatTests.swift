import HammockCore
import HammockJSON
import Testing

private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

private func view(_ id: String, _ templates: [ViewRender.Field: String] = [:]) throws -> ViewDefinition {
    let render = try ViewRender(templates: templates.mapValues { try RenderTemplate.parse($0) })
    return ViewDefinition(id: id, sources: ["s"], render: templates.isEmpty ? nil : render)
}

private func line(_ id: String, _ content: JSONValue, status: ViewStatus = .data) -> OutputLine {
    .view(id: id, state: ViewState(status: status, content: ["s": content], latestError: nil, errors: [], canTryAgain: false))
}

@Suite struct BarEncoding {
    @Test func textIsWrittenOncePerChangeOfWhatIsShown() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v", [.text: "n={{ s | round }}"])])
        #expect(encoder.encode(line("v", 1.2), now: now, redactor: .none) == "n=1\n")
        // The view changed, what it shows did not.
        #expect(encoder.encode(line("v", 1.4), now: now, redactor: .none) == nil)
        #expect(encoder.encode(line("v", 2), now: now, redactor: .none) == "n=2\n")
    }

    @Test func everyOtherLineAndOtherViewsAreDropped() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v")])
        let others: [OutputLine] = [
            .hello(sources: ["s"], views: ["v", "w"], version: "1"), .source(id: "s", event: nil, state: SourceState()),
            .ack(id: .string("1")), .error(message: "no"), .bye(reason: "signal", failed: nil), line("w", "other"),
        ]
        for other in others { #expect(encoder.encode(other, now: now, redactor: .none) == nil) }
        #expect(encoder.encode(line("v", "mine"), now: now, redactor: .none) == "mine\n")
    }

    @Test func severalViewsWaitForEachThenJoin() throws {
        var encoder = BarEncoder(format: .text, views: [try view("a"), try view("b")])
        #expect(encoder.encode(line("b", "B"), now: now, redactor: .none) == nil)
        #expect(encoder.encode(line("a", "A"), now: now, redactor: .none) == "A | B\n")
        #expect(encoder.encode(line("b", "B\nmore"), now: now, redactor: .none) == nil)  // first line only: same
        #expect(encoder.encode(line("b", "C"), now: now, redactor: .none) == "A | C\n")
    }

    @Test func lineBreaksInARenderedTextBecomeSpaces() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v", [.text: "a\nb {{ s }}"])])
        #expect(encoder.encode(line("v", 1), now: now, redactor: .none) == "a b 1\n")
    }

    @Test func waybarObjects() throws {
        var encoder = BarEncoder(
            format: .waybar,
            views: [try view("v", [.text: "{{ s }}%", .percentage: "{{ s }}", .tooltip: "tip"])])
        let plain = encoder.encode(line("v", 50), now: now, redactor: .none)
        #expect(plain == #"{"text":"50%","alt":"data","tooltip":"tip","class":"data","percentage":50}"# + "\n")
        let encodedIdle = encoder.encode(line("v", .null, status: .idle), now: now, redactor: .none)
        let idle = try #require(encodedIdle)
        let value = try JSONValue(parsing: Array(idle.dropLast().utf8))
        #expect(value["alt"] == .string("idle"))
    }

    @Test func polybarColors() throws {
        var encoder = BarEncoder(format: .polybar, views: [try view("v", [.text: "{{ s }}", .color: "{{ s }}"])])
        #expect(encoder.encode(line("v", "#a3be8c"), now: now, redactor: .none) == "%{F#a3be8c}#a3be8c%{F-}\n")
        // A color name polybar cannot take is left out.
        #expect(encoder.encode(line("v", "red"), now: now, redactor: .none) == "red\n")
        #expect(encoder.encode(line("v", "#fff"), now: now, redactor: .none) == "%{F#fff}#fff%{F-}\n")
    }

    @Test func secretsAreRedactedInLiteralsAndValuesOnce() throws {
        var encoder = BarEncoder(format: .text, views: [try view("v", [.text: "token tok-1 {{ s }}"])])
        let redactor = Redactor(secrets: ["tok-1", "act"])
        // "act" is inside "[redacted]": the value's replacement must not be redacted again.
        #expect(encoder.encode(line("v", "tok-1 act"), now: now, redactor: redactor) == "token [redacted] [redacted] [redacted]\n")
    }

    @Test func selections() {
        #expect(StdoutFormat.json.checkSelection([]) == nil)
        #expect(StdoutFormat.json.checkSelection(["v"]) != nil)
        #expect(StdoutFormat.waybar.checkSelection(["v"]) == nil)
        #expect(StdoutFormat.waybar.checkSelection([]) != nil)
        #expect(StdoutFormat.waybar.checkSelection(["v", "w"]) != nil)
        #expect(StdoutFormat.text.checkSelection(["v", "w"]) == nil)
        #expect(StdoutFormat.polybar.checkSelection([]) != nil)
    }
}
