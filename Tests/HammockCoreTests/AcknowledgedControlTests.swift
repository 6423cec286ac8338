import HammockCore
import HammockJSON
import Testing

/// Issue 13: a control line with an `id` is answered: `ack` once carried out, after every line it caused, or
/// `error` with the same id.
@Suite struct AcknowledgedControl {
    func engine() -> EngineCore {
        var engine = EngineCore(
            configuration: Configuration(
                sources: [fakeSource("a"), fakeSource("b")], views: [ViewDefinition(id: "v", sources: ["a", "b"])]))
        _ = engine.start(now: at(0))
        return engine
    }

    @Test func theAckComesAfterEveryLineTheCommandCaused() {
        var engine = engine()
        _ = engine.loadFinished(source: "a", loadID: 1, outcome: .newData(1), now: at(1))
        #expect(
            engine.handle(.override(source: "a", content: 2), replyingTo: [.string("o")], now: at(2)).summaries
                == ["source a newData override", "ack \"o\""])
        _ = engine.loadFinished(source: "b", loadID: 2, outcome: .newData(1), now: at(3))
        #expect(
            engine.handle(.load(.view("v")), replyingTo: [.number(7)], now: at(4)).summaries
                == ["source a requested", "startLoad a #3", "source b requested", "startLoad b #4", "ack 7"])
        // Already loading: a follow-up is queued, and that is the op carried out.
        #expect(engine.handle(.load(.source("a")), replyingTo: [.number(8)], now: at(5)).summaries == ["ack 8"])
        #expect(
            engine.handle(.snapshot, replyingTo: [.string("s")], now: at(6)).summaries
                == ["source a requested", "source b requested", "view v data", "ack \"s\""])
    }

    @Test func everyIdOfCoalescedCommandsIsAnsweredInOrder() {
        var engine = engine()
        let ids: [ControlID] = [.number(1), .string("two"), .number(JSONNumber(text: "3.0")!)]
        #expect(
            engine.handle(.cancel(.source("a")), replyingTo: ids, now: at(1)).summaries
                == ["cancelLoad a #1", "source a requestCancelled", "ack 1", "ack \"two\"", "ack 3.0"])
        #expect(
            engine.handle(.wipe(.view("nope")), replyingTo: ids, now: at(2)).summaries
                == ids.map { "error \($0) unknown view \"nope\" (views: v)" })
    }

    @Test func aRefusedCommandChangesNothingAndAnswersItsId() {
        var engine = engine()
        let before = (engine.state(of: "a"), engine.nextDeadline)
        #expect(
            engine.handle(.load(.source("c")), replyingTo: [.string("x")], now: at(1)).summaries
                == [#"error "x" unknown source "c" (sources: a, b)"#])
        #expect(engine.state(of: "a") == before.0)
        #expect(engine.nextDeadline == before.1)
        // Without an id, as before: one error line, no id.
        #expect(engine.handle(.load(.source("c")), now: at(1)).summaries == [#"error unknown source "c" (sources: a, b)"#])
    }

    /// The runtime reads the file and asks the plugins, so it answers a reload once it is in force.
    @Test func aReloadIsAnsweredByTheRuntime() {
        var engine = engine()
        #expect(engine.handle(.reload, replyingTo: [.number(1), .number(2)], now: at(1)).summaries == ["reload [1, 2]"])
        #expect(engine.handle(.reload, now: at(1)).summaries == ["reload"])
    }

    @Test func idsAreEchoedExactlyAndNeverRedacted() {
        let redactor = Redactor(secrets: ["hunter2"])
        let ack = OutputLine.ack(id: .string("hunter2")).encoded(seq: 3, redactor: redactor)
        #expect(String(decoding: ack, as: UTF8.self) == #"{"type":"ack","seq":3,"id":"hunter2"}"# + "\n")
        let error = OutputLine.error(message: "no hunter2 here", id: .number(JSONNumber(text: "1e400")!))
            .encoded(seq: 4, redactor: redactor)
        #expect(String(decoding: error, as: UTF8.self) == #"{"type":"error","seq":4,"message":"no [redacted] here","id":1e400}"# + "\n")
        #expect(OutputLine.ack(id: .number(1)).coalescingKey == nil)
    }
}
