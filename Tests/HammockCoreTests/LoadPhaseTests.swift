import HammockCore
import Testing

/// A source's load lifecycle, one transition at a time: at most one load in flight, a load asked for
/// meanwhile is one follow-up, a word about another load changes nothing, and `isLoading` is the phase's.
@Suite struct LoadPhases {
    /// A phase with load `id` in flight since `at(0)`, given up on at `at(12)`.
    func loading(_ id: LoadID = 1) -> LoadPhase {
        var phase = LoadPhase.idle
        phase.send(id, giveUpAt: at(12))
        return phase
    }

    @Test func sendingMakesTheSourceLoadingUntilTheLoadEnds() {
        var phase = LoadPhase.idle
        #expect(!phase.isLoading)
        phase.send(1, giveUpAt: at(12))
        #expect(phase == .loading(LoadInFlight(id: 1, giveUpAt: at(12), stage: .sent)))
        #expect(phase.isLoading)
        let ended = phase.finish(1)
        #expect(ended == LoadInFlight(id: 1, giveUpAt: at(12), stage: .sent))
        #expect(phase == .idle)
        #expect(!phase.isLoading)
    }

    @Test func aSourceWaitingForInputsOrRulesIsNotLoadingAndCanSend() {
        var phase = LoadPhase.idle
        phase.waitForInputs()
        #expect(phase.isWaitingForInputs && !phase.isLoading)
        let startsNow = phase.askForLoad()
        #expect(startsNow, "nothing in flight: the load asked for starts now")
        phase.send(1, giveUpAt: at(12))
        #expect(!phase.isWaitingForInputs, "a load sent ends the wait")
        _ = phase.finish(1)
        phase.waitForTemplateRules()
        #expect(phase.isWaitingForTemplateRules && !phase.isLoading)
        phase.send(2, giveUpAt: at(20))
        #expect(phase.inFlight?.id == 2)
    }

    @Test func loadsAskedForWhileOneIsInFlightAreOneFollowUp() {
        var phase = loading()
        let first = phase.askForLoad()
        let second = phase.askForLoad()
        #expect(!first && !second, "neither starts beside the load in flight")
        #expect(phase.inFlight?.followUp == true)
        let ended = phase.finish(1)
        #expect(ended?.followUp == true, "the core starts the one follow-up when the load ends")
        #expect(phase == .idle)
    }

    @Test func anAnswerToAnotherLoadChangesNothing() {
        var phase = loading(2)
        let ended = phase.finish(1)
        #expect(ended == nil, "load 1 was cancelled or timed out: its answer is not wanted")
        #expect(phase == loading(2))
        var idle = LoadPhase.idle
        let endedWhileIdle = idle.finish(1)
        #expect(endedWhileIdle == nil)
        #expect(idle == .idle)
    }

    @Test func queuedOnlyForTheLoadJustSent() {
        var phase = loading()
        let another = phase.queued(2, giveUpAt: at(70))
        #expect(!another, "another load")
        let queued = phase.queued(1, giveUpAt: at(70))
        #expect(queued)
        #expect(phase == .loading(LoadInFlight(id: 1, giveUpAt: at(70), stage: .queued)))
        let twice = phase.queued(1, giveUpAt: at(80))
        #expect(!twice, "queued twice")
        #expect(phase.inFlight?.giveUpAt == at(70))
        let started = phase.started(1, giveUpAt: at(52))
        #expect(started)
        let queuedAfterStart = phase.queued(1, giveUpAt: at(90))
        #expect(!queuedAfterStart, "a started load is not queued again")
        #expect(phase == .loading(LoadInFlight(id: 1, giveUpAt: at(52), stage: .started)))
    }

    @Test func startedCountsOnceFromTheStart() {
        var phase = loading()
        let another = phase.started(2, giveUpAt: at(13))
        #expect(!another, "another load")
        let started = phase.started(1, giveUpAt: at(13))
        #expect(started, "started without queued: from the start")
        let twice = phase.started(1, giveUpAt: at(20))
        #expect(!twice, "started twice: the first one counts")
        #expect(phase.inFlight == LoadInFlight(id: 1, giveUpAt: at(13), stage: .started))
    }

    @Test func aLoadExpiresAtItsDeadlineNotBefore() {
        var phase = loading()
        _ = phase.askForLoad()
        let early = phase.expire(at: at(ms: 11_999))
        #expect(early == nil)
        #expect(phase.isLoading)
        let expired = phase.expire(at: at(12))
        #expect(expired == LoadInFlight(id: 1, giveUpAt: at(12), stage: .sent, followUp: true))
        #expect(phase == .idle)
        let again = phase.expire(at: at(30))
        #expect(again == nil, "nothing left to expire")
    }

    @Test func aQueuedLoadThatExpiresSaysItNeverStarted() {
        var phase = loading()
        _ = phase.queued(1, giveUpAt: at(70))
        let expired = phase.expire(at: at(70))
        #expect(expired?.stage == .queued)
    }

    @Test func cancelEndsTheLoadAndItsFollowUp() {
        var phase = loading()
        _ = phase.askForLoad()
        let cancelled = phase.cancel()
        #expect(cancelled == LoadInFlight(id: 1, giveUpAt: at(12), stage: .sent, followUp: true))
        #expect(phase == .idle)
        let again = phase.cancel()
        #expect(again == nil, "nothing in flight: nothing to cancel")
        var waiting = LoadPhase.waitingForInputs
        let cancelledWhileWaiting = waiting.cancel()
        #expect(cancelledWhileWaiting == nil)
        #expect(waiting == .waitingForInputs, "a cancel does not end a wait for inputs")
    }

    @Test func templateRulesEndOnlyTheWaitForThem() {
        var phase = LoadPhase.waitingForTemplateRules
        let arrived = phase.templateRulesArrived()
        #expect(arrived)
        #expect(phase == .idle)
        var waiting = LoadPhase.waitingForInputs
        let arrivedWhileWaiting = waiting.templateRulesArrived()
        #expect(!arrivedWhileWaiting)
        #expect(waiting == .waitingForInputs)
        var inFlight = loading()
        let arrivedWhileLoading = inFlight.templateRulesArrived()
        #expect(!arrivedWhileLoading)
        #expect(inFlight == loading())
    }
}

/// `isLoading` on a source's lines is its phase's: true from `requested` until the load ends, whichever way.
@Suite struct LoadingIsDerived {
    @Test func loadingFollowsTheLoadInFlight() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a", timeout: .seconds(5))]))
        engine.loadTimeoutGrace = .seconds(1)
        _ = engine.start(now: at(0))
        #expect(engine.state(of: "a")?.isLoading == true)
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(engine.state(of: "a")?.isLoading == false)
        _ = engine.handle(.load(.source("a")), now: at(2))
        #expect(engine.state(of: "a")?.isLoading == true)
        _ = engine.handle(.cancel(.source("a")), now: at(3))
        #expect(engine.state(of: "a")?.isLoading == false)
        _ = engine.handle(.load(.source("a")), now: at(4))
        let timedOut = engine.tick(now: at(10))
        #expect(engine.state(of: "a")?.isLoading == false)
        #expect(timedOut.lines.first?.text.contains(#""isLoading":false"#) == true)
    }

    @Test func aPushDuringALoadKeepsItLoading() {
        var engine = EngineCore(configuration: Configuration(sources: [fakeSource("a")]))
        _ = engine.start(now: at(0))
        let pushed = engine.pushed(source: "a", content: 7, now: at(1))
        #expect(pushed.lines.first?.text.contains(#""isLoading":true"#) == true)
        #expect(engine.state(of: "a")?.isLoading == true)
    }
}
