import HammockCore
import HammockJSON

/// What the client knows of a running engine: the latest line of each source and view, the typed feeds
/// that decode them for the consumer, and the control lines waiting for their acknowledgement.
///
/// An actor, fed one line at a time, in the order the engine wrote them, by the task that reads its stdout.
/// Because a line is handled whole before the next, a control call that returns on its `ack` finds every
/// line the engine wrote before that ack already in its feeds (a `load`'s `requested` state, an `override`'s
/// content).
actor EngineLines {
    /// From `hello`, then each `reloaded`; `nil` before `hello`. Readable without waiting (`Hammock.ids`).
    nonisolated let ids = LatestValue<EngineIDs?>(nil)
    /// True once the engine's end has been handled: every feed and pending call ended.
    nonisolated let ended = LatestValue(false)

    private var sources: [String: SourceLine] = [:]
    private var views: [String: ViewLine] = [:]
    /// Per id, one feed per content type the consumer asked for.
    private var sourceFeeds: [String: [ObjectIdentifier: any SourceFeed]] = [:]
    private var viewFeeds: [String: [ObjectIdentifier: any ViewFeed]] = [:]

    var pending: [Int: CheckedContinuation<Void, any Error>] = [:]
    var nextControlID = 1
    let writer: ControlWriter
    /// Set once, when the engine ended: `nil` inside for a graceful `stop()`.
    private(set) var end: HammockError?? = nil
    var stopRequested = false
    /// The `bye` line's reason, once it came.
    private(set) var byeReason: String?

    init(writer: ControlWriter) {
        self.writer = writer
    }

    // MARK: Lines

    /// Handles one stdout line. A line of a type this version does not know is passed over (a newer engine's);
    /// anything else that is not a line of the protocol ends everything with `protocolViolation`: stdout
    /// carries nothing but these lines, so passing it over would hide a wrong binary or a broken engine, and
    /// could leave a control call waiting for an ack that was in it.
    func handle(_ bytes: [UInt8]) {
        let json: JSONValue
        do {
            json = try JSONValue(parsing: bytes)
        } catch {
            return finish(.protocolViolation("a line that is not JSON (\(error)): \(Self.quote(bytes))"))
        }
        if let line = EngineLine(json) {
            keepLine(line, json)
            return handle(line)
        }
        guard case .object(let object) = json else {
            return finish(.protocolViolation("a line that is not a JSON object: \(Self.quote(bytes))"))
        }
        guard let type = object["type"]?.stringValue else {
            return finish(.protocolViolation("a line without a \"type\": \(Self.quote(bytes))"))
        }
        guard EngineLine.knownTypes.contains(type) else { return }
        finish(.protocolViolation("a \"\(type)\" line without the fields it needs: \(Self.quote(bytes))"))
    }

    /// The start of a line, for an error message.
    static func quote(_ bytes: [UInt8]) -> String {
        let shown = String(decoding: bytes.prefix(200), as: UTF8.self)
        return bytes.count > 200 ? "\(shown)… (\(bytes.count) bytes)" : shown
    }

    func handle(_ line: EngineLine) {
        switch line {
        case .hello(let ids), .reloaded(let ids):
            self.ids.send(ids)
        case .source(let id, let state):
            guard sources[id] != state else { return }
            sources[id] = state
            for key in sourceFeeds[id, default: [:]].keys { sourceFeeds[id]?[key]?.receive(state) }
        case .view(let id, let state):
            guard views[id] != state else { return }
            views[id] = state
            for key in viewFeeds[id, default: [:]].keys { viewFeeds[id]?[key]?.receive(state) }
        case .removed(let id, let isView):
            if isView {
                views[id] = nil
                for key in viewFeeds[id, default: [:]].keys { viewFeeds[id]?[key]?.receive(.removed(id)) }
            } else {
                sources[id] = nil
                for key in sourceFeeds[id, default: [:]].keys { sourceFeeds[id]?[key]?.receive(.removed(id)) }
            }
        case .ack(let id):
            guard let number = id.numberValue?.intValue else { return }
            pending.removeValue(forKey: number)?.resume()
        case .error(let message, let id):
            // An error without an id answers a line this client did not send, or a reload by SIGHUP.
            guard let number = id?.numberValue?.intValue else { return }
            pending.removeValue(forKey: number)?.resume(throwing: HammockError.refused(message))
        case .bye(let reason):
            byeReason = reason
        }
    }

    // MARK: Whole lines

    /// Each source's and view's latest line as the engine wrote it (`Hammock.latestLine`), and who follows
    /// their changes (`Hammock.lineChanges`).
    private var latestLines: [LineSubject: JSONValue] = [:]
    private var lineFollowers: [Int: AsyncStream<LineSubject>.Continuation] = [:]
    private var nextFollower = 0

    private func keepLine(_ line: EngineLine, _ json: JSONValue) {
        let subject: LineSubject
        switch line {
        case .source(let id, _): subject = .source(id)
        case .view(let id, _): subject = .view(id)
        case .removed(let id, let isView): subject = isView ? .view(id) : .source(id)
        default: return
        }
        if case .removed = line { latestLines[subject] = nil } else { latestLines[subject] = json }
        for follower in lineFollowers.values { follower.yield(subject) }
    }

    func latestLine(_ subject: LineSubject) -> JSONValue? { latestLines[subject] }

    func followLines() -> AsyncStream<LineSubject> {
        let (stream, continuation) = AsyncStream.makeStream(of: LineSubject.self, bufferingPolicy: .bufferingNewest(4096))
        if end != nil {
            continuation.finish()
            return stream
        }
        nextFollower += 1
        let key = nextFollower
        lineFollowers[key] = continuation
        continuation.onTermination = { [weak self] _ in Task { await self?.unfollow(key) } }
        return stream
    }

    private func unfollow(_ key: Int) { lineFollowers[key] = nil }

    // MARK: Feeds

    /// The feed of `id`'s states decoded as `Content`: one per id and type, however often it is asked for.
    func sourceOutput<Content: Decodable & Sendable>(
        _ id: String, as type: Content.Type
    ) -> LatestValue<LoadableState<Content>> {
        let key = ObjectIdentifier(Content.self)
        if let feed = sourceFeeds[id]?[key] as? TypedSourceFeed<Content> { return feed.output }
        var feed = TypedSourceFeed<Content>()
        if let state = sources[id] { feed.receive(state) }
        if let end {
            feed.finish(throwing: end)
        } else {
            sourceFeeds[id, default: [:]][key] = feed
        }
        return feed.output
    }

    func viewOutputs<Content: Decodable & Sendable>(
        _ id: String, as type: Content.Type
    ) -> (view: LatestValue<ViewLoadableState<Content>>, loadable: LatestValue<LoadableState<Content>>) {
        let key = ObjectIdentifier(Content.self)
        if let feed = viewFeeds[id]?[key] as? TypedViewFeed<Content> { return (feed.viewOutput, feed.output) }
        var feed = TypedViewFeed<Content>()
        if let state = views[id] { feed.receive(state) }
        if let end {
            feed.finish(throwing: end)
        } else {
            viewFeeds[id, default: [:]][key] = feed
        }
        return (feed.viewOutput, feed.output)
    }

    // MARK: The end

    /// Ends every feed (normally for a graceful stop, else with `error`) and every pending control call, and
    /// closes the control pipe. Only the first call counts.
    func finish(_ error: HammockError?) {
        guard end == nil else { return }
        end = .some(error)
        for feeds in sourceFeeds.values { for feed in feeds.values { feed.finish(throwing: error) } }
        for feeds in viewFeeds.values { for feed in feeds.values { feed.finish(throwing: error) } }
        sourceFeeds = [:]
        viewFeeds = [:]
        for follower in lineFollowers.values { follower.finish() }
        lineFollowers = [:]
        let waiting = pending.values
        pending = [:]
        for call in waiting { call.resume(throwing: error ?? HammockError.stopped) }
        writer.close()
        ids.finish(throwing: error)
        ended.send(true)
        ended.finish(throwing: nil)
    }

    func requestStop() {
        stopRequested = true
    }

    /// The error that ended the engine, `nil` for a graceful stop; `nil` too while it runs.
    var endError: HammockError? { end ?? nil }
}

