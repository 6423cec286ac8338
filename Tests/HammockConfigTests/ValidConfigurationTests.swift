import Foundation
import HammockConfig
import HammockCore
import HammockJSON
import HammockRendering
import Testing

@Suite struct ValidConfigurations {
    static let text = """
        version: 1
        defaults:
          expiration: 1m
          timeout: 5s
          refresh: 10s
          retry: 2s
        sources:
          repo:
            kind: rest
            url: https://api.github.com/repos/x/y
            headers: { Authorization: "Bearer ${GITHUB_TOKEN}", Host: "${HOST:-localhost}" }
            select: /stargazers_count
            refresh: 60s
            count: 3
            ratio: 1.5
            big: 12345678901234567
            flags: [true, false, null, "yes"]
            nested:
              a:
                b: [1, "two"]
          off1: { kind: fake, retry: off }
          off2: { kind: fake, retry: false }
          five: { kind: fake, retry: 5s }
          full: { kind: fake, retry: { initial: 2s, max: 30s }, cache: true }
          owner:
            kind: rest
            url: "https://api.github.com/users/{{ repo.owner.login }}"
          cmd:
            kind: shell
            command: [echo, "{{ repo.name }}", "{{owner.id}}-{{ repo.id }}"]
        views:
          page:
            sources: [repo, owner]
            ready: any
            display: overlay
          rules:
            sources: [repo]
            display: [loading, alwaysData]
          plain:
            sources: [cmd]
        plugins:
          weather: { command: [python3, plugins/examples/weather.py] }
        """

    static func loaded() throws -> LoadedConfiguration {
        try load(text, environment: ["GITHUB_TOKEN": "s3cret", "UNUSED": "nope"])
    }

    @Test func commonKeysAndDefaultsInheritance() throws {
        let configuration = try Self.loaded().configuration
        #expect(configuration.sources.map(\.id) == ["repo", "off1", "off2", "five", "full", "owner", "cmd"])
        #expect(configuration.kinds == ["rest", "fake", "shell"])
        let repo = try #require(configuration.source("repo"))
        #expect(repo.kind == "rest")
        #expect(repo.expiration == .seconds(60))
        #expect(repo.timeout == .seconds(5))
        #expect(repo.refresh == .seconds(60))
        #expect(repo.retry == RetryPolicy(initialDelay: .seconds(2)))
        #expect(repo.select == JSONPointer("/stargazers_count"))
        #expect(repo.cache == false)
        let owner = try #require(configuration.source("owner"))
        #expect(owner.refresh == .seconds(10))
        #expect(owner.expiration == .seconds(60))
        #expect(owner.select == nil)
        #expect(configuration.source("full")?.cache == true)
    }

    @Test func builtInDefaultsWithoutADefaultsSection() throws {
        let source = try #require(try load("sources:\n  a: { kind: fake }\n").configuration.source("a"))
        #expect(source == SourceDefinition(id: "a", kind: "fake"))
        #expect(source.expiration == .seconds(30))
        #expect(source.timeout == .seconds(10))
        #expect(source.refresh == nil)
        #expect(source.retry == .standard)
    }

    @Test func retryForms() throws {
        let configuration = try Self.loaded().configuration
        #expect(configuration.source("off1")?.retry == .off)
        #expect(configuration.source("off2")?.retry == .off)
        #expect(configuration.source("five")?.retry == RetryPolicy(initialDelay: .seconds(5), maximumDelay: .seconds(60)))
        #expect(configuration.source("full")?.retry == RetryPolicy(initialDelay: .seconds(2), maximumDelay: .seconds(30)))
        let on = try load("sources:\n  a: { kind: fake, retry: true }\n  b: { kind: fake, retry: { max: 5m } }\n")
        #expect(on.configuration.source("a")?.retry == .standard)
        #expect(on.configuration.source("b")?.retry == RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(300)))
    }

    @Test func optionsBecomeJSON() throws {
        let repo = try #require(try Self.loaded().configuration.source("repo"))
        let expected: JSONObject = [
            "url": "https://api.github.com/repos/x/y",
            "headers": ["Authorization": "Bearer s3cret", "Host": "localhost"],
            "count": 3,
            "ratio": 1.5,
            "big": .number(JSONNumber(text: "12345678901234567")!),
            "flags": [true, false, nil, "yes"],
            "nested": ["a": ["b": [1, "two"]]],
        ]
        #expect(repo.options == expected)
        #expect(JSONValue.object(repo.options).jsonString.contains(#""big":12345678901234567"#))
    }

