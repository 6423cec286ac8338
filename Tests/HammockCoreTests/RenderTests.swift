import HammockCore
import HammockJSON
import HammockRendering
import Testing

/// Renders `template` over a view of `load` and `repo` whose content is `content`.
private func render(
    _ template: String, content: JSONValue = ["load": "0.52 0.58 0.59", "repo": ["stars": 1234, "owner": ["login": "ann"]]],
    status: ViewStatus = .data, error: SourceError? = nil, now: Timestamp = t0
) throws -> (text: String, problems: [String]) {
    let view = ViewDefinition(id: "v", sources: ["load", "repo"])
    let state = ViewState(
        status: status, content: content, latestError: error, errors: error.map { [(source: SourceID("repo"), error: $0)] } ?? [],
        canTryAgain: error != nil)
    return try RenderTemplate.parse(template).render(in: RenderContext(view: view, state: state, now: now))
}

/// The text alone, for a template that must render without a problem.
private func text(_ template: String, content: JSONValue? = nil) throws -> String {
    let result = try content.map { try render(template, content: ["load": $0, "repo": nil]) } ?? render(template)
    #expect(result.problems == [], "\(template)")
    return result.text
}

private func parseError(_ template: String) -> RenderTemplateError? {
    do {
        _ = try RenderTemplate.parse(template)
        return nil
    } catch {
        return error
    }
}

@Suite struct RenderTemplateParsing {
    @Test func literalsReferencesAndPipelines() throws {
        let template = try RenderTemplate.parse("{{ load | split(' ') | first }} ★ {{repo.owner.login}}")
        #expect(
            template.parts == [
                .expression(RenderExpression(reference: TemplateReference(source: "load", path: []), filters: [.split(separator: " "), .first])),
                .literal(" ★ "),
                .expression(RenderExpression(reference: TemplateReference(source: "repo", path: ["owner", "login"]), filters: [])),
            ])
        #expect(try RenderTemplate.parse("no braces").parts == [.literal("no braces")])
        #expect(try RenderTemplate.parse("").parts == [])
    }

    @Test func quotedArgumentsMayHoldBracesPipesAndEscapes() throws {
        let template = try RenderTemplate.parse(#"{{ load | split("}}|") | join('it\'s') }}"#)
        #expect(template.parts == [.expression(RenderExpression(
            reference: TemplateReference(source: "load", path: []), filters: [.split(separator: "}}|"), .join(separator: "it's")]))])
    }

    @Test func errorsSayWhatAndWhere() {
        #expect(parseError("ab {{ load") == RenderTemplateError("unclosed \"{{\" (expected \"}}\")", offset: 3))
        #expect(parseError("x }}") == RenderTemplateError("\"}}\" without an opening \"{{\"", offset: 2))
        #expect(
            parseError("{{ load | uper }}")
                == RenderTemplateError(
                    "unknown filter \"uper\" (did you mean \"upper\"?); filters: default, round, truncate, upper, lower, first, last, split, join, bytes, duration, ago",
                    offset: 10))
        #expect(parseError("{{ | upper }}")?.offset == 3)
        #expect(parseError("{{ load upper }}") == RenderTemplateError("expected \"|\" or \"}}\", found \"u\"", offset: 8))
        #expect(parseError("{{ load | truncate }}")?.message == "truncate takes one argument, the length, e.g. truncate(20), given 0 argument(s)")
        #expect(parseError("{{ load | truncate(0) }}")?.message == "truncate needs a whole number from 1 to 100000, found 0")
        #expect(parseError("{{ load | round(1.5) }}")?.offset == 16)
        #expect(parseError("{{ load | round(11) }}") != nil)
        #expect(parseError("{{ load | split('') }}")?.message == "split needs a non-empty quoted string, found \"\"")
        #expect(parseError("{{ load | join(1) }}") != nil)
        #expect(parseError("{{ load | default }}") != nil)
        #expect(parseError("{{ load | upper(1) }}")?.message == "upper takes no arguments, given 1 argument(s)")
        #expect(parseError("{{ load | default('x) }}")?.message == "unclosed string (expected ')")
        #expect(parseError("{{ load | default(x) }}")?.message == "expected a quoted string or a number, found \"x\"")
        #expect(parseError("{{ load | round(1 }}")?.message == "expected \",\" or \")\" in the arguments of round")
        #expect(parseError("{{ load. }}") != nil)
        // Offsets count Unicode scalars, as YAML columns do.
        #expect(parseError("★★ {{ }}")?.offset == 6)
    }
}

