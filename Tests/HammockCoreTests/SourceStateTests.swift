import HammockCore
import HammockJSON
import Testing

/// SPEC §1, Siesta's event table, one row at a time.
@Suite struct EventTable {
    let failure = SourceError(message: "boom", httpStatus: 500)

    @Test func requestedOnlySetsLoading() {
        var state = SourceState(content: "old", latestError: failure, timestamp: t0, failures: 2)
        state.apply(.requested, at: at(5), otherLoadsInFlight: false)
        #expect(state == SourceState(content: "old", latestError: failure, isLoading: true, timestamp: t0, failures: 2))
    }

    @Test func requestCancelledClearsLoadingUnlessAnotherLoadIsInFlight() {
        var state = SourceState(content: "old", isLoading: true, timestamp: t0)
        state.apply(.requestCancelled, at: at(5), otherLoadsInFlight: true)
        #expect(state == SourceState(content: "old", isLoading: true, timestamp: t0))
        state.apply(.requestCancelled, at: at(6), otherLoadsInFlight: false)
        #expect(state == SourceState(content: "old", isLoading: false, timestamp: t0))
    }

    @Test func newDataReplacesContentClearsErrorAndStampsTime() {
        var state = SourceState(content: "old", latestError: failure, isLoading: true, timestamp: t0, failures: 3)
        state.apply(.newData(["n": 1], origin: .load), at: at(5), otherLoadsInFlight: false)
        #expect(state == SourceState(content: ["n": 1], isLoading: false, timestamp: at(5), failures: 0))
    }

    @Test func newDataKeepsLoadingWhileAnotherLoadIsInFlight() {
        var state = SourceState(isLoading: true)
        state.apply(.newData("x", origin: .load), at: at(1), otherLoadsInFlight: true)
        #expect(state == SourceState(content: "x", isLoading: true, timestamp: at(1)))
    }

    @Test func newDataWithJSONNullCountsAsContent() {
        var state = SourceState()
        state.apply(.newData(.null, origin: .push), at: at(1), otherLoadsInFlight: false)
        #expect(state.content == .null)
        #expect(state.hasContent)
    }

    /// The loader's word on its answer (`meta`): new data from a loader brings its own (or none), a
    /// not-modified answer updates what it names, an error keeps it, content nobody loaded has none.
    @Test func metaFollowsTheContentItDescribes() {
        var state = SourceState()
        state.apply(.newData("a", origin: .load), at: at(1), otherLoadsInFlight: false, meta: ["httpStatus": 200, "contentType": "text/plain"])
        #expect(state.meta == ["httpStatus": 200, "contentType": "text/plain"])
        state.apply(.notModified, at: at(2), otherLoadsInFlight: false, meta: ["httpStatus": 304])
        #expect(state.meta == ["httpStatus": 304, "contentType": "text/plain"])
        state.apply(.notModified, at: at(3), otherLoadsInFlight: false)
        #expect(state.meta == ["httpStatus": 304, "contentType": "text/plain"], "a not-modified answer that says nothing keeps it")
        state.apply(.error(failure), at: at(4), otherLoadsInFlight: false, meta: ["httpStatus": 500])
        #expect(state.meta == ["httpStatus": 304, "contentType": "text/plain"], "an error keeps the meta of the content it keeps")
        state.apply(.newData("b", origin: .push), at: at(5), otherLoadsInFlight: false)
        #expect(state.meta == nil, "new data the loader said nothing of: the old words were of the old content")
        for origin in [DataOrigin.override, .cache, .wipe] {
            state.apply(.newData("c", origin: .load), at: at(6), otherLoadsInFlight: false, meta: ["size": 1])
            state.apply(.newData("d", origin: origin), at: at(7), otherLoadsInFlight: false, meta: ["size": 2])
            #expect(state.meta == nil, "\(origin)")
        }
    }

    /// Review findings: a not-modified answer merges an object member by member, and a merge past the limit
    /// keeps the newest meta alone.
    @Test func aNotModifiedMergesObjectsAndStaysWithinTheLimit() {
        var state = SourceState()
        state.apply(.newData("a", origin: .load), at: at(1), otherLoadsInFlight: false, meta: ["headers": ["x-a": "1", "x-b": "2"]])
        state.apply(.notModified, at: at(2), otherLoadsInFlight: false, meta: ["headers": ["x-a": "3"]])
        #expect(state.meta == ["headers": ["x-a": "3", "x-b": "2"]])
        for round in 0..<100 {
            state.apply(.notModified, at: at(3), otherLoadsInFlight: false, meta: ["k\(round)": .string(String(repeating: "v", count: 1000))])
            #expect(JSONValue.object(state.meta ?? [:]).jsonBytes.count <= SourceState.maximumMetaLength)
        }
    }

