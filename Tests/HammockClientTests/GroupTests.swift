import Foundation
import HammockClient
import HammockCore
import HammockJSON
import Testing

/// `LoadableGroup`: a client-side view over any `Loadable`s, in process.
@Suite struct Groups {
    /// The member states a view can see, each as the engine's `SourceState` and the client's `LoadableState`.
    static let cases: [(name: String, source: SourceState, client: LoadableState<JSONValue>)] = {
        let when = Date(timeIntervalSince1970: 1_795_341_600)
        let down = SourceError(message: "down", httpStatus: 503)
        let downClient = LoadError(message: "down", httpStatus: 503)
        return [
            ("idle", SourceState(), LoadableState()),
            ("loading", SourceState(isLoading: true), LoadableState(isLoading: true)),
            ("data", SourceState(content: "d"), LoadableState(content: "d", timestamp: when)),
            ("null data", SourceState(content: .null), LoadableState(content: .null, timestamp: when)),
            ("failed", SourceState(latestError: down, failures: 1),
             LoadableState(latestError: downClient, timestamp: when, failures: 1)),
            ("stale, failing, loading", SourceState(content: "old", latestError: down, isLoading: true, failures: 2),
             LoadableState(content: "old", latestError: downClient, isLoading: true, timestamp: when, failures: 2)),
        ]
    }()

    static let ruleSets: [[DisplayRule]?] =
        [nil, []] + DisplayRule.presets.keys.sorted().map { DisplayRule.presets[$0] } + DisplayRule.allCases.map { [$0] }

    /// The group's rules are the engine's: for every combination of three members' states, every readiness
    /// and every rule list, the group and `ViewDefinition.evaluate` agree on status, content, errors and
    /// whether there is something to try again.
    @Test(arguments: Readiness.allCases)
    func agreesWithTheEnginesView(ready: Readiness) {
        let names = ["a", "b", "c"]
        var compared = 0
        for display in Self.ruleSets {
            let view = ViewDefinition(id: "v", sources: names.map { SourceID($0) }, ready: ready, display: display)
            for x in Self.cases { for y in Self.cases { for z in Self.cases {
                let members = [x, y, z]
                let engine = view.evaluate { id in members[names.firstIndex(of: id.rawValue)!].source }
                let group = LoadableGroup(ready: ready, display: display, members: [
                    "a": ManualLoadable(x.client), "b": ManualLoadable(y.client), "c": ManualLoadable(z.client),
                ])
                let label = "\(ready) \(display.map { "\($0)" } ?? "default") \(members.map(\.name))"
                let state = group.viewState
                #expect(state.status == engine.status, "\(label)")
                #expect(state.canTryAgain == engine.canTryAgain, "\(label)")
                #expect(state.errors.map(\.source) == engine.errors.map(\.source.rawValue), "\(label)")
                #expect(state.errors.map(\.error.message) == engine.errors.map(\.error.message), "\(label)")
                #expect(state.latestError?.message == engine.latestError?.message, "\(label)")
                if case .object(let merged) = engine.content {
                    #expect(state.content != nil, "\(label)")
                    for name in names {
                        #expect(state.content?[name, as: JSONValue.self] ?? .null == merged[name], "\(label) \(name)")
                    }
                } else {
                    #expect(engine.content == .null)
                    #expect(state.content == nil, "\(label)")
                }
                #expect(group.state.isLoading == (engine.status == .loading), "\(label)")
                // `data` always comes with content: a `case .data:` may use it without a check.
                #expect(state.status != .data || state.content != nil, "\(label): data without content")
                compared += 1
            } } }
        }
        #expect(compared == Self.ruleSets.count * Self.cases.count * Self.cases.count * Self.cases.count)
    }