@Suite struct RenderFilters {
    @Test func referencesIntoTheContext() throws {
        #expect(try text("{{ load }}") == "0.52 0.58 0.59")
        #expect(try text("{{ repo.stars }} ★ by {{ repo.owner.login }}") == "1234 ★ by ann")
        #expect(try text("{{ content.repo.stars }}") == "1234")
        #expect(try text("{{ status }} {{ canTryAgain }}") == "data false")
        #expect(try text("[{{ latestError.message }}]") == "[]")  // no error: null renders as nothing
        let failing = try render(
            "⚠ {{ latestError.message }} {{ latestError.httpStatus }} {{ errors.repo.message }} {{ canTryAgain }}",
            status: .error, error: SourceError(message: "down", httpStatus: 503))
        #expect(failing.text == "⚠ down 503 down true")
        #expect(try text("{{ repo }}", content: ["a": [1, 2]]) == "")  // repo null: nothing, no problem
        #expect(try text("{{ load.0 }}", content: ["x", "y"]) == "x")
        // A path into a source without content yet is null too: the view is not ready.
        #expect(try render("{{ repo.stars }}", content: nil) == ("", []))
    }

    @Test func aMissingMemberRendersEmptyAndIsReported() throws {
        #expect(try render("a{{ repo.forks }}b") == ("ab", ["{{ repo.forks }} has no value"]))
        #expect(try render("{{ repo.stars.x }}") == ("", ["{{ repo.stars.x }} has no value"]))
        #expect(try render("{{ load.5 }}", content: ["load": [1], "repo": nil]).problems == ["{{ load.5 }} has no value"])
        #expect(try render("{{ nosuch }}").problems == ["{{ nosuch }} has no value"])
        // Filters pass a missing value on; `default` catches it.
        #expect(try render("{{ repo.forks | upper | truncate(3) }}").problems == ["{{ repo.forks }} has no value"])
        #expect(try text("{{ repo.forks | upper | default('–') }}") == "–")
    }

    @Test func defaultReplacesMissingNullAndEmpty() throws {
        #expect(try text("{{ load | default('–') }}", content: .null) == "–")
        #expect(try text("{{ load | default('–') }}", content: "") == "–")
        #expect(try text("{{ load | default(0) }}", content: .null) == "0")
        #expect(try text("{{ load | default('–') }}", content: 0) == "0")
        #expect(try text("{{ load | default('–') }}", content: false) == "false")
    }

    @Test func round() throws {
        #expect(try text("{{ load | round }}", content: 2.5) == "3")
        #expect(try text("{{ load | round }}", content: -2.5) == "-3")
        #expect(try text("{{ load | round(1) }}", content: 3.14159) == "3.1")
        #expect(try text("{{ load | round(2) }}", content: 3) == "3.00")
        #expect(try text("{{ load | round(2) }}", content: 0.005) == "0.01")
        #expect(try text("{{ load | round(1) }}", content: -0.04) == "0.0")
        #expect(try text("{{ load | round(1) }}", content: " 0.52\n") == "0.5")
        #expect(try text("{{ load | round(3) }}", content: -0.5) == "-0.500")
        #expect(try text("{{ load | round(2) }}", content: 1e300) == "1e+300")
        #expect(try text("{{ load | round }}", content: .number(JSONNumber(text: "9223372036854775808")!)) == "9.223372036854776e+18")
        #expect(try render("{{ load | round }}", content: ["load": "nan", "repo": nil]) == ("", ["round needs a number, found a string"]))
        #expect(try render("{{ load | round }}", content: ["load": .number(JSONNumber(text: "1e400")!), "repo": nil]).problems.count == 1)
        #expect(try render("{{ load | round }}", content: ["load": [1], "repo": nil]).problems == ["round needs a number, found an array"])
    }