/// Decodes one source's lines into one content type, for every reader of its `TypedSource`s.
protocol SourceFeed: Sendable {
    mutating func receive(_ line: SourceLine)
    func finish(throwing error: (any Error)?)
}

protocol ViewFeed: Sendable {
    mutating func receive(_ line: ViewLine)
    func finish(throwing error: (any Error)?)
}

/// The engine's lines are compared before they reach a feed (a repeated line does not), so every state a
/// feed sends is news: `LatestValue` need not compare decoded states, which need not be `Equatable`.
private let alwaysDistinct: @Sendable (Any, Any) -> Bool = { _, _ in true }

struct TypedSourceFeed<Content: Decodable & Sendable>: SourceFeed {
    let output = LatestValue<LoadableState<Content>>(.initial, isDistinct: alwaysDistinct)
    private var decoding = ContentDecoding<Content>()

    mutating func receive(_ line: SourceLine) {
        let (content, latestError) = decoding.update(content: line.content, engineError: line.latestError)
        output.send(
            LoadableState(
                content: content, latestError: latestError, isLoading: line.isLoading, timestamp: line.timestamp,
                failures: line.failures, latestEvent: line.latestEvent, meta: line.meta))
    }

    func finish(throwing error: (any Error)?) {
        output.finish(throwing: error)
    }
}