    @Test func environmentValuesInHeadersAreSecrets() throws {
        // The token and the Host header's default: both are sent as a header. `repos/x/y` is not a secret.
        #expect(try Self.loaded().configuration.secrets == ["s3cret", "localhost"])
        // An empty value hides nothing and is not recorded.
        let empty = try load("sources:\n  a: { kind: rest, url: \"x${E}\" }\n", environment: ["E": ""])
        #expect(empty.configuration.secrets.isEmpty)
        // `$$` is a literal dollar.
        let dollar = try load("sources:\n  a: { kind: rest, url: \"a$$b$c\" }\n")
        #expect(dollar.configuration.source("a")?.options["url"] == "a$b$c")
    }

    @Test func templatesAndInputs() throws {
        let configuration = try Self.loaded().configuration
        let owner = try #require(configuration.source("owner"))
        #expect(owner.inputs == ["repo"])
        #expect(owner.templates.map(\.pointer) == [JSONPointer("/url")])
        // Encoded once the rest plugin's hello says so (`TemplateRules`); the reader knows no kind's options.
        #expect(owner.templates.map(\.percentEncode) == [false])
        #expect(owner.templates.first?.template.references.map(\.description) == ["repo.owner.login"])
        let cmd = try #require(configuration.source("cmd"))
        #expect(cmd.inputs == ["repo", "owner"])
        #expect(cmd.templates.map(\.pointer) == [JSONPointer("/command/1"), JSONPointer("/command/2")])
        #expect(cmd.templates.map(\.percentEncode) == [false, false])
        let resolved = cmd.resolvedOptions { ["repo": ["name": "a b", "id": 1], "owner": ["id": "o"]][$0] }
        #expect(resolved == .success(["command": ["echo", "a b", "o-1"]]))
        #expect(configuration.source("repo")?.templates.isEmpty == true)
    }

    @Test func views() throws {
        let views = try Self.loaded().configuration.views
        #expect(views.map(\.id) == ["page", "rules", "plain"])
        #expect(views[0] == ViewDefinition(id: "page", sources: ["repo", "owner"], ready: .any, display: [.loading, .error, .anyData]))
        #expect(views[1] == ViewDefinition(id: "rules", sources: ["repo"], ready: .all, display: [.loading, .alwaysData]))
        #expect(views[2] == ViewDefinition(id: "plain", sources: ["cmd"], ready: .all, display: [.allData, .loading, .error]))
        let any = try load("sources:\n  a: { kind: fake }\nviews:\n  v: { sources: [a], ready: any }\n")
        #expect(any.configuration.views.first?.display == [.anyData, .loading, .error])
        for (preset, rules) in DisplayRule.presets {
            let loaded = try load("sources:\n  a: { kind: fake }\nviews:\n  v: { sources: [a], display: \(preset) }\n")
            #expect(loaded.configuration.views.first?.display == rules)
        }
    }

    @Test func plugins() throws {
        let configuration = try Self.loaded().configuration
        #expect(configuration.plugins == ["weather": PluginDefinition(command: ["python3", "plugins/examples/weather.py"])])
    }

    @Test func optionPositionsMapPointersBackToTheFile() throws {
        let loaded = try Self.loaded()
        #expect(loaded.file == "test.yaml")
        let positions = try #require(loaded.positions["repo"])
        func mark(_ pointer: String) -> String { "\(positions.mark(for: JSONPointer(pointer)!))" }
        #expect(mark("") == "8:3")
        #expect(mark("/url") == "10:5")
        #expect(mark("/headers") == "11:5")
        #expect(mark("/headers/Authorization") == "11:16")
        #expect(mark("/headers/Host") == "11:57")
        #expect(mark("/flags/3") == "17:32")
        #expect(mark("/nested/a/b") == "20:9")
        #expect(mark("/nested/a/b/1") == "20:16")
        // A pointer to something not written falls back to its nearest written ancestor, then the source.
        #expect(mark("/nested/a/zzz") == "19:7")
        #expect(mark("/nope") == "8:3")
        // Common keys are not options.
        #expect(mark("/refresh") == "8:3")

        let diagnostic = loaded.diagnostic(
            source: "repo", problem: OptionProblem(pointer: JSONPointer("/headers/Host")!, message: "expected a URL host"))
        #expect(diagnostic.formatted(file: "test.yaml") == #"test.yaml:11:57: source "repo": expected a URL host"#)
        let unknown = loaded.diagnostic(source: "ghost", problem: OptionProblem(pointer: JSONPointer("/x")!, message: "m"))
        #expect(unknown.formatted(file: "c.yaml") == #"c.yaml:1:1: source "ghost": m"#)
    }

