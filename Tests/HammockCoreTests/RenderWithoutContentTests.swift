import HammockCore
import HammockJSON
import HammockRendering
import Testing

private let now = Timestamp(millisecondsSince1970: 1_700_000_000_000)

/// A view of `repo` whose `render:` block has these top-level keys and these status keys.
private func repoView(
    _ templates: [ViewRender.Field: String], overrides: [ViewStatus: [ViewRender.Field: String]] = [:], id: ViewID = "repo"
) throws -> ViewDefinition {
    let render = ViewRender(
        templates: try templates.mapValues { try RenderTemplate.parse($0) },
        overrides: try overrides.mapValues { try $0.mapValues { try RenderTemplate.parse($0) } })
    return ViewDefinition(id: id, sources: ["repo"], render: render)
}

private func state(_ status: ViewStatus, _ repo: JSONValue?, error: SourceError? = nil) -> ViewState {
    ViewState(
        status: status, content: repo.map { ["repo": $0] } ?? .null, latestError: error,
        errors: error.map { [(source: SourceID("repo"), error: $0)] } ?? [], canTryAgain: error != nil)
}

private func line(_ id: ViewID, _ state: ViewState) -> OutputLine { .view(id: id, state: state) }

/// A bar never shows a template rendered over nothing (`forks  stars `): while a view has no content, only
/// its status's own keys render.
@Suite struct ViewRenderingWithoutContent {
    static let forks = "forks {{ repo.forks }} stars {{ repo.stars }}"

    @Test func noContentRendersOnlyTheStatussOwnKeys() throws {
        let view = try repoView([.text: Self.forks, .tooltip: "{{ repo.name }}", .color: "#00ff00"])
        for status in [ViewStatus.loading, .idle] {
            let block = view.render(state: state(status, nil), now: now)
            #expect(block == RenderedBlock(text: "", class: status.rawValue, keepsText: true), "\(status)")
        }
        // error: the default tooltip (the message) stays; the top-level text and color do not render.
        let failing = view.render(state: state(.error, nil, error: SourceError(message: "down")), now: now)
        #expect(failing == RenderedBlock(text: "", tooltip: "down", class: "error", keepsText: true))
        // With content, the same view renders its templates.
        let loaded = view.render(state: state(.data, ["forks": 3, "stars": 40, "name": "hammock"]), now: now)
        #expect(loaded == RenderedBlock(text: "forks 3 stars 40", tooltip: "hammock", class: "data", color: "#00ff00"))
    }

    @Test func aStatusBlockOfItsOwnRendersWithoutContent() throws {
        let view = try repoView(
            [.text: Self.forks],
            overrides: [.loading: [.text: "…", .color: "#888888"], .error: [.text: "⚠ {{ latestError.message }}"]])
        #expect(view.render(state: state(.loading, nil), now: now) == RenderedBlock(text: "…", class: "loading", color: "#888888"))
        #expect(
            view.render(state: state(.error, nil, error: SourceError(message: "down")), now: now)
                == RenderedBlock(text: "⚠ down", tooltip: "down", class: "error"))
        // loading with content (stale data while a load runs): the top-level keys under loading's own.
        #expect(view.render(state: state(.loading, ["forks": 1, "stars": 2]), now: now).text == "…")
    }

    @Test func withoutATextTemplateTheDefaultTextStays() throws {
        // No template of the user's would render over nothing: the default text is no hole.
        let view = try repoView([.tooltip: "{{ repo.name }}"])
        #expect(view.render(state: state(.loading, nil), now: now) == RenderedBlock(text: "loading", class: "loading"))
    }

    @Test func aBarKeepsTheTextItShowedWhileTheViewHasNoContent() throws {
        var encoder = BarEncoder(format: .waybar, views: [try repoView([.text: Self.forks, .short: "{{ repo.forks }}"])])
        // At first, an empty text.
        let firstLine = encoder.encode(line("repo", state(.loading, nil)), now: now, redactor: .none)
        let first = try #require(firstLine)
        #expect(try JSONValue(parsing: Array(first.utf8))["text"] == "")
        let loadedLine = encoder.encode(line("repo", state(.data, ["forks": 3, "stars": 40])), now: now, redactor: .none)
        let loaded = try #require(loadedLine)
        #expect(try JSONValue(parsing: Array(loaded.utf8))["text"] == "forks 3 stars 40")
        // The content goes (a wipe, another resource loading): the bar keeps "forks 3 stars 40" and says loading.
        let wipedLine = encoder.encode(line("repo", state(.loading, nil)), now: now, redactor: .none)
        let wiped = try #require(wipedLine)
        let object = try JSONValue(parsing: Array(wiped.utf8))
        #expect(object["text"] == "forks 3 stars 40")
        #expect(object["class"] == "loading")
        #expect(encoder.takeProblems() == [], "a template not rendered has no problem")

        // i3bar: the error's own color, beside the text and short text kept.
        var i3bar = BarEncoder(
            format: .i3bar,
            views: [try repoView([.text: Self.forks, .short: "{{ repo.forks }}"], overrides: [.error: [.color: "#ff0000"]])])
        _ = i3bar.encode(line("repo", state(.data, ["forks": 3, "stars": 40])), now: now, redactor: .none)
        let keptLine = i3bar.encode(line("repo", state(.error, nil, error: SourceError(message: "x"))), now: now, redactor: .none)
        let kept = try #require(keptLine)
        #expect(kept.contains(##""full_text":"forks 3 stars 40","short_text":"3","color":"#ff0000""##), "\(kept)")
    }
}