    @Test func truncateCountsCharactersNotBytes() throws {
        #expect(try text("{{ load | truncate(5) }}", content: "hello") == "hello")
        #expect(try text("{{ load | truncate(5) }}", content: "hello!") == "hell…")
        #expect(try text("{{ load | truncate(1) }}", content: "hello") == "…")
        #expect(try text("{{ load | truncate(3) }}", content: "") == "")
        #expect(try text("{{ load | truncate(3) }}", content: "👩‍👩‍👧e\u{301}ab") == "👩‍👩‍👧e\u{301}…")
        #expect(try text("{{ load | truncate(3) }}", content: 123_456) == "12…")
        #expect(try render("{{ load | truncate(3) }}", content: ["load": ["a": 1], "repo": nil]).problems == ["truncate needs text, found an object"])
    }

    @Test func upperAndLower() throws {
        #expect(try text("{{ load | upper }}", content: "straße ok") == "STRASSE OK")
        #expect(try text("{{ load | lower }}", content: "ÉCOLE") == "école")
        #expect(try text("{{ load | upper }}", content: true) == "TRUE")
        #expect(try text("{{ load | upper }}", content: .null) == "")
    }

    @Test func firstAndLast() throws {
        #expect(try text("{{ load | first }}", content: [1, 2, 3]) == "1")
        #expect(try text("{{ load | last }}", content: [1, 2, 3]) == "3")
        #expect(try text("{{ load | first | default('none') }}", content: []) == "none")
        #expect(try text("{{ load | first }}", content: "👍🏽ok") == "👍🏽")
        #expect(try text("{{ load | last }}", content: "") == "")
        #expect(try render("{{ load | first }}", content: ["load": 5, "repo": nil]).problems == ["first needs an array or text, found a number"])
    }

    @Test func splitAndJoin() throws {
        #expect(try text("{{ load | split | first }}") == "0.52")
        #expect(try text("{{ load | split | last }}", content: "  a \t b\n") == "b")
        #expect(try text("{{ load | split(',') | join(' / ') }}", content: "a,,b") == "a /  / b")
        #expect(try text("{{ load | split(', ') | last }}", content: "x, y") == "y")
        #expect(try text("{{ load | split | join }}", content: "") == "")
        #expect(try text("{{ load | join }}", content: ["a", 1, true, nil]) == "a, 1, true, ")
        #expect(try text("{{ load | join('') }}", content: ["a", "b"]) == "ab")
        #expect(try render("{{ load | join }}", content: ["load": "ab", "repo": nil]).problems == ["join needs an array, found a string"])
    }

    @Test func bytes() throws {
        #expect(try text("{{ load | bytes }}", content: 0) == "0 B")
        #expect(try text("{{ load | bytes }}", content: 1023) == "1023 B")
        #expect(try text("{{ load | bytes }}", content: 1024) == "1.0 KiB")
        #expect(try text("{{ load | bytes }}", content: 1_572_864) == "1.5 MiB")
        #expect(try text("{{ load | bytes }}", content: 1_048_575) == "1.0 MiB")  // not "1024.0 KiB"
        #expect(try text("{{ load | bytes }}", content: -2048) == "-2.0 KiB")
        #expect(try text("{{ load | bytes }}", content: "4096\n") == "4.0 KiB")
        #expect(try text("{{ load | bytes }}", content: 1e30) == "867361737988.4 EiB")
        #expect(try text("{{ load | bytes }}", content: 1e300).hasSuffix(" EiB"))
        #expect(try render("{{ load | bytes }}", content: ["load": "lots", "repo": nil]).problems == ["bytes needs a number of bytes, found a string"])
    }

    @Test func duration() throws {
        #expect(try text("{{ load | duration }}", content: 0) == "0s")
        #expect(try text("{{ load | duration }}", content: 0.25) == "250ms")
        #expect(try text("{{ load | duration }}", content: 0.0001) == "1ms")
        #expect(try text("{{ load | duration }}", content: 45) == "45s")
        #expect(try text("{{ load | duration }}", content: 90) == "1m 30s")
        #expect(try text("{{ load | duration }}", content: 3600) == "1h")
        #expect(try text("{{ load | duration }}", content: 7505) == "2h 5m")
        #expect(try text("{{ load | duration }}", content: 273_600) == "3d 4h")
        #expect(try text("{{ load | duration }}", content: -90) == "-1m 30s")
        #expect(try render("{{ load | duration }}", content: ["load": 1e20, "repo": nil]).problems == ["duration: 1e+20 s is too long"])
    }