    @Test func notModifiedKeepsContentClearsErrorAndStampsTime() {
        var state = SourceState(content: "old", latestError: failure, isLoading: true, timestamp: t0, failures: 1)
        state.apply(.notModified, at: at(7), otherLoadsInFlight: false)
        #expect(state == SourceState(content: "old", isLoading: false, timestamp: at(7), failures: 0))
        state.isLoading = true
        state.apply(.notModified, at: at(8), otherLoadsInFlight: true)
        #expect(state.isLoading)
    }

    @Test func errorKeepsStaleContentAndCountsFailures() {
        var state = SourceState(content: "stale", isLoading: true, timestamp: t0)
        state.apply(.error(failure), at: at(3), otherLoadsInFlight: false)
        #expect(state == SourceState(content: "stale", latestError: failure, isLoading: false, timestamp: at(3), failures: 1))
        let second = SourceError(message: "again", exitStatus: 2)
        state.apply(.error(second), at: at(4), otherLoadsInFlight: true)
        #expect(state == SourceState(content: "stale", latestError: second, isLoading: true, timestamp: at(4), failures: 2))
        state.apply(.newData("fresh", origin: .load), at: at(5), otherLoadsInFlight: false)
        #expect(state.failures == 0)
        #expect(state.latestError == nil)
    }

    @Test func notModifiedResetsFailures() {
        var state = SourceState(content: "c")
        state.apply(.error(failure), at: at(1), otherLoadsInFlight: false)
        state.apply(.error(failure), at: at(2), otherLoadsInFlight: false)
        #expect(state.failures == 2)
        state.apply(.notModified, at: at(3), otherLoadsInFlight: false)
        #expect(state.failures == 0)
    }

    @Test func wipeForgetsEverything() {
        var state = SourceState(content: "c", latestError: failure, isLoading: false, timestamp: t0, failures: 4)
        state.apply(.newData(.null, origin: .wipe), at: at(9), otherLoadsInFlight: false)
        #expect(state == SourceState())
        #expect(!state.hasContent)
        var loading = SourceState(content: "c", isLoading: true, timestamp: t0)
        loading.apply(.newData(.null, origin: .wipe), at: at(9), otherLoadsInFlight: true)
        #expect(loading == SourceState(isLoading: true))
    }

    @Test func everyOriginStandsOnNewData() {
        for origin in DataOrigin.allCases {
            let event = SourceEvent.newData(1, origin: origin)
            #expect(event.origin == origin)
            #expect(event.name == "newData")
        }
        #expect(SourceEvent.requested.origin == nil)
        #expect(SourceEvent.error(failure).origin == nil)
        #expect(
            [SourceEvent.requested, .requestCancelled, .notModified, .error(failure)].map(\.name)
                == ["requested", "requestCancelled", "notModified", "error"])
    }

    @Test func errorJSONCarriesOnlyWhatIsSetAndNeverRetryAfter() {
        let full = SourceError(message: "m", httpStatus: 503, exitStatus: 2, code: SourceError.Code("c"), retryAfter: .seconds(5))
        #expect(full.json.jsonString == #"{"message":"m","httpStatus":503,"exitStatus":2,"code":"c"}"#)
        #expect(SourceError(message: "only").json.jsonString == #"{"message":"only"}"#)
    }
}

@Suite struct Freshness {
    @Test func upToDateWithinExpirationWhenThereIsNoError() {
        let state = SourceState(content: 1, timestamp: t0)
        #expect(isUpToDate(state, invalidated: false, expiration: .seconds(30), retryDelay: .seconds(1), age: .seconds(30)))
        #expect(!isUpToDate(state, invalidated: false, expiration: .seconds(30), retryDelay: .seconds(1), age: .milliseconds(30_001)))
    }

    @Test func errorUsesTheRetryDelay() {
        let state = SourceState(content: 1, latestError: SourceError(message: "x"), timestamp: t0, failures: 1)
        #expect(isUpToDate(state, invalidated: false, expiration: .seconds(30), retryDelay: .seconds(2), age: .seconds(2)))
        #expect(!isUpToDate(state, invalidated: false, expiration: .seconds(30), retryDelay: .seconds(2), age: .milliseconds(2001)))
    }

    @Test func invalidatedOrNeverLoadedIsNotUpToDate() {
        let state = SourceState(content: 1, timestamp: t0)
        #expect(!isUpToDate(state, invalidated: true, expiration: .seconds(30), retryDelay: .seconds(1), age: .zero))
        #expect(!isUpToDate(SourceState(), invalidated: false, expiration: .seconds(30), retryDelay: .seconds(1), age: nil))
    }

