import HammockConfig
import HammockCore
import HammockJSON
import HammockRendering
import Testing

/// Broken configurations: every diagnostic at the exact line and column, with its message.
@Suite struct BrokenConfigurations {
    @Test func unknownTopLevelKeyWithDidYouMean() {
        let text = """
            version: 1
            sources:
              a: { kind: fake }
            view:
              v: { sources: [a] }
            """
        #expect(problems(text) == [#"4:1: unknown key "view" in the configuration (did you mean "views"?)"#])
    }

    @Test func unknownKeyWithoutASuggestionListsTheKnownOnes() {
        let text = """
            sources:
              a: { kind: fake }
            colours: red
            """
        #expect(
            problems(text) == [
                #"3:1: unknown key "colours" in the configuration; expected one of: version, defaults, sources, views, plugins, bases, include, limits"#
            ])
    }

    @Test func unknownKeyInAView() {
        let text = """
            sources:
              a: { kind: fake }
            views:
              v:
                sources: [a]
                redy: any
            """
        #expect(problems(text) == [#"6:5: unknown key "redy" in view "v" (did you mean "ready"?)"#])
    }

    @Test func unknownKeyInDefaults() {
        let text = """
            defaults: { expiration: 30s, timout: 10s }
            sources:
              a: { kind: fake }
            """
        #expect(problems(text) == [#"1:30: unknown key "timout" in defaults (did you mean "timeout"?)"#])
    }

    @Test func sourcesMustBeAMapping() {
        let text = """
            sources:
              - kind: fake
            """
        #expect(problems(text) == ["2:3: sources must be a mapping, found a list"])
    }

    @Test func durationWithoutUnit() {
        let text = """
            sources:
              a:
                kind: fake
                refresh: 5
            """
        #expect(problems(text) == [#"4:14: refresh: "5" has no unit; write 5s, 5ms, 5m or 5h"#])
    }

    @Test func durationGarbage() {
        let text = """
            sources:
              a:
                kind: fake
                timeout: soon
                expiration: 0s
            """
        #expect(
            problems(text) == [
                #"4:14: timeout: "soon" is not a duration; write e.g. 250ms, 5s, 2m, 1h or 1m30s"#,
                "5:17: expiration must be longer than zero",
            ])
    }

    @Test func unknownSourceInAViewWithDidYouMean() {
        let text = """
            sources:
              posts: { kind: fake }
              users: { kind: fake }
            views:
              v:
                sources: [posts, usrs]
            """
        #expect(problems(text) == [#"6:22: view "v" uses unknown source "usrs" (did you mean "users"?)"#])
    }

    @Test func noSuggestionForAFarName() {
        let text = """
            sources:
              posts: { kind: fake }
            views:
              v: { sources: [weather] }
            """
        #expect(problems(text) == [#"4:18: view "v" uses unknown source "weather""#])
    }

    @Test func didYouMeanIsTheSameOnEveryRun() {
        // "web3" is one edit from both "web1" and "web2": the suggestion must not depend on hashing order.
        let text = """
            sources:
              web2: { kind: fake }
              web1: { kind: fake }
            views:
              v: { sources: [web3] }
            """
        #expect(problems(text) == [#"5:18: view "v" uses unknown source "web3" (did you mean "web1"?)"#])
    }

    @Test func unsetEnvironmentVariable() {
        let text = """
            sources:
              a:
                kind: rest
                url: "https://x/${TOKEN}"
            """
        #expect(
            problems(text) == [
                "4:10: environment variable TOKEN is not set (set it, or write ${TOKEN:-default} to give a default)"
            ])
        #expect(problems(text, environment: ["TOKEN": "t"]) == [])
    }

    @Test func malformedInterpolation() {
        let text = """
            sources:
              a: { kind: rest, url: "${1X}", query: "${OPEN" }
            """
        #expect(
            problems(text) == [
                #"2:25: "${1X}" is not a variable; write ${NAME}, ${NAME:-default}, ${secret:NAME}, ${file:PATH} or ${cred:NAME}"#,
                #"2:41: unclosed "${"; write ${NAME} or ${NAME:-default}"#,
            ])
    }

    @Test func unknownKindWithDidYouMean() {
        let text = """
            sources:
              a:
                kind: shel
              b:
                kind: weather
            """
        #expect(
            problems(text) == [
                #"3:11: unknown kind "shel" (did you mean "shell"?): no plugin found; looked for plugins.shel.command"#,
                #"5:11: unknown kind "weather": no plugin found; looked for plugins.weather.command"#,
            ])
    }

    @Test func aKindFromThePluginsSectionIsKnown() {
        let text = """
            sources:
              a: { kind: weather, city: Oslo }
            plugins:
              weather: { command: [python3, weather.py] }
            """
        #expect(problems(text) == [])
    }

    @Test func dependencyCycleBetweenTwoSources() {
        let text = """
            sources:
              a:
                kind: rest
                url: "http://x/{{ b.id }}"
              b:
                kind: rest
                url: "http://x/{{ a.id }}"
            """
        #expect(problems(text) == ["4:5: dependency cycle: a → b → a"])
    }

    @Test func selfReference() {
        let text = """
            sources:
              a:
                kind: shell
                command: [echo, "{{ a.value }}"]
            """
        #expect(problems(text) == ["4:21: dependency cycle: a → a"])
    }

    @Test func referenceToAnUnknownSource() {
        let text = """
            sources:
              post: { kind: fake, content: { id: 1 } }
              user:
                kind: rest
                url: "http://x/{{ pst.id }}"
            """
        #expect(problems(text) == [#"5:5: {{ pst.id }} refers to unknown source "pst" (did you mean "post"?)"#])
    }

    @Test func malformedTemplate() {
        let text = """
            sources:
              post: { kind: fake }
              user:
                kind: rest
                url: "http://x/{{ post.id"
            """
        #expect(problems(text) == [#"5:5: unclosed "{{" in template (expected "}}")"#])
    }

    /// Refusing a template inside a shell `script:` is the shell plugin's rule, declared in its hello: the
    /// reader lets it through, and `hammock check` reports it at its line and column (see "check: a template
    /// inside `script:` is refused ..." in HammockEndToEndTests).
    @Test func templateInsideAShellScriptIsLeftToThePlugin() {
        let text = """
            sources:
              post: { kind: fake }
              user:
                kind: shell
                script: "curl http://x/{{ post.id }} | jq ."
            """
        #expect(problems(text) == [])
    }

    @Test func sourceWithoutKind() {
        let text = """
            sources:
              a:
                url: http://x
            """
        #expect(problems(text) == [#"3:5: source "a" has no `kind:` (fake, shell, file, rest, or a plugin's kind)"#])
    }

    @Test func multipleDocuments() {
        let text = """
            sources:
              a: { kind: fake }
            ---
            sources:
              b: { kind: fake }
            """
        #expect(problems(text) == ["3:1: multiple YAML documents are not supported (found a second document)"])
    }

    @Test func yamlSyntaxError() {
        let text = """
            sources:
              a: { kind: fake
              b: { kind: fake }
            """
        #expect(problems(text) == ["3:4: did not find expected ',' or '}' (while parsing a flow mapping started at 2:6)"])
    }

    @Test func emptyFile() {
        #expect(problems("# nothing\n") == ["1:1: the configuration is empty; it needs at least `sources:`"])
    }

    @Test func everyErrorAtOnceSortedByPosition() {
        let text = """
            sources:
              a:
                kind: fake
                refresh: often
              b:
                kind: rset
            views:
              v: { sources: [a, missing] }
            extra: 1
            """
        let loaded = loader().parse(text, file: "test.yaml")
        guard case .failure(let error) = loaded else {
            Issue.record("the configuration must not load")
            return
        }
        #expect(
            error.description == """
                test.yaml:4:14: refresh: "often" is not a duration; write e.g. 250ms, 5s, 2m, 1h or 1m30s
                test.yaml:6:11: unknown kind "rset" (did you mean "rest"?): no plugin found; looked for plugins.rset.command
                test.yaml:8:21: view "v" uses unknown source "missing"
                test.yaml:9:1: unknown key "extra" in the configuration; expected one of: version, defaults, sources, views, plugins, bases, include, limits
                """)
        #expect(error.diagnostics.count == 4)
        #expect(error.diagnostics == error.diagnostics.sorted())
    }

    @Test func unsupportedVersionAndBadViewParts() {
        let text = """
            version: 2
            sources:
              a: { kind: fake }
            views:
              v: { sources: [a], ready: some, display: standrd }
              w: { sources: [a], display: [loading, eror] }
              x: { ready: any }
            """
        #expect(
            problems(text) == [
                "1:10: unsupported version; this hammock reads `version: 1`",
                #"5:29: ready must be `all` or `any`, found "some""#,
                #"5:44: unknown display preset "standrd" (did you mean "standard"?); presets: dataOnly, noError, overlay, standard, or a list of rules"#,
                #"6:41: unknown display rule "eror" (did you mean "error"?); rules: loading, error, anyData, allData, alwaysData"#,
                #"7:6: view "x" has no `sources:`"#,
            ])
    }

    @Test func badRetryAndCacheAndSelect() {
        let text = """
            sources:
              a: { kind: fake, retry: [1s], cache: maybe, select: "no-slash" }
              b: { kind: fake, retry: { initial: 2s, maximum: 30s } }
            """
        #expect(
            problems(text) == [
                "2:27: retry must be off, a duration (the first delay) or {initial, max, on}, found a list",
                "2:40: cache must be true or false, found a string",
                #"2:55: select "no-slash" is not a JSON Pointer; write e.g. /items/0/name"#,
                #"3:42: unknown key "maximum" in retry; expected one of: initial, max, on"#,
            ])
    }

    @Test func badPlugins() {
        let text = """
            sources:
              a: { kind: fake }
            plugins:
              one: { command: python3 }
              two: {}
              three: { command: [] }
            """
        #expect(
            problems(text) == [
                "4:19: plugins.one.command must be a list such as [python3, plugin.py], found a string",
                "5:8: plugins.two has no `command:` (a list: program and arguments)",
                "6:21: plugins.three.command is empty",
            ])
    }

    @Test func badSourceIDs() {
        let text = """
            sources:
              "a b": { kind: fake }
            """
        #expect(problems(text) == [#"2:3: source id "a b" may hold only letters, digits, "_" and "-""#])
    }
}