    @Test func ago() throws {
        let now = t0 + .seconds(100_000)
        func ago(_ value: JSONValue) throws -> (String, [String]) {
            let result = try render("{{ load | ago }}", content: ["load": value, "repo": nil], now: now)
            return (result.text, result.problems)
        }
        let seconds = Double(now.millisecondsSince1970) / 1000
        #expect(try ago(.number(JSONNumber(seconds - 3))) == ("3 s ago", []))
        #expect(try ago(.number(JSONNumber(seconds - 0.5))) == ("just now", []))
        #expect(try ago(.number(JSONNumber(seconds - 300))) == ("5 min ago", []))
        #expect(try ago(.number(JSONNumber(seconds - 7200))) == ("2 h ago", []))
        #expect(try ago(.number(JSONNumber(seconds - 4 * 86_400))) == ("4 d ago", []))
        #expect(try ago(.number(JSONNumber(seconds + 7200))) == ("in 2 h", []))
        #expect(try ago(.string((now + .seconds(-42)).rfc3339)) == ("42 s ago", []))
        #expect(try ago("2026-11-22T10:00:00+01:00").0 == ago("2026-11-22T09:00:00Z").0)
        #expect(try ago("yesterday").1 == ["ago needs a Unix time in seconds or an RFC 3339 time such as 2026-11-22T10:00:00Z, found a string"])
        #expect(try ago(1e300).1 == ["ago: 1e+300 is no Unix time"])
    }

    @Test func rfc3339ReadsWhatTimestampWrites() {
        for milliseconds: Int64 in [0, 1_795_341_600_123, -86_400_001, 951_782_400_000] {
            let instant = Timestamp(millisecondsSince1970: milliseconds)
            #expect(Timestamp(rfc3339: instant.rfc3339) == instant)
        }
        #expect(Timestamp(rfc3339: "2026-11-22 10:00:00.5z")?.rfc3339 == "2026-11-22T10:00:00.500Z")
        #expect(Timestamp(rfc3339: "2026-11-22T10:00:00-02:30")?.rfc3339 == "2026-11-22T12:30:00.000Z")
        for bad in ["", "2026-11-22", "2026-13-01T00:00:00Z", "2026-11-22T10:00:00", "2026-11-22T10:00:00.Z", "2026-11-22T10:00:00Zx"] {
            #expect(Timestamp(rfc3339: bad) == nil, "\(bad)")
        }
    }
}

@Suite struct ViewRendering {
    static let view = ViewDefinition(id: "v", sources: ["load"])

    func state(_ status: ViewStatus, content: JSONValue = ["load": "0.52 0.58"], error: SourceError? = nil) -> ViewState {
        ViewState(
            status: status, content: content, latestError: error, errors: error.map { [(source: SourceID("load"), error: $0)] } ?? [],
            canTryAgain: error != nil)
    }

