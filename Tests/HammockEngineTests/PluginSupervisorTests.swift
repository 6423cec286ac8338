@testable import HammockCore
import HammockJSON
import HammockProtocol
import Testing

@testable import HammockEngine
@testable import HammockPluginHost

/// The supervision rules as pure decisions: inputs in, actions out, time passed in. No process, task or
/// sleep: each test is a sequence of calls on one `PluginSupervisor` and the exact actions it returns.
@Suite struct PluginSupervisorTests {
    typealias Action = PluginSupervisor.Action
    static let t0 = SuspendingClock.Instant.now

    static func request(_ source: SourceID, id: Int, options: JSONValue = ["key": "value"]) -> LoadRequest {
        LoadRequest(source: source, kind: "test", loadID: LoadID(id), options: options, etag: nil, lastModified: nil, timeout: .seconds(30))
    }

    static func hello(kinds: [String] = ["test"], protocol version: Int = pluginProtocolVersion, queuesLoads: Bool = false)
        -> PluginSupervisor.Line
    {
        .message(.hello(protocol: version, kinds: kinds, version: "1", queuesLoads: queuesLoads))
    }

    static func configure(_ source: String, _ options: JSONValue = ["key": "value"]) -> Action {
        .sendLine(EngineMessage.configure(source: source, options: options).line)
    }

    static func load(_ source: String, id: Int) -> Action {
        .send(.load(source: source, id: id, etag: nil, lastModified: nil, timeout: 30))
    }

    static func failed(_ source: SourceID, id: Int, _ message: String, _ code: SourceError.Code = .pluginFailed) -> Action {
        .report(.loadFinished(source: source, loadID: id, outcome: .error(SourceError(message: message, code: code))))
    }

    /// A supervisor whose plugin said hello with source "a" configured (and answered) and load 1 of "a" sent.
    static func ready(queuesLoads: Bool = false) -> PluginSupervisor {
        var supervisor = PluginSupervisor(kind: "test", now: t0)
        _ = supervisor.start(request("a", id: 1), now: t0)
        _ = supervisor.received(hello(queuesLoads: queuesLoads), generation: 1, now: t0)
        _ = supervisor.received(.message(.configured(source: "a")), generation: 1, now: t0)
        return supervisor
    }

    // MARK: Start and handshake