    @Test func loadingAFile() throws {
        let path = "/tmp/hammock-config-test-\(UInt32.random(in: 0...UInt32.max)).yaml"
        let missing = loader().load(file: path)
        guard case .failure(let error) = missing else {
            Issue.record("a missing file must fail")
            return
        }
        #expect(error.description == "\(path):1:1: cannot read the file (does it exist?)")
    }
}

/// Which values are secrets is decided by where they go (issue 10): a value bound for a request header, a
/// body, a query, `auth` or a command's `env` is one, and so is every value of the explicit secret forms.
@Suite struct Secrets {
    @Test func aValueIsASecretByWhereItGoesNotWhereItCameFrom() throws {
        let text = """
            sources:
              a:
                kind: rest
                url: "${BASE}/users/${USER_ID}"
                headers: { Authorization: "Bearer ${TOKEN}", X-Trace: "${TRACE:-trace-default}" }
                query: { key: "${KEY}" }
                body: { pin: "${PIN}" }
                auth: { user: "${LOGIN}" }
                timeout: "${TIMEOUT}"
              b:
                kind: shell
                command: [echo, "${ARG}"]
                env: { PASSWORD: "${PASSWORD}" }
            """
        let environment = [
            "BASE": "http://127.0.0.1:9", "USER_ID": "42", "TOKEN": "tok-1", "KEY": "k3y-9", "PIN": "12345",
            "LOGIN": "me-admin", "TIMEOUT": "5s", "ARG": "visible", "PASSWORD": "hunter2",
        ]
        let secrets = try load(text, environment: environment).configuration.secrets
        #expect(secrets == ["tok-1", "trace-default", "k3y-9", "12345", "me-admin", "hunter2"])
    }

    @Test func basicAuthsEncodedCredentialIsASecretWhenItHoldsOne() throws {
        let text = """
            sources:
              a: { kind: rest, url: "http://h/", auth: { basic: { username: alice, password: "${PASSWORD}" } } }
              b: { kind: rest, url: "http://h/", auth: { basic: { username: bob, password: literal } } }
            """
        let secrets = try load(text, environment: ["PASSWORD": "pw-42"]).configuration.secrets
        // base64("alice:pw-42") (a secret has at least 4 characters); bob's literal credentials are configuration, as a literal anywhere is.
        #expect(secrets == ["pw-42", "YWxpY2U6cHctNDI="])
    }

    @Test func oauth2sFormsOfTheClientSecretAndRefreshTokenAreSecrets() throws {
        let text = """
            sources:
              a:
                kind: rest
                url: "http://h/"
                auth: { oauth2: { token-url: "http://h/t", client-id: "my app", client-secret: "${secret:CS}" } }
              b:
                kind: rest
                url: "http://h/"
                auth: { oauth2: { token-url: "http://h/t", client-id: c, grant: refresh_token, refresh-token: "${secret:RT}" } }
              c: { kind: rest, url: "http://h/", auth: { oauth2: { token-url: "http://h/t", client-id: c, client-secret: literal } } }
            """
        let secrets = try load(text, environment: ["CS": "s3cr/t x", "RT": "rt+1=="]).configuration.secrets
        // HTTP Basic of the form-encoded "my app" and "s3cr/t x" (RFC 6749 §2.3.1), and each value form-encoded
        // as the token request's body carries it; c's literal credentials are configuration.
        let basic = Data("my+app:s3cr%2Ft+x".utf8).base64EncodedString()
        #expect(secrets == ["s3cr/t x", "rt+1==", basic, "s3cr%2Ft+x", "rt%2B1%3D%3D"])
    }

    @Test func explicitFormsAreSecretsWhereverTheyStand() throws {
        let directory = FileManager.default.temporaryDirectory.path + "/hammock-secrets-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory + "/creds", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data("from-a-file\n".utf8).write(to: URL(fileURLWithPath: directory + "/token.txt"))
        try Data("from-systemd".utf8).write(to: URL(fileURLWithPath: directory + "/creds/api"))
        let text = """
            sources:
              a: { kind: rest, url: "http://h/${secret:PATH_TOKEN}/${file:token.txt}", headers: { K: "${cred:api}" } }
            """
        try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/config.yaml"))
        let loaded = loader(["PATH_TOKEN": "in-the-path", "CREDENTIALS_DIRECTORY": directory + "/creds"])
            .load(file: directory + "/config.yaml")
        let configuration = try loaded.get().configuration
        // A relative ${file:} is read beside the configuration, its final newline dropped.
        #expect(configuration.sources[0].options["url"] == "http://h/in-the-path/from-a-file")
        #expect(configuration.sources[0].options["headers"]?["K"] == "from-systemd")
        #expect(configuration.secrets == ["in-the-path", "from-a-file", "from-systemd"])
    }

