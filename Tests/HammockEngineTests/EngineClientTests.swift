import Foundation
import Synchronization
import HammockCore
import HammockJSON
import Testing

@testable import HammockEngine

/// Many consumers of one engine (issue 27), in memory: an engine with no stdout (`serving`, as `hammock
/// serve`) and clients that join it as its socket's listener hands them over (`EmbeddedEngine.connect`). The
/// socket itself is `hammock serve`'s tests'; these hold the rules of who reads what.
@Suite("Clients of one engine, in memory")
struct EngineClientTests {
    static let config = """
        version: 1
        sources:
          a: { kind: fake, content: { v: 1 } }
          b: { kind: fake, content: two }
        views:
          both: { sources: [a, b] }
          justB: { sources: [b] }
        """

    /// Runs `body` against a serving engine whose sources have loaded once (a first client saw it).
    private func withServingEngine(_ body: (EmbeddedEngine) async throws -> Void) async throws {
        try await EmbeddedEngine.run(Self.config, serving: true) { hammock in
            let first = hammock.connect()
            try await first.waitUntil("a and b have data") { lines in
                lines.contains { $0.id == "a" && $0.event == "newData" } && lines.contains { $0.id == "b" && $0.event == "newData" }
            }
            first.disconnect()
            try await body(hammock)
        }
    }

