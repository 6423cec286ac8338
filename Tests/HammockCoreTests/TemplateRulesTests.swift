import HammockCore
import HammockJSON
import Testing

// Issue 12, item 4: which options may hold templates, and which are URL-encoded, is the plugin's to declare.
@Suite struct TemplateRulesTests {
    func templated(_ pointer: String, _ text: String) throws -> TemplatedOption {
        TemplatedOption(
            pointer: try #require(JSONPointer(pointer)), template: try #require(try Template.parse(text)),
            percentEncode: true)
    }

    @Test func aRefusedPointerCoversEverythingUnderItWithThePluginsReason() throws {
        let rules = TemplateRules(refused: [JSONPointer(tokens: ["script"]): "no templates in a script"])
        let definition = SourceDefinition(
            id: "s", kind: "shell",
            templates: [
                try templated("/script", "echo {{ a }}"), try templated("/script/0", "{{ a.x }}"),
                try templated("/scripts", "{{ a }}"), try templated("/env/script", "{{ a }}"),
            ])
        let (_, problems) = rules.apply(to: definition)
        #expect(
            problems == [
                OptionProblem(pointer: JSONPointer(tokens: ["script"]), message: "no templates in a script"),
                OptionProblem(pointer: JSONPointer(tokens: ["script", "0"]), message: "no templates in a script"),
            ])
    }

    @Test func theShortestRefusedPointerGivesTheReason() throws {
        let rules = TemplateRules(refused: [
            JSONPointer(tokens: ["a"]): "outer", JSONPointer(tokens: ["a", "b"]): "inner",
        ])
        let (_, problems) = rules.apply(to: SourceDefinition(id: "s", kind: "k", templates: [try templated("/a/b", "{{ x }}")]))
        #expect(problems.map(\.message) == ["outer"])
    }

    @Test func onlyTheDeclaredPointersAreEncoded() throws {
        let rules = TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])])
        let definition = SourceDefinition(
            id: "s", kind: "rest",
            templates: [
                try templated("/url", "https://h/{{ a }}"), try templated("/url/x", "{{ a }}"),
                try templated("/headers/url", "{{ a }}"),
            ])
        let (applied, problems) = rules.apply(to: definition)
        #expect(problems.isEmpty)
        #expect(applied.templates.map(\.percentEncode) == [true, false, false])
    }

    @Test func noRulesAllowEveryTemplateAndEncodeNone() throws {
        let definition = SourceDefinition(
            id: "s", kind: "shell", templates: [try templated("/script", "{{ a }}"), try templated("/url", "{{ a }}")])
        let (applied, problems) = TemplateRules().apply(to: definition)
        #expect(TemplateRules().isEmpty)
        #expect(problems.isEmpty)
        #expect(applied.templates.map(\.percentEncode) == [false, false])
        #expect(applied.templates.map(\.pointer) == definition.templates.map(\.pointer))
    }
}

/// A templated source loads only once its kind's plugin has said hello with its rules: a value filled in
/// without them could climb a URL's path.
@Suite struct EngineCoreTemplateRules {
    static func user() throws -> SourceDefinition {
        SourceDefinition(
            id: "user", kind: "rest", options: ["url": "http://x/users/{{ who }}"],
            templates: [
                TemplatedOption(
                    pointer: JSONPointer(tokens: ["url"]),
                    template: try #require(try Template.parse("http://x/users/{{ who }}")), percentEncode: false)
            ])
    }

    @Test func aTemplatedSourceWaitsForItsKindsRulesThenLoadsEncoded() throws {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("who"), try Self.user()]))
        let started = engine.start(now: at(ms: 0))
        #expect(started.loads.map(\.source) == ["who"])
        // Its plugin is asked to start (once), and the source waits for it without an error.
        #expect(started.summaries.filter { $0.hasPrefix("startLoader") } == ["startLoader rest"])
        #expect(engine.state(of: "user")?.latestError == nil)
        _ = engine.loadFinished(source: "who", loadID: 1, outcome: .newData("../admin"), now: at(ms: 10))

        let learned = engine.learnTemplateRules(
            TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])]), for: "rest", now: at(ms: 20))
        let url = try #require(learned.loads.first?.options["url"]?.stringValue)
        #expect(learned.loads.map(\.source) == ["user"])
        #expect(!url.contains("../"), "\(url)")
        // The same rules again change nothing.
        #expect(engine.learnTemplateRules(TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])]), for: "rest", now: at(ms: 30)).isEmpty)
    }

    @Test func aPluginThatDoesNotStartIsTheWaitingSourcesErrorUntilItsHello() throws {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("who"), try Self.user()]))
        _ = engine.start(now: at(ms: 0))
        _ = engine.loadFinished(source: "who", loadID: 1, outcome: .newData("me"), now: at(ms: 10))
        let failed = engine.loaderFailedToStart("rest", now: at(ms: 20))
        #expect(engine.state(of: "user")?.latestError?.code == .pluginFailed)
        #expect(failed.loads.isEmpty)
        // Asked again (a load of it), the plugin is asked to start again; its hello then loads the source.
        let again = engine.handle(.load(.source("user")), now: at(ms: 30))
        #expect(again.summaries.filter { $0.hasPrefix("startLoader") } == ["startLoader rest"], "\(again.summaries)")
        let learned = engine.learnTemplateRules(TemplateRules(urlEncoded: [JSONPointer(tokens: ["url"])]), for: "rest", now: at(ms: 40))
        #expect(learned.loads.map(\.source) == ["user"])
    }
}