/// Render problems go to a log once per change of their wording, and show in `hammock watch`.
@Suite struct RenderProblems {
    @Test func eachProblemIsReportedOncePerChangeOfItsWording() throws {
        var encoder = BarEncoder(
            format: .waybar, views: [try repoView([.text: "forks {{ repo.forks }}", .tooltip: "{{ repo.name | upper }}"])])
        let noForks = state(.data, ["stars": 1, "name": "hammock"])
        let textLine = encoder.encode(line("repo", noForks), now: now, redactor: .none)
        let text = try #require(textLine)
        #expect(try JSONValue(parsing: Array(text.utf8))["text"] == "forks ")
        #expect(encoder.takeProblems() == [#"view "repo": text: {{ repo.forks }} has no value"#])
        // The same problem at every render after: no news.
        _ = encoder.encode(line("repo", state(.data, ["stars": 2, "name": "hammock"])), now: now, redactor: .none)
        _ = encoder.refresh(now: now, redactor: .none)
        #expect(encoder.takeProblems() == [])
        // The text renders well now; the tooltip has a problem of its own: reported once, over two renders.
        let other = state(.data, ["stars": 2, "forks": ["a": 1], "name": ["x": 1]])
        _ = encoder.encode(line("repo", other), now: now, redactor: .none)
        _ = encoder.encode(line("repo", other), now: now, redactor: .none)
        #expect(encoder.takeProblems() == [#"view "repo": tooltip: upper needs text, found an object"#])
        // Good content: nothing to report.
        _ = encoder.encode(line("repo", state(.data, ["forks": 3, "name": "hammock"])), now: now, redactor: .none)
        #expect(encoder.takeProblems() == [])
        // The text's problem coming back in the same words is no news; the tooltip's in other words is.
        _ = encoder.encode(line("repo", state(.data, ["name": [1]])), now: now, redactor: .none)
        #expect(encoder.takeProblems() == [#"view "repo": tooltip: upper needs text, found an array"#])
    }

    @Test func severalProblemsOfOneKeyAreOneReport() throws {
        var encoder = BarEncoder(format: .text, views: [try repoView([.text: "{{ repo.a }} {{ repo.b }}"])])
        _ = encoder.encode(line("repo", state(.data, ["c": 1])), now: now, redactor: .none)
        #expect(encoder.takeProblems() == [#"view "repo": text: {{ repo.a }} has no value; {{ repo.b }} has no value"#])
    }

    @Test func aReloadedTemplateReportsItsProblemsAgain() throws {
        var encoder = BarEncoder(format: .text, views: [try repoView([.text: "{{ repo.a }}"])])
        _ = encoder.encode(line("repo", state(.data, ["c": 1])), now: now, redactor: .none)
        #expect(encoder.takeProblems().count == 1)
        encoder.update([try repoView([.text: "a: {{ repo.a }}"])])
        _ = encoder.encode(line("repo", state(.data, ["c": 2])), now: now, redactor: .none)
        #expect(encoder.takeProblems() == [#"view "repo": text: {{ repo.a }} has no value"#])
        // The same definitions again change nothing.
        encoder.update([try repoView([.text: "a: {{ repo.a }}"])])
        _ = encoder.encode(line("repo", state(.data, ["c": 3])), now: now, redactor: .none)
        #expect(encoder.takeProblems() == [])
    }

    @Test func watchShowsTheProblemInTheViewsRow() throws {
        var screen = WatchScreen(title: "t", sources: ["repo"], views: [try repoView([.text: "forks {{ repo.forks }}"])])
        screen.apply(.source(id: "repo", event: nil, state: SourceState(content: ["stars": 1], timestamp: now)))
        screen.apply(line("repo", state(.data, ["stars": 1])))
        let row = screen.lines(width: 120, height: 6, now: now, style: WatchScreen.Style(colors: false))[2]
        #expect(row.contains("forks ") && row.hasSuffix(" · problem: text: {{ repo.forks }} has no value"), "\(row)")
    }

    @Test func watchShowsTheStatusForAViewWithoutContent() throws {
        var screen = WatchScreen(title: "t", sources: ["repo"], views: [try repoView([.text: "forks {{ repo.forks }}"])])
        screen.apply(.source(id: "repo", event: .requested, state: SourceState(isLoading: true)))
        screen.apply(line("repo", state(.loading, nil)))
        let row = screen.lines(width: 120, height: 6, now: now, style: WatchScreen.Style(colors: false))[2]
        #expect(row.hasSuffix("loading"), "\(row)")
        #expect(!row.contains("forks") && !row.contains("problem"), "\(row)")
    }
}