    @Test func aFirstLoadStartsThePluginAndWaitsForItsHello() {
        var supervisor = PluginSupervisor(kind: "test", now: Self.t0)
        #expect(
            supervisor.start(Self.request("a", id: 1), now: Self.t0) == [
                .startProcess(generation: 1), .send(.hello(protocol: pluginProtocolVersion)),
                .setTimer(.handshake(generation: 1), deadline: Self.t0 + .seconds(5)),
            ])
        // A second load waits with the first; nothing is sent before the hello.
        #expect(supervisor.start(Self.request("b", id: 2), now: Self.t0).isEmpty)
        #expect(supervisor.phase == .starting)
        // The hello: rules learned, each source configured in the order of its id, then the loads that waited.
        let actions = supervisor.received(Self.hello(), generation: 1, now: Self.t0 + .seconds(1))
        #expect(
            actions == [
                .log(.debug, "plugin ready", metadata: ["kind": "test", "version": "1"]),
                .report(.templateRulesLearned(kind: "test")),
                Self.configure("a"), .setTimer(.configure(generation: 1), deadline: Self.t0 + .seconds(6)),
                Self.configure("b"), Self.load("a", id: 1), Self.load("b", id: 2), .settleReadiness(failure: nil),
            ])
        #expect(supervisor.phase == .ready)
        #expect(supervisor.templateRules == TemplateRules())
        // A load once ready goes straight out, with no second configure.
        #expect(supervisor.start(Self.request("a", id: 3), now: Self.t0) == [Self.load("a", id: 3)])
    }

    @Test(arguments: [
        (PluginSupervisorTests.hello(protocol: 2), "speaks protocol 2; this hammock speaks \(pluginProtocolVersion)"),
        (PluginSupervisorTests.hello(kinds: ["other"]), "does not serve kind \"test\" (it serves other)"),
        (.message(.configured(source: "a")), "sent \"configured\" before answering hello"),
        (.notProtocol(error: "not JSON", excerpt: "garbage"), "wrote a line that is not protocol (not JSON): garbage"),
        (
            .tooLong(length: 20_000_000, head: LineHead([])),
            "wrote a line of 20000000 bytes, over the limit of \(PluginSupervisor.maximumLineLength), before answering hello"
        ),
    ] as [(PluginSupervisor.Line, String)])
    func aBadFirstLineKillsThePluginAndItsExitSaysWhy(line: PluginSupervisor.Line, reason: String) {
        var supervisor = PluginSupervisor(kind: "test", now: Self.t0)
        _ = supervisor.start(Self.request("a", id: 1), now: Self.t0)
        #expect(supervisor.received(line, generation: 1, now: Self.t0) == [.kill])
        // Killed once: a second bad line asks nothing more.
        #expect(supervisor.received(line, generation: 1, now: Self.t0).isEmpty)
        let actions = supervisor.exited(generation: 1, exit: .killed(signal: 9), now: Self.t0)
        #expect(actions.contains(Self.failed("a", id: 1, "the test plugin \(reason)")))
    }

    @Test func noHelloByTheDeadlineKillsThePlugin() {
        var supervisor = PluginSupervisor(kind: "test", now: Self.t0)
        _ = supervisor.start(Self.request("a", id: 1), now: Self.t0)
        #expect(supervisor.timerFired(.handshake(generation: 1), now: Self.t0 + .seconds(5)) == [.kill])
        let actions = supervisor.exited(generation: 1, exit: .killed(signal: 9), now: Self.t0 + .seconds(5))
        #expect(actions.contains(Self.failed("a", id: 1, "the test plugin did not answer hello within 5s")))
        // The handshake deadline of a plugin that did answer asks nothing.
        var answered = Self.ready()
        #expect(answered.timerFired(.handshake(generation: 1), now: Self.t0 + .seconds(5)).isEmpty)
    }

    @Test func aSecondHelloKillsThePlugin() {
        var supervisor = Self.ready()
        #expect(supervisor.received(Self.hello(), generation: 1, now: Self.t0) == [.kill])
    }

    @Test func whatAnOldProcessSaysIsIgnored() {
        var supervisor = Self.ready()
        _ = supervisor.exited(generation: 1, exit: .exited(1), now: Self.t0)
        _ = supervisor.timerFired(.restart(generation: 1), now: Self.t0 + .seconds(1))
        #expect(supervisor.generation == 2)
        _ = supervisor.received(Self.hello(), generation: 2, now: Self.t0 + .seconds(1))
        #expect(supervisor.start(Self.request("a", id: 2), now: Self.t0 + .seconds(1)) == [Self.load("a", id: 2)])
        // The new process has load 2 in flight: the old one's word on it, or anything else, counts for nothing.
        #expect(supervisor.received(.message(.notModified(id: 2)), generation: 1, now: Self.t0).isEmpty)
        #expect(supervisor.received(.message(.pushedData(source: "a", content: 1)), generation: 1, now: Self.t0).isEmpty)
        #expect(supervisor.received(Self.hello(), generation: 1, now: Self.t0).isEmpty)
        #expect(supervisor.received(.notProtocol(error: "x", excerpt: "x"), generation: 1, now: Self.t0).isEmpty)
        #expect(supervisor.exited(generation: 1, exit: .exited(1), now: Self.t0).isEmpty)
        #expect(supervisor.timerFired(.handshake(generation: 1), now: Self.t0 + .seconds(10)).isEmpty)
        #expect(supervisor.timerFired(.restart(generation: 1), now: Self.t0 + .seconds(10)).isEmpty)
        #expect(supervisor.timerFired(.configure(generation: 1), now: Self.t0 + .seconds(10)).isEmpty)
    }

    // MARK: Answers, pushes, cancel, remove

    @Test func answersGoToTheirLoadsAndPushesToTheirSources() {
        var supervisor = Self.ready()
        let now = Self.t0
        #expect(
            supervisor.received(.message(.newData(id: 1, source: nil, content: 1, etag: "e", lastModified: nil)), generation: 1, now: now)
                == [.sealPushes(source: "a"), .report(.loadFinished(source: "a", loadID: 1, outcome: .newData(1, etag: "e")))])
        // An answer to a load no longer pending, and a push of a source never wanted, are dropped.
        #expect(supervisor.received(.message(.notModified(id: 1)), generation: 1, now: now).isEmpty)
        #expect(supervisor.received(.message(.pushedData(source: "x", content: 1)), generation: 1, now: now).isEmpty)
        #expect(
            supervisor.received(.message(.pushedData(source: "a", content: 2)), generation: 1, now: now) == [
                .report(.pushed(source: "a", content: 2))
            ])
        let error = SourceError(message: "broke")
        #expect(
            supervisor.received(.message(.pushedError(source: "a", error: error)), generation: 1, now: now) == [
                .sealPushes(source: "a"), .report(.pushedError(source: "a", error: error)),
            ])
    }

    /// A `meta` goes with the answer or push after it; one over `maximumMetaLength` is dropped with a warning,
    /// and the answer goes on without it.
    @Test func metaGoesWithWhatFollowsItAndAnOversizedOneIsDropped() {
        var supervisor = Self.ready()
        let now = Self.t0
        #expect(supervisor.received(.message(.meta(id: 1, meta: ["httpStatus": 200])), generation: 1, now: now).isEmpty)
        #expect(
            supervisor.received(.message(.newData(id: 1, source: nil, content: 1, etag: nil, lastModified: nil)), generation: 1, now: now)
                == [.sealPushes(source: "a"), .report(.loadFinished(source: "a", loadID: 1, outcome: .described(.newData(1), meta: ["httpStatus": 200])))])
        #expect(supervisor.received(.message(.pushedMeta(source: "a", meta: ["size": 2])), generation: 1, now: now).isEmpty)
        #expect(
            supervisor.received(.message(.pushedData(source: "a", content: 2)), generation: 1, now: now)
                == [.report(.pushed(source: "a", content: 2, meta: ["size": 2]))])
        #expect(
            supervisor.received(.message(.pushedData(source: "a", content: 3)), generation: 1, now: now)
                == [.report(.pushed(source: "a", content: 3))], "a meta goes with one push, not the ones after it")

        let huge: JSONObject = ["blob": .string(String(repeating: "x", count: maximumMetaLength))]
        let dropped = supervisor.received(.message(.pushedMeta(source: "a", meta: huge)), generation: 1, now: now)
        guard case .log(.warning, let message, _)? = dropped.first else {
            Issue.record("no warning: \(dropped)")
            return
        }
        #expect(message.contains("the limit is \(maximumMetaLength)"))
        #expect(!message.contains("xxxx"), "the warning does not quote the meta")
        #expect(
            supervisor.received(.message(.pushedData(source: "a", content: 4)), generation: 1, now: now)
                == [.report(.pushed(source: "a", content: 4))])
    }

    @Test func anErrorOfASourceWithInvalidOptionsSaysWhichOptions() {
        var supervisor = Self.ready()
        let problem = OptionProblem(pointer: JSONPointer(tokens: ["k"]), message: "must be 1")
        #expect(
            supervisor.received(.message(.invalid(source: "a", errors: [problem])), generation: 1, now: Self.t0) == [
                .settleValidation(source: "a", .invalid([problem]))
            ])
        let actions = supervisor.received(
            .message(.error(id: 1, source: nil, error: SourceError(message: "whatever"))), generation: 1, now: Self.t0)
        #expect(actions.last == Self.failed("a", id: 1, "invalid options: /k: must be 1", .invalidOptions))
    }

    @Test func aPluginThatQueuesLoadsHasEachReportedQueuedThenStarted() {
        var supervisor = Self.ready(queuesLoads: true)
        #expect(
            supervisor.start(Self.request("a", id: 2), now: Self.t0) == [
                Self.load("a", id: 2), .report(.loadQueued(source: "a", loadID: 2)),
            ])
        #expect(supervisor.received(.message(.started(id: 2)), generation: 1, now: Self.t0) == [.report(.loadStarted(source: "a", loadID: 2))])
        #expect(supervisor.received(.message(.started(id: 99)), generation: 1, now: Self.t0).isEmpty)
    }

    @Test func cancelAndRemoveTellThePluginOnlyWhatItHas() {
        var supervisor = Self.ready()
        #expect(supervisor.cancel(loadID: 1) == [.send(.cancel(id: 1))])
        #expect(supervisor.cancel(loadID: 1).isEmpty)
        #expect(supervisor.remove(source: "a") == [.dropPushes(source: "a"), .send(.remove(source: "a"))])
        #expect(supervisor.remove(source: "a") == [.dropPushes(source: "a")])
        // A removed source's pushes are dropped.
        #expect(supervisor.received(.message(.pushedData(source: "a", content: 1)), generation: 1, now: Self.t0).isEmpty)
    }

    @Test func aLineOverTheLimitFailsWhatItAnswersAndNotThePlugin() {
        var supervisor = Self.ready()
        let length = PluginSupervisor.maximumLineLength + 10
        let message =
            "the test plugin wrote a \"newData\" line of \(length) bytes, over the limit of \(PluginSupervisor.maximumLineLength) "
            + "for a line; it was skipped"
        #expect(
            supervisor.received(.tooLong(length: length, head: LineHead(Array(#"{"type":"newData","id":1,"#.utf8))), generation: 1, now: Self.t0)
                == [.log(.warning, "\(message) (load 1)"), .sealPushes(source: "a"), Self.failed("a", id: 1, message)])
        #expect(
            supervisor.received(.tooLong(length: length, head: LineHead(Array(#"{"type":"newData","source":"a","#.utf8))), generation: 1, now: Self.t0)
                == [
                    .log(.warning, "\(message) (a push of \"a\")"), .sealPushes(source: "a"),
                    .report(.pushedError(source: "a", error: SourceError(message: message, code: .pluginFailed))),
                ])
        let naming = supervisor.received(.tooLong(length: length, head: LineHead(Array(#"{"type":"newData","#.utf8))), generation: 1, now: Self.t0)
        #expect(naming.count == 1)
        guard case .log(.warning, let logged, _) = naming.first else {
            Issue.record("expected only a warning, got \(naming)")
            return
        }
        #expect(logged.hasSuffix("(3 skipped so far)"))
    }

    // MARK: Crashes, restarts, give-up

    @Test func anExitFailsTheLoadsTellsTheOtherSourcesAndRestartsAfterTheBackoff() {
        var supervisor = Self.ready()
        _ = supervisor.start(Self.request("b", id: 2), now: Self.t0)
        _ = supervisor.received(.message(.configured(source: "b")), generation: 1, now: Self.t0)
        _ = supervisor.received(.message(.notModified(id: 2)), generation: 1, now: Self.t0)
        let reason = "the test plugin was killed by signal 11"
        let error = SourceError(message: reason, code: .pluginFailed)
        #expect(
            supervisor.exited(generation: 1, exit: .killed(signal: 11), now: Self.t0) == [
                .sealEveryPush, Self.failed("a", id: 1, reason), .report(.pushedError(source: "b", error: error)),
                .settleEveryValidation(.pluginFailed(reason)), .settleReadiness(failure: reason),
                .log(.error, "\(reason); restarting it in \(Duration.milliseconds(250).humanReadable)"),
                .setTimer(.restart(generation: 1), deadline: Self.t0 + .milliseconds(250)),
            ])
        #expect(supervisor.phase == .waitingToRestart)
        // A load while it waits to restart waits with it.
        #expect(supervisor.start(Self.request("a", id: 3), now: Self.t0).isEmpty)
        let now = Self.t0 + .milliseconds(250)
        #expect(
            supervisor.timerFired(.restart(generation: 1), now: now) == [
                .countRestart, .startProcess(generation: 2), .send(.hello(protocol: pluginProtocolVersion)),
                .setTimer(.handshake(generation: 2), deadline: now + .seconds(5)),
            ])
        // The new process is configured from scratch.
        let actions = supervisor.received(Self.hello(), generation: 2, now: now)
        #expect(actions.contains(Self.configure("a")) && actions.contains(Self.configure("b")) && actions.contains(Self.load("a", id: 3)))
    }

    @Test func loadsThatWaitedForAPluginThatNeverStartedFailWithIt() {
        var supervisor = PluginSupervisor(kind: "test", now: Self.t0)
        _ = supervisor.start(Self.request("a", id: 1), now: Self.t0)
        let reason = "the test plugin could not be started (no such file)"
        let actions = supervisor.exited(generation: 1, exit: .couldNotStart("(no such file)"), now: Self.t0)
        #expect(actions.contains(Self.failed("a", id: 1, reason)))
        // It had a load waiting: it hears of the end by its load only.
        #expect(!actions.contains(.report(.pushedError(source: "a", error: SourceError(message: reason, code: .pluginFailed)))))
    }

    @Test func theBackoffDoublesAndFiveCrashesInAMinuteGiveUp() {
        var supervisor = Self.ready()
        var now = Self.t0
        for crash in 1...4 {
            let actions = supervisor.exited(generation: crash, exit: .exited(1), now: now)
            let delay = PluginSupervisor.restartDelay(afterCrashes: crash)
            #expect(delay == .milliseconds(250 << (crash - 1)))
            #expect(actions.last == .setTimer(.restart(generation: crash), deadline: now + delay))
            now = now + delay
            _ = supervisor.timerFired(.restart(generation: crash), now: now)
            _ = supervisor.received(Self.hello(), generation: crash + 1, now: now)
            _ = supervisor.start(Self.request("a", id: crash + 1), now: now)
        }
        let reason = "the test plugin exited with status 1"
        let gaveUp = "\(reason); gave up after 5 failures within \(PluginSupervisor.crashWindow.humanReadable)"
        let actions = supervisor.exited(generation: 5, exit: .exited(1), now: now)
        #expect(actions.contains(Self.failed("a", id: 5, reason)))
        #expect(actions.last == .log(.error, gaveUp))
        #expect(supervisor.phase == .gaveUp(gaveUp))
        // No restart, and every load fails at once.
        #expect(supervisor.start(Self.request("a", id: 6), now: now + .seconds(60)) == [Self.failed("a", id: 6, gaveUp, .pluginGaveUp)])
        #expect(supervisor.readiness(now: now) == .failed(gaveUp))
    }

    @Test func crashesFartherApartThanTheWindowAreForgiven() {
        #expect(PluginSupervisor.restartDelay(afterCrashes: 8) == .seconds(32))
        #expect(PluginSupervisor.restartDelay(afterCrashes: 30) == .seconds(32))
        var supervisor = Self.ready()
        var now = Self.t0
        for crash in 1...6 {
            let actions = supervisor.exited(generation: crash, exit: .exited(1), now: now)
            #expect(actions.last == .setTimer(.restart(generation: crash), deadline: now + .milliseconds(250)))
            now = now + PluginSupervisor.crashWindow
            _ = supervisor.timerFired(.restart(generation: crash), now: now)
        }
        #expect(supervisor.phase == .starting)
    }

    // MARK: Configure deadlines and held-back sources

    @Test func theConfigureDeadlineCountsFromThePluginsLastAnswer() {
        var supervisor = Self.ready()
        #expect(
            supervisor.start(Self.request("b", id: 2), now: Self.t0) == [Self.configure("b"), Self.load("b", id: 2)])
        // One watch at a time: the one set for a's configure, due at 5 s, watches b's and c's too.
        #expect(supervisor.start(Self.request("c", id: 3), now: Self.t0) == [Self.configure("c"), Self.load("c", id: 3)])
        _ = supervisor.received(.message(.configured(source: "b")), generation: 1, now: Self.t0 + .seconds(4))
        // At 5 s, c has 5 s from the answer at 4 s: the watch is set again, for 9 s.
        #expect(
            supervisor.timerFired(.configure(generation: 1), now: Self.t0 + .seconds(5)) == [
                .setTimer(.configure(generation: 1), deadline: Self.t0 + .seconds(9))
            ])
        let reason = "did not answer `configure` for source \"c\" within 5s"
        #expect(
            supervisor.timerFired(.configure(generation: 1), now: Self.t0 + .seconds(9)) == [
                .log(.error, "the test plugin \(reason)"),
                .settleValidation(source: "c", .pluginFailed("the test plugin \(reason)")), .kill,
            ])
        // The plugin ended over c: validations still waiting are left for the restart to answer.
        let actions = supervisor.exited(generation: 1, exit: .killed(signal: 9), now: Self.t0 + .seconds(9))
        #expect(!actions.contains { if case .settleEveryValidation = $0 { true } else { false } })
        #expect(actions.contains(Self.failed("c", id: 3, "the test plugin \(reason)")))
        // Restarted without c; c's loads fail at once until its options change.
        _ = supervisor.timerFired(.restart(generation: 1), now: Self.t0 + .seconds(10))
        let hello = supervisor.received(Self.hello(), generation: 2, now: Self.t0 + .seconds(10))
        #expect(hello.contains(Self.configure("b")) && !hello.contains(Self.configure("c")))
        let error = SourceError(message: "the test plugin \(reason)", code: .pluginTimeout)
        #expect(
            supervisor.start(Self.request("c", id: 4), now: Self.t0 + .seconds(10)) == [
                .settleValidation(source: "c", .pluginFailed(error.message)),
                .report(.loadFinished(source: "c", loadID: 4, outcome: .error(error))),
            ])
        let changed = supervisor.start(Self.request("c", id: 5, options: ["key": "new"]), now: Self.t0 + .seconds(10))
        #expect(changed.first == Self.configure("c", ["key": "new"]))
    }

    @Test func aPluginThatAnsweredALaterConfigureIsNotKilledForAnEarlierOne() {
        var supervisor = Self.ready()
        _ = supervisor.start(Self.request("b", id: 2), now: Self.t0)
        _ = supervisor.start(Self.request("c", id: 3), now: Self.t0)
        _ = supervisor.received(.message(.configured(source: "c")), generation: 1, now: Self.t0)
        let reason = "the test plugin did not answer `configure` for source \"b\" within 5s"
        #expect(
            supervisor.timerFired(.configure(generation: 1), now: Self.t0 + .seconds(5)) == [
                .log(.error, reason), .settleValidation(source: "b", .pluginFailed(reason)),
            ])
        // A late answer takes b back.
        _ = supervisor.received(.message(.configured(source: "b")), generation: 1, now: Self.t0 + .seconds(6))
        #expect(supervisor.start(Self.request("b", id: 4), now: Self.t0 + .seconds(6)) == [Self.load("b", id: 4)])
    }

    @Test func optionsTooLongForALineAreHeldBackWithoutEndingThePlugin() {
        var supervisor = Self.ready()
        let options: JSONValue = ["text": .string(String(repeating: "x", count: PluginSupervisor.maximumLineToPlugin))]
        let length = EngineMessage.configure(source: "big", options: options).line.count - 1
        let message =
            "the options of source \"big\" are \(length) bytes once encoded, over the limit of "
            + "\(PluginSupervisor.maximumLineToPlugin) bytes for a line to a plugin"
        #expect(
            supervisor.start(Self.request("big", id: 2, options: options), now: Self.t0) == [
                .settleValidation(source: "big", .pluginFailed(message)), Self.failed("big", id: 2, message, .tooLarge),
            ])
    }

    // MARK: Validation, readiness, shutdown

    @Test func validationConfiguresAgainUnlessTheSameOptionsAreOnTheirWay() {
        var supervisor = Self.ready()
        // a was configured and answered: validating it sends its configure again, to hear the verdict.
        #expect(supervisor.validate("a", now: Self.t0) == [Self.configure("a")])
        // Now unanswered with these options: not sent twice.
        #expect(supervisor.validate("a", now: Self.t0).isEmpty)
    }

    @Test func readinessStartsAPluginNeverStartedAndWaitsForOneStarting() {
        var supervisor = PluginSupervisor(kind: "test", now: Self.t0)
        supervisor.want("a", options: ["key": "value"])
        #expect(
            supervisor.readiness(now: Self.t0) == .waiting([
                .startProcess(generation: 1), .send(.hello(protocol: pluginProtocolVersion)),
                .setTimer(.handshake(generation: 1), deadline: Self.t0 + .seconds(5)),
            ]))
        #expect(supervisor.readiness(now: Self.t0) == .waiting([]))
        let hello = supervisor.received(Self.hello(), generation: 1, now: Self.t0)
        #expect(hello.contains(Self.configure("a")) && hello.last == .settleReadiness(failure: nil))
        #expect(supervisor.readiness(now: Self.t0) == .ready)
    }

    @Test func shutdownReleasesEveryWaiterAndTheExitThatFollowsSaysNothing() {
        var supervisor = Self.ready()
        let reason = "hammock is shutting down"
        #expect(supervisor.shutdown() == [.settleReadiness(failure: reason), .settleEveryValidation(.pluginFailed(reason))])
        #expect(supervisor.exited(generation: 1, exit: .exited(0), now: Self.t0).isEmpty)
        #expect(supervisor.start(Self.request("a", id: 2), now: Self.t0).isEmpty)
        #expect(supervisor.readiness(now: Self.t0) == .failed(reason))
    }
}
