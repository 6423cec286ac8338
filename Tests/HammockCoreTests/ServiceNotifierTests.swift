import HammockCore
import HammockJSON
import Testing

/// When hammock tells systemd it is ready, reloading or stopping: decided from the lines the engine writes.
@Suite("Service notifications")
struct ServiceNotifierTests {
    static func state(_ content: JSONValue? = nil, error: String? = nil) -> SourceState {
        SourceState(
            content: content, latestError: error.map { SourceError(message: $0) }, timestamp: at(0),
            failures: error == nil ? 0 : 1)
    }

    @Test("READY=1 once every source has answered, by data or error; cache and requests are no answer")
    func readyAfterEveryFirstAnswer() {
        var notifier = ServiceNotifier(sources: [fakeSource("a"), fakeSource("b"), fakeSource("c")])
        #expect(notifier.observe(.hello(sources: ["a", "b", "c"], views: [], version: "1")) == nil)
        #expect(notifier.observe(.source(id: "a", event: .requested, state: SourceState(isLoading: true))) == nil)
        #expect(notifier.observe(.source(id: "a", event: .newData(1, origin: .cache), state: Self.state(1))) == nil)
        #expect(notifier.observe(.source(id: "a", event: .newData(2, origin: .load), state: Self.state(2))) == nil)
        #expect(notifier.observe(.source(id: "b", event: .error(SourceError(message: "x")), state: Self.state(error: "x"))) == nil)
        #expect(
            notifier.observe(.source(id: "c", event: .notModified, state: Self.state(3)))
                == "READY=1\nSTATUS=3 sources, 1 failing")
        // Ready once; afterwards only a changed status is said.
        #expect(notifier.observe(.source(id: "c", event: .newData(4, origin: .push), state: Self.state(4))) == nil)
        #expect(
            notifier.observe(.source(id: "b", event: .newData(5, origin: .load), state: Self.state(5)))
                == "STATUS=3 sources, 0 failing")
    }

    @Test("a reload says RELOADING=1 with the monotonic time, then READY=1 whether it took or was refused")
    func reloadAroundReady() {
        var notifier = ServiceNotifier(sources: [fakeSource("a")])
        #expect(notifier.observe(.source(id: "a", event: .newData(1, origin: .load), state: Self.state(1))) != nil)
        #expect(notifier.reloadStarted(monotonicMicroseconds: 123_456) == "RELOADING=1\nMONOTONIC_USEC=123456")
        #expect(notifier.reloadStarted(monotonicMicroseconds: 123_999) == nil, "one reload at a time")
        #expect(notifier.reloadEnded(sources: nil) == "READY=1\nSTATUS=1 source, 0 failing")
        #expect(notifier.reloadStarted(monotonicMicroseconds: 200_000) != nil)
        #expect(notifier.reloadEnded(sources: [fakeSource("a"), fakeSource("b")]) == "READY=1\nSTATUS=2 sources, 0 failing")
    }

    @Test("a reload before the first READY=1 ends in READY=1: systemd waits for it either way")
    func reloadDuringStartUp() {
        var notifier = ServiceNotifier(sources: [fakeSource("a")])
        #expect(notifier.reloadStarted(monotonicMicroseconds: 1) != nil)
        // An answer during the reload does not end it.
        #expect(notifier.observe(.source(id: "a", event: .newData(1, origin: .load), state: Self.state(1))) == nil)
        #expect(notifier.reloadEnded(sources: nil)?.hasPrefix("READY=1") == true)
    }

    @Test("--once is ready at its end if not before; STOPPING=1 is the last word")
    func onceAndStop() {
        var notifier = ServiceNotifier(sources: [fakeSource("a"), fakeSource("slow")])
        #expect(notifier.observe(.source(id: "a", event: .newData(1, origin: .load), state: Self.state(1))) == nil)
        #expect(notifier.finished() == "READY=1\nSTATUS=2 sources, 0 failing")
        #expect(notifier.finished() == nil)
        #expect(notifier.stopping() == "STOPPING=1")
        #expect(notifier.stopping() == nil)
        #expect(notifier.reloadStarted(monotonicMicroseconds: 1) == nil)
        #expect(notifier.observe(.source(id: "slow", event: .error(SourceError(message: "x")), state: Self.state(error: "x"))) == nil)
    }

    @Test("a source whose input answered without content never loads: it counts as answered; one with content waits")
    func blockedDependentCountsAsAnswered() throws {
        let template = try #require(try Template.parse("{{ input }}"))
        let dependent = fakeSource(
            "dependent", templates: [TemplatedOption(pointer: JSONPointer(tokens: ["content"]), template: template, percentEncode: false)])
        #expect(dependent.inputs == ["input"])
        var failing = ServiceNotifier(sources: [fakeSource("input"), dependent])
        #expect(failing.observe(.source(id: "input", event: .error(SourceError(message: "x")), state: Self.state(error: "x")))?.hasPrefix("READY=1") == true)

        var loading = ServiceNotifier(sources: [fakeSource("input"), dependent])
        #expect(loading.observe(.source(id: "input", event: .newData(1, origin: .load), state: Self.state(1))) == nil)
        #expect(loading.observe(.source(id: "dependent", event: .newData(1, origin: .load), state: Self.state(1)))?.hasPrefix("READY=1") == true)
    }

    @Test("without sources, hello makes it ready")
    func noSourcesIsReadyAtHello() {
        var notifier = ServiceNotifier(sources: [])
        #expect(notifier.observe(.hello(sources: [], views: [], version: "1")) == "READY=1\nSTATUS=0 sources, 0 failing")
    }
}
