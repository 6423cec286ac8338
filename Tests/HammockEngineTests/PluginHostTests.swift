@testable import HammockCore
import HammockJSON
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// The plugin host against a plugin played in memory: every rule of supervision, in milliseconds, with
/// deadlines stepped on a manual clock.
@Suite(.timeLimit(.minutes(1))) struct PluginHostTests {
    // MARK: Handshake

    @Test func aLoadStartsThePluginWhichIsConfiguredAndAnswers() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        plugin.say(#"{"type":"newData","id":1,"content":{"n":1},"etag":"e1"}"#)
        let outcome = try await harness.loadOutcome("a", id: 1)
        #expect(outcome == .newData(["n": 1], etag: "e1"))
        // A second load goes to the same process, with no second configure.
        await harness.host.start(harness.request("a", id: 2))
        let load = try #require(await plugin.read())
        #expect(load["op"] == "load" && load["id"] == 2)
        plugin.say(#"{"type":"notModified","id":2}"#)
        #expect(try await harness.loadOutcome("a", id: 2) == .notModified)
        #expect(plugin.killCount == 0)
        await harness.finish()
    }

    @Test(arguments: [
        (#"{"type":"hello","protocol":2,"kinds":["test"],"version":"1"}"#, "speaks protocol 2; this hammock speaks 1"),
        (#"{"type":"hello","protocol":1,"kinds":["other"],"version":"1"}"#, "does not serve kind \"test\" (it serves other)"),
        (#"{"type":"configured","source":"a"}"#, "sent \"configured\" before answering hello"),
        (#"not json at all"#, "wrote a line that is not protocol"),
    ])
    func aBadHelloEndsThePluginAndFailsTheLoadsThatWaited(hello: String, reason: String) async throws {
        let harness = HostHarness()
        await harness.host.start(harness.request("a", id: 1))
        let plugin = try await harness.nextPlugin()
        _ = await plugin.expect("hello")
        plugin.say(hello)
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)))
        #expect(message.hasPrefix("the test plugin \(reason)"))
        #expect(plugin.killCount == 1)
        await harness.finish()
    }

    @Test func noHelloWithinFiveSecondsEndsThePlugin() async throws {
        let harness = HostHarness()
        await harness.host.start(harness.request("a", id: 1))
        let plugin = try await harness.nextPlugin()
        _ = await plugin.expect("hello")
        harness.clock.advance(by: PluginSupervisor.handshakeTimeout - .milliseconds(1))
        #expect(await harness.inbox.staysEmpty(for: .milliseconds(50)))
        #expect(plugin.killCount == 0)
        harness.clock.advance(by: .milliseconds(1))
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)))
        #expect(message == "the test plugin did not answer hello within \(PluginSupervisor.handshakeTimeout.humanReadable)")
        #expect(plugin.killCount == 1)
        await harness.finish()
    }

    @Test func aLineOverTheLimitBeforeHelloEndsThePlugin() async throws {
        let harness = HostHarness()
        await harness.host.start(harness.request("a", id: 1))
        let plugin = try await harness.nextPlugin()
        _ = await plugin.expect("hello")
        plugin.write(bytes: [UInt8](repeating: UInt8(ascii: "x"), count: PluginSupervisor.maximumLineLength + 1) + [10])
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)))
        #expect(message.contains("over the limit of \(PluginSupervisor.maximumLineLength), before answering hello"))
        await harness.finish()
    }

    // MARK: Answers and pushes

    @Test func aPushGoesToItsSourceAndAnAnswerToItsLoad() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        plugin.say(#"{"type":"newData","source":"a","content":"pushed"}"#)
        guard case .pushed("a", let mailbox) = try await harness.nextInput() else {
            Issue.record("expected a push of a")
            return
        }
        #expect(mailbox.take()?.content == "pushed")
        plugin.say(#"{"type":"error","source":"a","error":{"message":"the stream broke"}}"#)
        guard case .pushedError("a", let error) = try await harness.nextInput() else {
            Issue.record("expected a pushed error of a")
            return
        }
        #expect(error.message == "the stream broke")
        plugin.say(#"{"type":"error","id":1,"error":{"message":"no such file"}}"#)
        #expect(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)) == "no such file")
        // An answer to a load no longer pending, and a push of a source the host never had, are dropped.
        plugin.say(#"{"type":"newData","id":1,"content":"late"}"#)
        plugin.say(#"{"type":"newData","source":"unknown","content":"stray"}"#)
        #expect(await harness.inbox.staysEmpty(for: .milliseconds(50)))
        #expect(plugin.killCount == 0)
        await harness.finish()
    }

    @Test func pushesTheEngineHasNotTakenAreReplacedByNewerOnes() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        for n in 1...3 { plugin.say(#"{"type":"newData","source":"a","content":\#(n)}"#) }
        guard case .pushed("a", let mailbox) = try await harness.nextInput() else {
            Issue.record("expected a push of a")
            return
        }
        // All three reached the host before the engine looked: one input, the newest content.
        plugin.say(#"{"type":"notModified","id":1}"#)
        #expect(try await harness.loadOutcome("a", id: 1) == .notModified)
        #expect(mailbox.take()?.content == 3)
        await harness.finish()
    }

    // MARK: Lines that are not protocol

    @Test func aGarbageLineFailsThePluginsLoadsAndTheEngineGoesOnWithARestart() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        plugin.say("{garbage")
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)))
        #expect(message.hasPrefix("the test plugin wrote a line that is not protocol"))
        #expect(message.hasSuffix(": {garbage"))
        #expect(plugin.killCount == 1)
        // The restart comes after its backoff; the source is configured again and loads.
        harness.clock.advance(by: PluginSupervisor.restartDelay(afterCrashes: 1))
        let second = try await harness.nextPlugin()
        await second.shakeHands()
        #expect(try #require(await second.expect("configure"))["source"] == "a")
        second.say(#"{"type":"configured","source":"a"}"#)
        await harness.host.start(harness.request("a", id: 2))
        _ = await second.expect("load")
        second.say(#"{"type":"newData","id":2,"content":"fine"}"#)
        #expect(try await harness.loadOutcome("a", id: 2) == .newData("fine"))
        await harness.finish()
    }

    @Test func aLastLineWithoutNewlineStillCountsWhenThePluginExits() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        plugin.write(#"{"type":"newData","id":1,"content":"#)
        plugin.write(#""half"}"#)
        plugin.exit(.exited(0))
        #expect(try await harness.loadOutcome("a", id: 1) == .newData("half"))
        // Then the news of its end, to the source with nothing in flight.
        guard case .pushedError("a", let error) = try await harness.nextInput() else {
            Issue.record("expected the plugin's end at source a")
            return
        }
        #expect(error.message == "the test plugin exited with status 0")
        await harness.finish()
    }

    @Test func anAnswerOverTheLimitFailsItsLoadAndThePluginGoesOn() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        let bulk = String(repeating: "x", count: PluginSupervisor.maximumLineLength)
        plugin.say(#"{"type":"newData","id":1,"content":""# + bulk + #""}"#)
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)))
        #expect(message.contains("wrote a \"newData\" line of \(PluginSupervisor.maximumLineLength + 38) bytes"))
        #expect(message.hasSuffix("it was skipped"))
        // A push over the limit fails its source.
        plugin.say(#"{"type":"newData","source":"a","content":""# + bulk + #""}"#)
        guard case .pushedError("a", let error) = try await harness.nextInput() else {
            Issue.record("expected a pushed error of a")
            return
        }
        #expect(error.message.contains("it was skipped"))
        // The plugin was not ended: the next load goes to it.
        await harness.host.start(harness.request("a", id: 2))
        _ = await plugin.expect("load")
        plugin.say(#"{"type":"notModified","id":2}"#)
        #expect(try await harness.loadOutcome("a", id: 2) == .notModified)
        #expect(plugin.killCount == 0)
        await harness.finish()
    }

    // MARK: Crashes and restarts

    @Test func aCrashMidLoadFailsTheLoadAndTellsTheOtherSources() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        await harness.host.start(harness.request("b", id: 2))
        _ = await plugin.expect("configure")
        plugin.say(#"{"type":"configured","source":"b"}"#)
        _ = await plugin.expect("load")
        plugin.say(#"{"type":"newData","id":2,"content":"b's"}"#)
        #expect(try await harness.loadOutcome("b", id: 2) == .newData("b's"))
        plugin.exit(.killed(signal: 11))
        // The load in flight fails (its source keeps its content: the engine's business); b, with nothing in
        // flight, hears of it too.
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)))
        #expect(message == "the test plugin was killed by signal 11")
        guard case .pushedError("b", let error) = try await harness.nextInput() else {
            Issue.record("expected the plugin's end at source b")
            return
        }
        #expect(error.message == message)
        await harness.finish()
    }

    @Test func restartsBackOffAndStopAfterFiveCrashesInAMinute() async throws {
        let harness = HostHarness()
        var plugin = try await harness.startReady("a", id: 1)
        for crash in 1...4 {
            plugin.exit(.exited(1))
            _ = try await harness.loadOutcome("a", id: crash)
            let delay = PluginSupervisor.restartDelay(afterCrashes: crash)
            #expect(delay == .milliseconds(250 << (crash - 1)))
            harness.clock.advance(by: delay - .milliseconds(1))
            #expect(await harness.launches.staysEmpty(for: .milliseconds(30)), "restarted before \(delay)")
            harness.clock.advance(by: .milliseconds(1))
            plugin = try await harness.nextPlugin()
            await plugin.shakeHands()
            _ = await plugin.expect("configure")
            plugin.say(#"{"type":"configured","source":"a"}"#)
            await harness.host.start(harness.request("a", id: crash + 1))
            _ = await plugin.expect("load")
        }
        plugin.exit(.exited(1))
        let message = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 5)))
        #expect(message == "the test plugin exited with status 1")
        // The fifth within the minute: no restart, and every load fails at once.
        harness.clock.advance(by: .seconds(60))
        #expect(await harness.launches.staysEmpty(for: .milliseconds(30)))
        await harness.host.start(harness.request("a", id: 6))
        let gaveUp = try #require(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 6)))
        #expect(gaveUp.hasSuffix("gave up after 5 failures within \(PluginSupervisor.crashWindow.humanReadable)"))
        await harness.finish()
    }

    @Test func crashesFartherApartThanTheWindowAreForgiven() async throws {
        #expect(PluginSupervisor.restartDelay(afterCrashes: 1) == .milliseconds(250))
        #expect(PluginSupervisor.restartDelay(afterCrashes: 8) == .seconds(32))
        #expect(PluginSupervisor.restartDelay(afterCrashes: 30) == .seconds(32))
        let harness = HostHarness()
        var plugin = try await harness.startReady("a", id: 1)
        for crash in 1...6 {
            plugin.exit(.exited(1))
            _ = try await harness.loadOutcome("a", id: crash)
            // Each crash a minute after the one before: always the first in its window.
            harness.clock.advance(by: PluginSupervisor.crashWindow)
            plugin = try await harness.nextPlugin()
            await plugin.shakeHands()
            _ = await plugin.expect("configure")
            plugin.say(#"{"type":"configured","source":"a"}"#)
            await harness.host.start(harness.request("a", id: crash + 1))
            _ = await plugin.expect("load")
        }
        await harness.finish()
    }

    // MARK: Configure

    @Test func anUnansweredConfigureHoldsItsSourceBackAndRestartsThePluginWithoutIt() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        await harness.host.start(harness.request("b", id: 2, options: ["stuck": true]))
        _ = await plugin.expect("configure")
        _ = await plugin.expect("load")
        harness.clock.advance(by: PluginSupervisor.configureTimeout - .milliseconds(1))
        #expect(await harness.inbox.staysEmpty(for: .milliseconds(50)))
        harness.clock.advance(by: .milliseconds(1))
        let reason = "the test plugin did not answer `configure` for source \"b\" within \(PluginSupervisor.configureTimeout.humanReadable)"
        // Both loads in flight end with the plugin, which was killed over b's configure.
        #expect(HostHarness.errorMessage(try await harness.loadOutcome("a", id: 1)) == reason)
        #expect(HostHarness.errorMessage(try await harness.loadOutcome("b", id: 2)) == reason)
        #expect(plugin.killCount == 1)
        harness.clock.advance(by: PluginSupervisor.restartDelay(afterCrashes: 1))
        let second = try await harness.nextPlugin()
        await second.shakeHands()
        // Restarted without b: only a is configured, and b's loads fail at once while its options stay.
        let configure = try #require(await second.expect("configure"))
        #expect(configure["source"] == "a")
        second.say(#"{"type":"configured","source":"a"}"#)
        await harness.host.start(harness.request("b", id: 3, options: ["stuck": true]))
        #expect(HostHarness.errorMessage(try await harness.loadOutcome("b", id: 3)) == reason)
        // New options are sent again.
        await harness.host.start(harness.request("b", id: 4, options: ["stuck": false]))
        #expect(try #require(await second.expect("configure"))["source"] == "b")
        await harness.finish()
    }

    /// docs/plugin-protocol.md: answer `configure` "within 5 s (counted from your last answer to a
    /// `configure`, so a long list at start-up is fine)". The numbers are the documented ones, not the constant.
    @Test func theConfigureDeadlineIsFiveSecondsFromThePluginsLastAnswer() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        await harness.host.start(harness.request("b", id: 2))
        await harness.host.start(harness.request("c", id: 3))
        #expect(try #require(await plugin.expect("configure"))["source"] == "b")
        #expect(try #require(await plugin.expect("configure"))["source"] == "c")
        // 4 s later the plugin answers b: c, sent 4 s ago, now has 5 s from this answer, not 1 s.
        harness.clock.advance(by: .seconds(4))
        plugin.say(#"{"type":"configured","source":"b"}"#)
        // Lines are read in order: once a's answer is in, b's has been taken at the 4 s mark.
        plugin.say(#"{"type":"newData","id":1,"content":"a"}"#)
        #expect(try await harness.loadOutcome("a", id: 1) == .newData("a"))
        harness.clock.advance(by: .milliseconds(4_999))
        #expect(await harness.inbox.staysEmpty(for: .milliseconds(50)), "c is not due 8.999 s after it was sent")
        #expect(plugin.killCount == 0)
        harness.clock.advance(by: .milliseconds(1))
        // 9 s after c was sent, 5 s after the last answer: the plugin is ended over c.
        let reason = "the test plugin did not answer `configure` for source \"c\" within 5s"
        var ended: [SourceID: String?] = [:]
        for _ in 0..<2 {
            guard case .loadFinished(let source, _, let outcome) = try await harness.nextInput() else { continue }
            ended[source] = HostHarness.errorMessage(outcome)
        }
        #expect(ended == ["b": reason, "c": reason])
        #expect(plugin.killCount == 1)
        await harness.finish()
    }

    @Test func validationReportsEachSourcesVerdict() async throws {
        let harness = HostHarness()
        async let answers = harness.host.validate([("good", ["k": 1]), ("bad", ["k": 2])])
        let plugin = try await harness.nextPlugin()
        await plugin.shakeHands()
        // Configured in the order of their names once the handshake is done.
        let first = try #require(await plugin.expect("configure"))
        let second = try #require(await plugin.expect("configure"))
        #expect(first["source"] == "bad" && second["source"] == "good")
        plugin.say(#"{"type":"invalid","source":"bad","errors":[{"path":"/k","message":"must be 1"}]}"#)
        plugin.say(#"{"type":"configured","source":"good"}"#)
        let verdicts = await answers
        guard case .valid = verdicts["good"], case .invalid(let problems) = verdicts["bad"] else {
            Issue.record("unexpected verdicts \(verdicts)")
            return
        }
        #expect(problems.map(\.message) == ["must be 1"])
        await harness.finish()
    }

    /// The template rules of the plugin's hello join its own verdicts, and set the encoding the core runs with.
    @Test func theHellosTemplateRulesReachValidationAndTheConfiguration() async throws {
        let harness = HostHarness()
        func templated(_ pointer: String) throws -> TemplatedOption {
            TemplatedOption(
                pointer: try #require(JSONPointer(pointer)), template: try #require(try Template.parse("{{ x.y }}")),
                percentEncode: false)
        }
        let scripted = SourceDefinition(id: "scripted", kind: "test", options: ["script": "{{ x.y }}"], templates: [try templated("/script")])
        let fetched = SourceDefinition(id: "fetched", kind: "test", options: ["url": "{{ x.y }}"], templates: [try templated("/url")])
        let both = SourceDefinition(
            id: "both", kind: "test", options: ["script": "{{ x.y }}", "k": 2], templates: [try templated("/script")])
        async let answers = Engine.validate([scripted, fetched, both], with: harness.host)
        let plugin = try await harness.nextPlugin()
        _ = await plugin.expect("hello")
        plugin.say(
            #"{"type":"hello","protocol":1,"kinds":["test"],"version":"1","templates":{"test":{"refused":{"/script":"not in a script"},"urlEncoded":["/url"]}}}"#
        )
        for _ in 0..<3 {
            let configure = try #require(await plugin.expect("configure"))
            let source = try #require(configure["source"]?.stringValue)
            if source == "both" {
                plugin.say(#"{"type":"invalid","source":"both","errors":[{"path":"/k","message":"must be 1"}]}"#)
            } else {
                plugin.say(#"{"type":"configured","source":"\#(source)"}"#)
            }
        }
        let verdicts = await answers
        guard case .invalid(let scriptProblems) = verdicts["scripted"], case .valid = verdicts["fetched"],
            case .invalid(let bothProblems) = verdicts["both"]
        else {
            Issue.record("unexpected verdicts \(verdicts)")
            return
        }
        #expect(scriptProblems == [OptionProblem(pointer: JSONPointer(tokens: ["script"]), message: "not in a script")])
        #expect(bothProblems.map(\.message) == ["must be 1", "not in a script"])

        let rules = try #require(
            await Engine.templateRules(for: Configuration(sources: [scripted, fetched]), from: ["test": harness.host])["test"])
        #expect([scripted, fetched].map { rules.apply(to: $0).definition.templates.map(\.percentEncode) } == [[false], [true]])
        await harness.finish()
    }

    /// A plugin that never said hello has no rules: its sources fail as its plugin does, nothing more.
    @Test func aPluginWithoutHelloHasNoRules() async throws {
        let harness = HostHarness()
        let source = SourceDefinition(
            id: "a", kind: "test", options: ["url": "{{ x.y }}"],
            templates: [
                TemplatedOption(
                    pointer: JSONPointer(tokens: ["url"]), template: try #require(try Template.parse("{{ x.y }}")),
                    percentEncode: false)
            ])
        async let answers = Engine.validate([source], with: harness.host)
        let plugin = try await harness.nextPlugin()
        _ = await plugin.expect("hello")
        plugin.exit(.exited(3))
        guard case .pluginFailed = await answers["a"] else {
            Issue.record("expected the plugin's failure")
            return
        }
        #expect(await harness.host.templateRules == nil)
        await harness.finish()
    }

    // MARK: Remove, cancel, shutdown

    @Test func removeTellsThePluginAndDropsTheSourcesPushes() async throws {
        let harness = HostHarness()
        let plugin = try await harness.startReady("a", id: 1)
        await harness.host.cancel(source: "a", loadID: 1)
        #expect(try #require(await plugin.read()) == ["op": "cancel", "id": 1])
        await harness.host.remove(source: "a")
        #expect(try #require(await plugin.read()) == ["op": "remove", "source": "a"])
        plugin.say(#"{"type":"newData","source":"a","content":"after"}"#)
        plugin.say(#"{"type":"newData","id":1,"content":"cancelled"}"#)
        #expect(await harness.inbox.staysEmpty(for: .milliseconds(50)))
        await harness.finish()
    }

    @Test func shutdownAsksThePluginToExitAndWaitsForIt() async throws {
        let harness = HostHarness(plugins: { EmbeddedPlugin(exitsAtEndOfInput: false) })
        let plugin = try await harness.startReady("a", id: 1)
        async let shutdown: Void = harness.host.shutdown()
        #expect(try #require(await plugin.read()) == ["op": "shutdown"])
        // Its stdin is closed after the shutdown line.
        #expect(await plugin.read(within: .seconds(5)) == nil)
        plugin.exit(.exited(0))
        await shutdown
        #expect(plugin.killCount == 0)
        // Shutting down tells no source anything: the engine is stopping.
        #expect(await harness.inbox.staysEmpty(for: .milliseconds(20)))
        await harness.finish()
    }

    @Test func aPluginThatIgnoresShutdownIsKilledAfterTheGrace() async throws {
        let harness = HostHarness(plugins: { EmbeddedPlugin(diesWhenKilled: false, exitsAtEndOfInput: false) })
        let plugin = try await harness.startReady("a", id: 1)
        let start = harness.clock.now
        async let shutdown: Void = harness.host.shutdown()
        _ = await plugin.expect("shutdown")
        #expect(await harness.clock.waitUntilArmed(start + PluginHost.shutdownGrace))
        harness.clock.advance(by: PluginHost.shutdownGrace - .milliseconds(1))
        try? await Task.sleep(for: .milliseconds(30))
        #expect(plugin.killCount == 0)
        harness.clock.advance(by: .milliseconds(1))
        // It ignores the kill too; the host gives up waiting after the kill's grace and two seconds more.
        let giveUp = harness.clock.now + PluginHost.killGrace + .seconds(2)
        #expect(await harness.clock.waitUntilArmed(giveUp))
        #expect(plugin.killCount == 1)
        harness.clock.advance(by: PluginHost.killGrace + .seconds(2))
        await shutdown
        #expect(plugin.killCount == 1)
        plugin.exit(.killed(signal: 9))
        await harness.finish()
    }

    @Test func aHostNeverStartedShutsDownAtOnce() async throws {
        let harness = HostHarness()
        await harness.finish()
        #expect(await harness.launches.staysEmpty(for: .milliseconds(10)))
    }
}