    @Test func secretFormsThatCannotBeReadAreErrorsThatQuoteNoSecret() {
        let text = """
            sources:
              a: { kind: rest, url: "http://h/${file:/nonexistent/token}" }
              b: { kind: rest, url: "http://h/${cred:api}" }
              c: { kind: rest, url: "http://h/${secret:UNSET}" }
              d: { kind: rest, url: "http://h/${secret:X:-default}" }
            """
        #expect(problems(text) == [
            "2:25: ${file:/nonexistent/token}: cannot read /nonexistent/token: No such file or directory",
            "3:25: ${cred:api} reads $CREDENTIALS_DIRECTORY, which is not set (systemd sets it for a service with LoadCredential=api:…)",
            "4:25: environment variable UNSET is not set (it is read by ${secret:UNSET})",
            #"5:25: "${secret:X:-default}" must name an environment variable, e.g. ${secret:API_TOKEN} (a secret has no default)"#,
        ])
    }
}

@Suite struct ViewsThatCannotWork {
    @Test func anEmptyDisplayListOrASourceListedTwiceIsAnError() {
        let text = """
            sources:
              a: { kind: fake }
            views:
              v: { sources: [a, a] }
              w: { sources: [a], display: [] }
            """
        #expect(problems(text) == [
            #"4:21: view "v" lists source "a" twice"#,
            "5:31: display is an empty list; give rules such as [anyData, loading, error], or a preset: dataOnly, noError, overlay, standard",
        ])
    }

    @Test func retryOnWidensOrNarrowsWhatIsRetried() throws {
        let loaded = try load("sources:\n  a: { kind: fake, retry: { on: any } }\n  b: { kind: fake, retry: { on: transient, initial: 2s } }\n")
        #expect(loaded.configuration.source("a")?.retry == RetryPolicy(retriesEveryError: true))
        #expect(loaded.configuration.source("b")?.retry == RetryPolicy(initialDelay: .seconds(2)))
        #expect(problems("sources:\n  a: { kind: fake, retry: { on: never } }\n") == [
            #"2:33: retry.on must be `transient` (failures a retry can cure, the default) or `any`, found "never""#
        ])
    }
}

/// The example of docs/configuration.md, "Rendering a view", rendered as the page says.
@Suite struct DocumentedRenderExample {
    @Test func rendersAsDocumented() throws {
        let text = """
            sources:
              load: { kind: fake }
              repo: { kind: fake }
            views:
              system:
                sources: [load, repo]
                render:
                  text: "⚙ {{ load | split | first }}  {{ repo.stargazers_count | default('–') }} ★"
                  tooltip: "{{ repo.full_name }}: updated {{ repo.pushed_at | ago }}"
                  percentage: "{{ load | split | first | round(2) }}"
                  color: "#a3be8c"
                  loading:
                    text: "⚙ …"
                  error:
                    text: "⚠ {{ latestError.message | truncate(30) }}"
                    color: "#bf616a"
                    urgent: true
            """
        let view = try #require(try load(text).configuration.views.first)
        let now = try #require(Timestamp(rfc3339: "2026-11-22T12:00:00Z"))
        let content: JSONValue = [
            "load": "0.52 0.58 0.59\n",
            "repo": ["stargazers_count": 1234, "full_name": "ann/hammock", "pushed_at": "2026-11-22T10:00:00Z"],
        ]
        #expect(
            view.render(state: ViewState(status: .data, content: content), now: now)
                == RenderedBlock(
                    text: "⚙ 0.52  1234 ★", tooltip: "ann/hammock: updated 2 h ago", class: "data", percentage: 1,
                    color: "#a3be8c"))
        #expect(view.render(state: ViewState(status: .loading, content: .null), now: now).text == "⚙ …")
        let error = SourceError(message: "HTTP 503 Service Unavailable from api.github.com")
        let failing = view.render(
            state: ViewState(status: .error, content: .null, latestError: error, errors: [("repo", error)], canTryAgain: true),
            now: now)
        #expect(failing.text == "⚠ HTTP 503 Service Unavailable …")
        #expect(failing.color == "#bf616a" && failing.urgent && failing.class == "error" && failing.problems == [])
        // Over no content the data-time tooltip and percentage are not rendered (no template over nothing): the
        // tooltip is its default in `error`, the whole message, and there is no percentage.
        #expect(failing.tooltip == "HTTP 503 Service Unavailable from api.github.com" && failing.percentage == nil)
    }
}