/// A view's `render:` block: every problem at the place to edit, inside the template when it can be found.
@Suite struct RenderBlockDiagnostics {
    @Test func aValidBlockIsRead() throws {
        let text = """
            sources:
              load: { kind: fake }
            views:
              v:
                sources: [load]
                render:
                  text: "{{ load | split | first }}"
                  percentage: 50
                  urgent: false
                  error:
                    text: "⚠ {{ latestError.message }}"
                    class: failed
            """
        let view = try #require(try load(text).configuration.views.first)
        let render = try #require(view.render)
        #expect(render.templates[.text] == (try RenderTemplate.parse("{{ load | split | first }}")))
        #expect(render.templates[.percentage] == (try RenderTemplate.parse("50")))
        #expect(render.templates[.urgent] == (try RenderTemplate.parse("false")))
        #expect(render.overrides[.error]?[.class] == (try RenderTemplate.parse("failed")))
        #expect(view.render(state: ViewState(status: .data, content: ["load": "1 2"]), now: Timestamp(millisecondsSince1970: 0)).text == "1")
    }

    @Test func templateErrorsPointIntoTheTemplate() {
        let text = """
            sources:
              load: { kind: fake }
            views:
              v:
                sources: [load]
                render:
                  text: "{{ load | uper }}"
                  tooltip: {{ load | truncate(0) }}
                  color: '{{ load '
                  loading:
                    text: |
                      {{ load | bytes(2) }}
            """
        #expect(
            problems(text) == [
                #"7:24: render.text of view "v": unknown filter "uper" (did you mean "upper"?); filters: default, round, truncate, upper, lower, first, last, split, join, bytes, duration, ago"#,
                #"8:16: render.tooltip of view "v" must be a template such as "{{ source }}", found a mapping (quote a template that starts with {{)"#,
                #"9:15: render.color of view "v": unclosed "{{" (expected "}}")"#,
                #"11:15: render.loading.text of view "v": bytes takes no arguments, given 1 argument(s)"#,
            ])
    }

    @Test func unknownKeysAndNames() {
        let text = """
            sources:
              load: { kind: fake }
              repo: { kind: fake }
            views:
              v:
                sources: [load]
                render:
                  txt: x
                  text: "{{ lod }} {{ repo.x }} {{ status }} {{ latestErrors.message }}"
                  errror: { text: x }
                  idle: { colour: grey }
            """
        #expect(
            problems(text) == [
                #"8:7: unknown key "txt" in render of view "v" (did you mean "text"?)"#,
                #"9:13: render.text of view "v": {{ latestErrors.message }} names neither a source of the view nor content, status, latestError, errors, canTryAgain (did you mean "latestError"?)"#,
                #"9:13: render.text of view "v": {{ lod }} names neither a source of the view nor content, status, latestError, errors, canTryAgain (did you mean "load"?)"#,
                #"9:13: render.text of view "v": {{ repo.x }} names neither a source of the view nor content, status, latestError, errors, canTryAgain"#,
                #"10:7: unknown key "errror" in render of view "v" (did you mean "error"?)"#,
                #"11:15: unknown key "colour" in render.idle of view "v" (did you mean "color"?)"#,
            ])
    }

    /// When the text in the file is not the template as written (an escape, an interpolation), the problem is
    /// at the start of the value rather than at a wrong column.
    @Test func escapedOrInterpolatedTemplatesPointAtTheirStart() {
        let text = """
            sources:
              load: { kind: fake }
            views:
              v:
                sources: [load]
                render:
                  text: 'it''s {{ load | nope }}'
                  tooltip: "${WHO} {{ load | nope }}"
                  color: x {{ load | nope }}
            """
        let filters = "filters: default, round, truncate, upper, lower, first, last, split, join, bytes, duration, ago"
        #expect(
            problems(text, environment: ["WHO": "me"]) == [
                #"7:13: render.text of view "v": unknown filter "nope"; "# + filters,
                #"8:16: render.tooltip of view "v": unknown filter "nope"; "# + filters,
                #"9:26: render.color of view "v": unknown filter "nope"; "# + filters,
            ])
    }
}