    @Test("a client reads hello (with the configuration's path), then a snapshot of everything, then live lines")
    func helloSnapshotThenLive() async throws {
        try await withServingEngine { hammock in
            let client = hammock.connect(subscriptionID: .string("sub"))
            let ack = try await client.waitFor(type: "ack")
            #expect(ack["id"] == "sub")
            let lines = client.lines
            #expect(lines.first?.type == "hello")
            #expect(lines.first?["configuration"]?.stringValue == hammock.configPath)
            #expect(lines.first?["sources"] == ["a", "b"])
            // The snapshot: each source and view once, with its current state, before the ack.
            let snapshot = lines.dropFirst().dropLast()
            #expect(snapshot.map { $0.id ?? "" } == ["a", "b", "both", "justB"])
            #expect(snapshot.first?.content == ["v": 1])
            // Live lines come after it, numbered on.
            client.send(controlLine: #"{"op":"load","source":"b","id":2}"#)
            try await client.waitFor(type: "source", id: "b") { $0.event == "newData" }
            let seqs = client.lines.compactMap(\.seq)
            #expect(seqs == Array(1...seqs.count), "one numbering per client, from 1, with no gap")
        }
    }

    @Test("the snapshot and the live stream meet with no gap and no duplicate, however busy the engine")
    func noGapNoDuplicate() async throws {
        try await withServingEngine { hammock in
            // Loads of `a` keep coming while clients join: each client's first line of `a` after the snapshot
            // is a newer event than the snapshot's, never the same one again, and none is missing (the
            // snapshot's `requested` is followed by that load's answer).
            let watcher = hammock.connect(Subscription(sources: ["a"], views: []))
            var clients: [EmbeddedClient] = []
            for round in 0..<20 {
                hammock.advance(by: .seconds(1))  // each answer has a timestamp of its own
                watcher.send(controlLine: #"{"op":"load","source":"a","id":\#(round)}"#)
                clients.append(hammock.connect(Subscription(sources: ["a"], views: [])))
            }
            try await watcher.waitFor(type: "ack") { $0["id"] == 19 }
            for client in clients {
                try await client.waitUntil("the client saw a's newest load end") { lines in
                    lines.last(where: { $0.id == "a" })?.event == "newData"
                        && lines.last(where: { $0.id == "a" })?.state?["isLoading"] == false
                }
                let states = client.lines.filter { $0.id == "a" }
                // No line repeats the one before it: a duplicate would be the same event with the same state.
                for (earlier, later) in zip(states, states.dropFirst()) {
                    #expect(earlier.text.replacing(/"seq":\d+,/, with: "") != later.text.replacing(/"seq":\d+,/, with: ""))
                }
                // A client that joined while a load was in flight reads its answer (no gap).
                if states.first?.state?["isLoading"] == true {
                    #expect(states.dropFirst().contains { $0.event == "newData" })
                }
            }
        }
    }

    @Test("a client subscribed to sources and views reads only those, and its hello lists only those")
    func subscriptionFilters() async throws {
        try await withServingEngine { hammock in
            let sourceOnly = hammock.connect(Subscription(sources: ["a"], views: []), subscriptionID: .number(1))
            let viewOnly = hammock.connect(Subscription(sources: [], views: ["justB"]), subscriptionID: .number(1))
            for client in [sourceOnly, viewOnly] { try await client.waitFor(type: "ack") }
            #expect(sourceOnly.lines.first?["sources"] == ["a"])
            #expect(sourceOnly.lines.first?["views"] == [])
            #expect(viewOnly.lines.first?["sources"] == [])
            #expect(viewOnly.lines.first?["views"] == ["justB"])
            sourceOnly.send(controlLine: #"{"op":"load","source":"b","id":"lb"}"#)
            sourceOnly.send(controlLine: #"{"op":"load","source":"a","id":"la"}"#)
            try await sourceOnly.waitFor(type: "ack") { $0["id"] == "la" }  // a load is acknowledged once it ends
            viewOnly.send(controlLine: #"{"op":"snapshot","id":"vs"}"#)
            try await viewOnly.waitFor(type: "ack") { $0["id"] == "vs" }
            let sourceIDs = Set(sourceOnly.lines.filter { $0.type == "source" || $0.type == "view" }.compactMap(\.id))
            #expect(sourceIDs == ["a"], "b's load and the views' lines went to others")
            let viewIDs = Set(viewOnly.lines.filter { $0.type == "source" || $0.type == "view" }.compactMap(\.id))
            #expect(viewIDs == ["justB"])
        }
    }

    @Test("an op's answer goes to its sender alone, even when two clients use the same id; its states go to all")
    func answersToTheSenderAlone() async throws {
        try await withServingEngine { hammock in
            let one = hammock.connect()
            let two = hammock.connect()
            for client in [one, two] { try await client.waitFor(type: "view", id: "justB") }
            one.send(controlLine: #"{"op":"wipe","source":"a","id":7}"#)
            try await one.waitFor(type: "ack") { $0["id"] == 7 }
            two.send(controlLine: #"{"op":"load","source":"nosuch","id":7}"#)
            let refused = try await two.waitFor(type: "error")
            #expect(refused["id"] == 7)
            // The wipe's state reached both; each client has exactly its own answer.
            try await two.waitUntil("two read the wipe one asked for") { lines in
                lines.contains { $0.id == "a" && $0.event == "newData" && $0.origin == "wipe" }
            }
            two.send(controlLine: #"{"op":"snapshot","id":8}"#)
            try await two.waitFor(type: "ack") { $0["id"] == 8 }
            one.send(controlLine: #"{"op":"snapshot","id":9}"#)
            try await one.waitFor(type: "ack") { $0["id"] == 9 }
            #expect(one.lines.filter { $0.type == "ack" }.map { $0["id"] } == [7, 9])
            #expect(one.lines.filter { $0.type == "error" }.isEmpty)
            #expect(two.lines.filter { $0.type == "ack" }.map { $0["id"] } == [8])
            #expect(two.lines.filter { $0.type == "error" }.map { $0["id"] } == [7])
            // A snapshot is its asker's: each read justB in its join snapshot and in its own snapshot, not the other's.
            #expect(Self.count(of: "justB", in: one.lines) == 2)
            #expect(Self.count(of: "justB", in: two.lines) == 2)
        }
    }

    static func count(of id: String, in lines: [WrittenLine]) -> Int {
        var count = 0
        for line in lines where line.id == id { count += 1 }
        return count
    }

    @Test("a malformed line without an id gets its sender an error, and no other client hears of it")
    func malformedLineStaysWithItsSender() async throws {
        try await withServingEngine { hammock in
            let sender = hammock.connect()
            let bystander = hammock.connect()
            for client in [sender, bystander] { try await client.waitFor(type: "view", id: "justB") }
            sender.send(controlLine: "{not json")
            try await sender.waitFor(type: "error") { $0["id"] == nil }
            bystander.send(controlLine: #"{"op":"snapshot","id":1}"#)
            try await bystander.waitFor(type: "ack")
            #expect(bystander.lines.allSatisfy { $0.type != "error" })
        }
    }

    @Test("a subscription naming what the configuration lacks is refused with the client's id, and the client closed")
    func unknownSubscriptionIsRefused() async throws {
        try await withServingEngine { hammock in
            let client = hammock.connect(Subscription(sources: ["a", "zz"], views: ["nope"]), subscriptionID: .string("s"))
            let error = try await client.waitFor(type: "error")
            #expect(error["id"] == "s")
            let message = error["message"]?.stringValue ?? ""
            #expect(message.contains(#"no source "zz""#) && message.contains(#"no view "nope""#), "\(message)")
            try await client.waitUntilClosed()
            #expect(!client.lines.contains { $0.type == "hello" })
        }
    }

    @Test("a client that leaves reads nothing more; the others go on; a stop says bye to every client")
    func leaveAndBye() async throws {
        var staying: EmbeddedClient?
        try await withServingEngine { hammock in
            let leaving = hammock.connect()
            let stays = hammock.connect()
            staying = stays
            for client in [leaving, stays] { try await client.waitFor(type: "view", id: "justB") }
            leaving.disconnect()
            try await leaving.waitUntilClosed()
            stays.send(controlLine: #"{"op":"load","source":"a","id":1}"#)
            try await stays.waitFor(type: "ack")
        }
        let bye = try await staying!.waitFor(type: "bye")
        #expect(bye["reason"] == "signal")
    }

    @Test("--idle-exit: the engine stops once no client has been connected for that long, never while one is")
    func idleExit() async throws {
        let status = try await EmbeddedEngine.run(
            Self.config, options: RunOptions(idleExit: .milliseconds(300)), serving: true
        ) { hammock in
            let client = hammock.connect()
            try await client.waitFor(type: "view", id: "justB")
            try await Task.sleep(for: .milliseconds(900))
            #expect(hammock.isRunning, "a connected client keeps the engine")
            client.disconnect()
            try await client.waitUntilClosed()
            #expect(try await hammock.waitForExit(timeout: .seconds(5)) == 0)
            #expect(hammock.logText.contains("--idle-exit"))
        }
        #expect(status == 0)
    }
}

/// How many loads each source's plugin was asked for.
final class LoadCounts: Sendable {
    private let counts = Mutex<[String: Int]>([:])
    func count(_ source: String) -> Int { counts.withLock { $0[source, default: 0] } }
    func loaded(_ source: String) -> Int { counts.withLock { counts in
        counts[source, default: 0] += 1
        return counts[source]!
    } }
}

extension EngineClientTests {
    @Test("loading follows who watches: nothing loads before a client, a source loads when one subscribes, and stops polling when it leaves")
    func loadingFollowsWatchers() async throws {
        let loads = LoadCounts()
        let plugin = TestPlugin.answering { source, _ in .newData(.string("\(source) #\(loads.loaded(source))")) }
        let config = """
            version: 1
            sources:
              a: { kind: test, refresh: 1s }
              b: { kind: test, refresh: 1s }
              kept: { kind: test, refresh: 1s, keep: true }
            views:
              justB: { sources: [b] }
            """
        try await EmbeddedEngine.run(config, plugins: [plugin], serving: true) { hammock in
            for _ in 0..<5 { hammock.advance(by: .seconds(1)) }
            // A view's subscriber: b loads (the view's source), a does not; kept loads with nobody.
            let viewer = hammock.connect(Subscription(sources: [], views: ["justB"]), subscriptionID: .number(1))
            try await viewer.waitFor(type: "view", id: "justB") { $0.status == "data" }
            #expect(loads.count("a") == 0, "nobody watched a: it never loaded")
            #expect(loads.count("b") == 1, "b loaded once, for the view's subscriber")
            #expect(loads.count("kept") >= 1, "keep: true loads with no watcher")
            // Its first watcher loads a.
            let watcher = hammock.connect(Subscription(sources: ["a"], views: []), subscriptionID: .number(2))
            try await watcher.next("a") { $0.event == "newData" }
            #expect(loads.count("a") == 1)
            // Once it leaves, a stops polling while b, still watched, polls on.
            watcher.disconnect()
            try await watcher.waitUntilClosed()
            let bBefore = loads.count("b")
            for poll in 1...3 {
                hammock.advance(by: .seconds(1))
                try await viewer.waitUntil("b polled") { _ in loads.count("b") >= bBefore + poll }
            }
            _ = try await hammock.linesUntilQuiet()
            #expect(loads.count("a") == 1, "no poll of a while nobody watched it")
        }
    }
}

extension EngineClientTests {
    @Test("fifty clients each read every change one of them causes, and a bar client reads its bar's text")
    func fanOutAndBarClients() async throws {
        let config = """
            version: 1
            sources:
              a: { kind: fake, content: { v: 1 } }
            views:
              page:
                sources: [a]
                render: { text: "v={{ a.v }}" }
            """
        try await EmbeddedEngine.run(config, serving: true) { hammock in
            let clients = (0..<50).map { _ in hammock.connect() }
            let bar = hammock.connect(Subscription(sources: [], views: ["page"]), format: .text, views: ["page"])
            for client in clients { try await client.waitFor(type: "view", id: "page") { $0.status == "data" } }
            try await bar.waitUntil("the bar shows a's first content") { $0.contains { $0.text == "v=1" } }
            clients[7].send(controlLine: #"{"op":"override","source":"a","content":{"v":2},"id":"o"}"#)
            for client in clients {
                try await client.waitFor(type: "source", id: "a") { $0.content == ["v": 2] }
            }
            try await bar.waitUntil("the bar shows the override") { $0.contains { $0.text == "v=2" } }
            // An empty text first when it joined while a loaded (a bar shows nothing over nothing).
            #expect(bar.lines.map(\.text).drop { $0.isEmpty } == ["v=1", "v=2"], "a bar line per change of its text, and nothing else")
            #expect(clients.enumerated().allSatisfy { index, client in
                client.lines.contains { $0.type == "ack" } == (index == 7)
            }, "the ack went to its sender alone")
        }
    }
}