    @Test func backoffDoublesUpToTheMaximum() {
        let policy = RetryPolicy.standard
        let delays = (1...9).map { policy.delay(afterFailures: $0, retryAfter: nil, unitRandom: 0) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { Duration.seconds($0) })
        #expect(policy.delay(afterFailures: 0, retryAfter: nil, unitRandom: 0) == .seconds(1))
        #expect(policy.delay(afterFailures: 10_000, retryAfter: nil, unitRandom: 0) == .seconds(60))
        let custom = RetryPolicy(initialDelay: .seconds(2), maximumDelay: .seconds(30))
        #expect((1...5).map { custom.delay(afterFailures: $0, retryAfter: nil, unitRandom: 0) }
            == [2, 4, 8, 16, 30].map { Duration.seconds($0) })
    }

    @Test func jitterTakesUpToAQuarterOff() {
        let policy = RetryPolicy.standard
        #expect(policy.delay(afterFailures: 1, retryAfter: nil, unitRandom: 0) == .milliseconds(1000))
        #expect(policy.delay(afterFailures: 1, retryAfter: nil, unitRandom: 0.5) == .milliseconds(875))
        #expect(policy.delay(afterFailures: 1, retryAfter: nil, unitRandom: 0.999_999) == .milliseconds(750))
        #expect(policy.delay(afterFailures: 3, retryAfter: nil, unitRandom: 0.999_999) == .milliseconds(3000))
        #expect(policy.delay(afterFailures: 8, retryAfter: nil, unitRandom: 0.999_999) == .milliseconds(45_000))
    }

    @Test func retryAfterIsAFloorUnderTheBackoff() {
        let policy = RetryPolicy.standard
        #expect(policy.delay(afterFailures: 5, retryAfter: .seconds(120), unitRandom: 0.7) == .seconds(120))
        // A shorter (or zero, or negative) Retry-After never turns the backoff off.
        #expect(policy.delay(afterFailures: 1, retryAfter: .milliseconds(300), unitRandom: 0) == .seconds(1))
        #expect(policy.delay(afterFailures: 3, retryAfter: .zero, unitRandom: 0) == .seconds(4))
        #expect(policy.delay(afterFailures: 1, retryAfter: .seconds(-5), unitRandom: 0) == .seconds(1))
        // A huge one is a day: no overflow, no crash.
        #expect(policy.delay(afterFailures: 1, retryAfter: .seconds(Int64.max / 2), unitRandom: 0) == .seconds(86_400))
    }

    @Test func whichFailuresARetryCanCure() {
        let transient: [SourceError] = [
            SourceError(message: "x", code: SourceError.Code("connectionRefused")), SourceError(message: "x", code: .timeout),
            SourceError(message: "x", httpStatus: 500), SourceError(message: "x", httpStatus: 503),
            SourceError(message: "x", httpStatus: 408), SourceError(message: "x", httpStatus: 425),
            SourceError(message: "x", httpStatus: 429), SourceError(message: "x", exitStatus: 1),
            SourceError(message: "x", code: .pluginFailed), SourceError(message: "plain"),
            SourceError(message: "x", code: .parseFailed, transient: true),
        ]
        let permanent: [SourceError] = [
            SourceError(message: "x", httpStatus: 404), SourceError(message: "x", httpStatus: 400),
            SourceError(message: "x", httpStatus: 401), SourceError(message: "x", httpStatus: 499),
            SourceError(message: "x", code: .parseFailed), SourceError(message: "x", code: .selectMissing),
            SourceError(message: "x", code: .templateUnresolved), SourceError(message: "x", code: .fileMissing),
            SourceError(message: "x", exitStatus: 1, transient: false),
        ]
        for error in transient { #expect(error.isTransient, "\(error)") }
        for error in permanent { #expect(!error.isTransient, "\(error)") }
        #expect(RetryPolicy(retriesEveryError: true).retries(permanent[0]))
        #expect(!RetryPolicy.standard.retries(permanent[0]))
        #expect(!RetryPolicy.off.retries(transient[0]))
    }

    @Test func maximumNeverBelowInitial() {
        let policy = RetryPolicy(initialDelay: .seconds(10), maximumDelay: .seconds(5))
        #expect(policy.maximumDelay == .seconds(10))
        #expect(!RetryPolicy.off.isAutomatic)
        #expect(RetryPolicy.standard.isAutomatic)
    }

    @Test func splitMixIsReproducible() {
        var a = SplitMix64(seed: 42)
        var b = SplitMix64(seed: 42)
        var c = SplitMix64(seed: 43)
        let first = (0..<4).map { _ in a.next() }
        #expect(first == (0..<4).map { _ in b.next() })
        #expect(first != (0..<4).map { _ in c.next() })
    }
}