/// A view's `on-click:`: buttons by name or number, ops or a command, and every mistake at its place.
@Suite struct OnClickDiagnostics {
    @Test func buttonsByNameOrNumber() throws {
        let text = """
            sources:
              s: { kind: fake }
            views:
              v:
                sources: [s]
                on-click:
                  left: retry
                  middle: loadIfNeeded
                  right: { run: "notify-send ${WHO}" }
                  4: load
                  forward: load
            """
        let view = try #require(try load(text, environment: ["WHO": "me"]).configuration.views.first)
        #expect(view.onClick == [1: .retry, 2: .loadIfNeeded, 3: .run("notify-send me"), 4: .load, 9: .load])
    }

    @Test func mistakes() {
        let text = """
            sources:
              s: { kind: fake }
            views:
              v:
                sources: [s]
                on-click:
                  lefft: retry
                  1: relaod
                  left: load
                  right: { command: ls }
                  middle: { run: "  " }
                  10: load
                  scroll-up: [load]
              w:
                sources: [s]
                on-click: retry
            """
        #expect(
            problems(text) == [
                #"7:7: on-click of view "v": "lefft" is not a button (did you mean "left"?); buttons: left, middle, right, scroll-up, scroll-down, back, forward, or a number from 1 to 9"#,
                #"8:10: on-click of view "v", 1: "relaod" is not an action; actions: load, loadIfNeeded, retry, or { run: COMMAND }"#,
                #"9:7: on-click of view "v" says twice what button 1 does"#,
                #"10:14: on-click of view "v", right needs `run:`, the command to run"#,
                #"10:16: unknown key "command" in on-click of view "v", right; expected one of: run"#,
                #"11:22: on-click of view "v", middle, run: the command is empty"#,
                #"12:7: on-click of view "v": "10" is not a button; buttons: left, middle, right, scroll-up, scroll-down, back, forward, or a number from 1 to 9"#,
                #"13:18: on-click of view "v", scroll-up must be one of load, loadIfNeeded, retry, or { run: COMMAND }, found a list"#,
                #"16:15: on-click of view "w" must be a mapping, found a string"#,
            ])
    }
}