    @Test func followsItsMembersAndMergesContentsOfAnyType() async throws {
        let count = ManualLoadable<Int>(LoadableState(isLoading: true))
        let name = ManualLoadable<String>()
        let group = LoadableGroup(ready: .all, members: ["count": count, "name": name])
        #expect(group.viewState.status == .loading)
        #expect(group.state.content == nil)

        count.set(LoadableState(content: 3, timestamp: Date(timeIntervalSince1970: 10)))
        name.set(LoadableState(content: "ada", timestamp: Date(timeIntervalSince1970: 20)))
        let ready = try await first("both contents", of: group.viewStates) { $0.status == .data }
        let content = try #require(ready.content)
        #expect(content.names == ["count", "name"])
        #expect(content["count", as: Int.self] == 3)
        #expect(content["name", as: String.self] == "ada")
        #expect(content["name", as: Int.self] == nil)
        #expect(content["missing"] == nil)
        #expect(group.state.timestamp == Date(timeIntervalSince1970: 20))
        #expect(group.state.failures == 0)
    }

    @Test func aGroupOfAnAsyncSequenceAndAManualMember() async throws {
        let (stream, feed) = AsyncStream.makeStream(of: Int.self)
        let failing = ManualLoadable<String>(LoadableState(latestError: LoadError(message: "nope"), failures: 3))
        let group = LoadableGroup(ready: .any, members: ["ticks": stream.loadable(), "other": failing])
        feed.yield(42)
        let state = try await first("ticks", of: group.states) { $0.content != nil }
        #expect(state.content?["ticks", as: Int.self] == 42)
        #expect(state.latestError?.message == "nope")
        #expect(state.failures == 1)  // failing members, not their failures
    }

    @Test func retryLoadsOnlyTheFailingMembers() async throws {
        let fine = ManualLoadable<Int>(LoadableState(content: 1))
        let broken = ManualLoadable<Int>(LoadableState(latestError: LoadError(message: "x"), failures: 1))
        let group = LoadableGroup(members: ["fine": fine, "broken": broken])
        #expect(group.viewState.canTryAgain)
        try await group.retry()
        #expect(await fine.calls.calls == [])
        #expect(await broken.calls.calls == ["load"])

        try await group.loadIfNeeded()
        try await group.cancel()
        #expect(await fine.calls.calls == ["loadIfNeeded", "cancel"])
        #expect(await broken.calls.calls == ["load", "loadIfNeeded", "cancel"])
    }

    /// A member that is a view retries its own failing part, not everything it holds.
    @Test func retryReachesIntoANestedView() async throws {
        let fine = ManualLoadable<Int>(LoadableState(content: 1))
        let broken = ManualLoadable<Int>(LoadableState(latestError: LoadError(message: "x"), failures: 1))
        let inner = LoadableGroup(ready: .any, members: ["fine": fine, "broken": broken])
        let outer = LoadableGroup(members: ["inner": inner, "other": ManualLoadable<Int>(LoadableState(content: 2))])
        #expect(outer.errors.map(\.source) == ["inner"])
        try await outer.retry()
        #expect(await fine.calls.calls == [])
        #expect(await broken.calls.calls == ["load"])
    }

    @Test func aMemberWhoseStreamEndsWithAnErrorFailsAndKeepsItsContent() async throws {
        struct EngineGone: Error, CustomStringConvertible { var description: String { "the engine exited" } }
        let member = ManualLoadable<Int>(LoadableState(content: 5, isLoading: true))
        let group = LoadableGroup(display: .overlay, members: ["m": member])
        #expect(group.viewState.status == .loading)
        member.finish(throwing: EngineGone())
        let state = try await first("the member's end", of: group.viewStates) { $0.status == .error }
        #expect(state.errors == [ViewError(source: "m", error: LoadError(message: "the engine exited"))])
        #expect(state.content?["m", as: Int.self] == 5)
    }

    @Test func groupsNest() async throws {
        let inner = LoadableGroup(members: ["x": ManualLoadable<Int>(LoadableState(content: 1))])
        let leaf = ManualLoadable<Int>(LoadableState(isLoading: true))
        let outer = LoadableGroup(ready: .all, members: ["inner": inner, "leaf": leaf])
        #expect(outer.viewState.status == .loading)
        leaf.set(LoadableState(content: 2))
        let state = try await first("both", of: outer.viewStates) { $0.status == .data }
        let innerContent = try #require(state.content?["inner", as: LoadableGroup.Content.self])
        #expect(innerContent["x", as: Int.self] == 1)
    }
}