struct TypedViewFeed<Content: Decodable & Sendable>: ViewFeed {
    let viewOutput = LatestValue<ViewLoadableState<Content>>(.initial, isDistinct: alwaysDistinct)
    let output = LatestValue<LoadableState<Content>>(.initial, isDistinct: alwaysDistinct)
    private var decoding = ContentDecoding<Content>()
    /// What the `Loadable` state was made of last: a view line that changes only its `errors` list or
    /// `canTryAgain` is news for `viewStates`, not for `states`.
    private var loadableOf: LoadableKey?

    private struct LoadableKey: Equatable {
        var content: JSONValue?
        var latestError: LoadError?
        var isLoading: Bool
        var failures: Int
    }

    mutating func receive(_ line: ViewLine) {
        let (content, latestError) = decoding.update(content: line.content, engineError: line.latestError)
        // `state` first: a reader woken by `viewStates` (on another thread) must find `state` already matching.
        let key = LoadableKey(
            content: line.content, latestError: latestError, isLoading: line.status == .loading,
            failures: line.errors.count)
        if key != loadableOf {
            loadableOf = key
            output.send(
                LoadableState(
                    content: content, latestError: latestError, isLoading: key.isLoading, timestamp: nil,
                    failures: key.failures))
        }
        // `data` always comes with content (the engine's rule), so a `case .data:` can use it: a view whose
        // content never decoded as `Content` shows the decoding failure instead.
        let status: ViewStatus = line.status == .data && content == nil ? .error : line.status
        viewOutput.send(
            ViewLoadableState(
                status: status, content: content, latestError: latestError, errors: line.errors,
                canTryAgain: line.canTryAgain))
    }

    func finish(throwing error: (any Error)?) {
        viewOutput.finish(throwing: error)
        output.finish(throwing: error)
    }
}

/// A source or a view, by id: whose line `Hammock.latestLine` gives and `Hammock.lineChanges` names.
public enum LineSubject: Sendable, Hashable {
    case source(String)
    case view(String)
}