    @Test func defaultRenderingWithoutABlock() {
        let view = Self.view
        #expect(view.render(state: state(.data), now: t0) == RenderedBlock(text: "0.52 0.58", class: "data"))
        #expect(view.render(state: state(.loading, content: nil), now: t0) == RenderedBlock(text: "loading", class: "loading"))
        #expect(view.render(state: state(.loading), now: t0).text == "loading: 0.52 0.58")
        #expect(view.render(state: state(.idle, content: nil), now: t0) == RenderedBlock(text: "idle", class: "idle"))
        let failing = view.render(state: state(.error, content: nil, error: SourceError(message: "exit 1\nstderr tail")), now: t0)
        #expect(failing == RenderedBlock(text: "error: exit 1", tooltip: "exit 1\nstderr tail", class: "error"))
        // Several sources, in the view's order; long or structured content in short.
        let two = ViewDefinition(id: "v", sources: ["a", "b", "c"])
        let long = String(repeating: "x", count: 50)
        let content: JSONValue = ["a": [1, 2, 3], "b": .string(long), "c": ["k": 1]]
        #expect(two.render(state: state(.data, content: content), now: t0).text == "[3 items] · \(long.prefix(39))… · {\"k\":1}")
        // A blank source adds nothing; the first line that is not blank stands for text.
        let sparse: JSONValue = ["a": " \n", "b": "\n  second line \nthird", "c": nil]
        #expect(two.render(state: state(.data, content: sparse), now: t0).text == "second line")
        #expect(two.render(state: state(.data, content: ["a": nil, "b": nil, "c": nil]), now: t0).text == "–")
        // A source named like a template's reserved name (the demo's `status`) shows its own content.
        let reserved = ViewDefinition(id: "v", sources: ["status", "content"])
        #expect(
            reserved.render(state: state(.loading, content: ["status": "all good", "content": 2]), now: t0).text
                == "loading: all good · 2")
    }

    @Test func perStatusKeysReplaceTheDataOnes() throws {
        var view = Self.view
        view.render = ViewRender(
            templates: [
                .text: try RenderTemplate.parse("⚙ {{ load | split | first }}"),
                .color: try RenderTemplate.parse("#00ff00"),
                .percentage: try RenderTemplate.parse("{{ load | split | first | round(2) }}"),
            ],
            overrides: [
                .error: [
                    .text: try RenderTemplate.parse("⚠ {{ latestError.message }}"),
                    .color: try RenderTemplate.parse("#ff0000"),
                    .urgent: try RenderTemplate.parse("{{ canTryAgain }}"),
                    .class: try RenderTemplate.parse("failed"),
                ],
                .loading: [.tooltip: try RenderTemplate.parse("loading {{ status }}")],
            ])
        #expect(view.render(state: state(.data), now: t0) == RenderedBlock(text: "⚙ 0.52", class: "data", percentage: 1, color: "#00ff00"))
        #expect(
            view.render(state: state(.error, error: SourceError(message: "down")), now: t0)
                == RenderedBlock(text: "⚠ down", tooltip: "down", class: "failed", percentage: 1, color: "#ff0000", urgent: true))
        #expect(
            view.render(state: state(.loading), now: t0)
                == RenderedBlock(text: "⚙ 0.52", tooltip: "loading loading", class: "loading", percentage: 1, color: "#00ff00"))
        // idle has no keys of its own, and no content: the data ones are not rendered over nothing (the text
        // is left for the bar to keep; the color, the percentage take their defaults).
        let idle = view.render(state: state(.idle, content: nil), now: t0)
        #expect(idle == RenderedBlock(text: "", class: "idle", keepsText: true))
    }

    @Test func percentageAndUrgentFromText() throws {
        func block(percentage: String, urgent: String, load: JSONValue = 42) throws -> RenderedBlock {
            var view = Self.view
            view.render = ViewRender(templates: [.percentage: try RenderTemplate.parse(percentage), .urgent: try RenderTemplate.parse(urgent)])
            return view.render(state: state(.data, content: ["load": load]), now: t0)
        }
        #expect(try block(percentage: "{{ load }}", urgent: "true").percentage == 42)
        #expect(try block(percentage: "{{ load }}", urgent: "true").urgent)
        #expect(try block(percentage: "150", urgent: "").percentage == 100)
        #expect(try block(percentage: "-3", urgent: "").percentage == 0)
        #expect(try block(percentage: "49.5", urgent: " False ").urgent == false)
        #expect(try block(percentage: "49.5", urgent: "0").percentage == 50)
        #expect(try block(percentage: "", urgent: "no").percentage == nil)
        let bad = try block(percentage: "{{ load }}%", urgent: "{{ load.x }}")
        #expect(bad.percentage == nil && bad.urgent == false)
        #expect(bad.problems == ["urgent: {{ load.x }} has no value", "percentage: \"42%\" is not a number"])
    }

    @Test func secretsAreRedactedBeforeAnyFilter() throws {
        var view = Self.view
        view.render = ViewRender(templates: [.text: try RenderTemplate.parse("{{ load | upper }} {{ latestError.message }}")])
        let block = view.render(
            state: state(.data, content: ["load": "token hunter2"], error: SourceError(message: "bad hunter2")), now: t0,
            redactor: Redactor(secrets: ["hunter2"]))
        #expect(block.text == "TOKEN [REDACTED] bad [redacted]")
    }
}
