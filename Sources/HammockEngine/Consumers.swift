import HammockCore
import HammockJSON
import HammockRendering
import HammockSystem
import OrderedCollections

/// One reader of the engine's lines: `hammock run`'s stdout, or a client connected to `hammock serve`'s
/// socket. Each has its own queue (`output`, which coalesces per id while the reader is slow) and its own
/// control lines (`controls`), so a slow or hostile reader slows only itself.
final class Consumer: Sendable {
    let id: ConsumerID
    let subscription: Subscription
    let output: any EngineOutput
    let controls: ControlMailbox
    /// The `id` of the client's `subscribe` line, answered with an `ack` once its snapshot is written.
    let subscriptionID: ControlID?
    /// What the consumer's output shows; a bar format's malformed control lines go to the log, not the bar.
    let format: StdoutFormat
    /// What the consumer's end of the engine does when the consumer leaves or the engine drops it: a
    /// connection stops reading its socket and closes it once its output is done. Called by the loop once.
    let close: @Sendable () -> Void
    /// An event stream that came back (`Last-Event-ID`): the number of the last line it read
    /// (`EventJournal`); its snapshot holds what changed since, when the engine still knows.
    let resumeAfter: Int?
    /// The consumer reads the state lines `ClientListener.publish` hands over, not `output.send`'s: a client
    /// of `hammock serve`'s socket (`SocketWriter`'s change log).
    let readsPublishedLines: Bool
    /// `output`, when it is told each line's engine-wide number (the HTTP door's streams).
    let numberedOutput: (any NumberedEngineOutput)?

    init(
        id: ConsumerID, subscription: Subscription, subscriptionID: ControlID? = nil, output: any EngineOutput,
        controls: ControlMailbox, format: StdoutFormat = .json, close: @escaping @Sendable () -> Void = {},
        resumeAfter: Int? = nil, readsPublishedLines: Bool = false
    ) {
        self.id = id
        numberedOutput = output as? any NumberedEngineOutput
        self.resumeAfter = resumeAfter
        self.readsPublishedLines = readsPublishedLines
        self.subscription = subscription
        self.subscriptionID = subscriptionID
        self.output = output
        self.controls = controls
        self.format = format
        self.close = close
    }
}

/// Where `hammock serve`'s clients come from: a listener that accepts connections and hands each to the
/// loop as a `Consumer` (`EngineInput.joined`), and says when one leaves (`.left`), until cancelled.
protocol ClientListener: Sendable {
    func run(inbox: EngineInbox) async
    /// No client is connected, nor being let in (its first line not read yet): `--idle-exit` may stop.
    var isIdle: Bool { get }
    /// The stop has begun: accept nobody more (a client let in now would read neither `hello` nor `bye`).
    func stopAccepting()
    /// A second stop signal: stop waiting for any client's last lines.
    func interruptAll()
    /// A reload is in force: a bar client that joins from now on renders these views.
    func viewsReloaded(_ views: [ViewDefinition])
    /// State lines (`OutputLine.isRoutedBySubscription`) that every joined client whose subscription takes
    /// them reads: one call a turn, however many clients there are.
    func publish(_ lines: [OutputLine])
}

/// A consumer's name inside one engine. `standardOutput` is `hammock run`'s stdout (and `hammock watch`'s
/// screen); connections count up from 1 and are never reused while the engine runs.
struct ConsumerID: Hashable, Sendable, Comparable, CustomStringConvertible {
    let rawValue: Int

    static let standardOutput = ConsumerID(rawValue: 0)

    static func < (lhs: ConsumerID, rhs: ConsumerID) -> Bool { lhs.rawValue < rhs.rawValue }
    var description: String { rawValue == 0 ? "stdout" : "client \(rawValue)" }
}

/// What a consumer reads: every line (`hammock run`'s stdout, a client that did not say), or the lines of the
/// sources and views it named (`{"op":"subscribe","sources":[...],"views":[...]}`, `attach --source/--view`).
///
/// A view subscriber gets the view's lines, not its sources': what it watches is the view. (What loads is
/// wider: the view's sources, and what their templates read, are watched; see `Demand`.)
public struct Subscription: Sendable, Equatable {
    /// nil: every source (a line's subscription that names only views has an empty set here).
    public var sources: Set<SourceID>?
    /// nil: every view (i3bar's, without `views`).
    public var views: Set<ViewID>?

    public static let everything = Subscription(sources: nil, views: nil)

    /// What a consumer that reads `format` reads: a bar shows its views and nothing else (i3bar without any:
    /// every view), so only their sources load; JSON lines and the watch screen read everything.
    public static func reading(_ format: StdoutFormat, views: [ViewID]) -> Subscription {
        switch format {
        case .json, .tui: .everything
        case .i3bar where views.isEmpty: Subscription(sources: [], views: nil)
        case .waybar, .polybar, .text, .tmux, .i3bar: Subscription(sources: [], views: Set(views))
        }
    }

    public init(sources: Set<SourceID>?, views: Set<ViewID>?) {
        self.sources = sources
        self.views = views
    }

    public var isEverything: Bool { sources == nil && views == nil }

    func includes(source id: SourceID) -> Bool { sources?.contains(id) ?? true }
    func includes(view id: ViewID) -> Bool { views?.contains(id) ?? true }

    /// Whether a line that `Fanout` routes by subscription alone (`OutputLine.isRoutedBySubscription`) goes
    /// to this consumer.
    func takes(_ line: OutputLine) -> Bool {
        switch line {
        case .source(let id, _, _): includes(source: id)
        case .view(let id, _): includes(view: id)
        case .removed(let id, let what): what == "source" ? includes(source: SourceID(id)) : includes(view: ViewID(id))
        case .bye: true
        case .hello, .reloaded, .ack, .error: false
        }
    }

    /// The ids of `sources` and `views` this subscription reads, in their order (a `hello`'s or `reloaded`'s
    /// lists, as this consumer sees them).
    func filter(sources all: [SourceID], views allViews: [ViewID]) -> (sources: [SourceID], views: [ViewID]) {
        (all.filter(includes(source:)), allViews.filter(includes(view:)))
    }

    /// What the subscription names that the configuration does not have, said for the client's `error` line;
    /// nil when it names only what exists.
    func unknownIDs(sources all: [SourceID], views allViews: [ViewID]) -> String? {
        let unknownSources = (sources ?? []).subtracting(all).map(\.rawValue).sorted()
        let unknownViews = (views ?? []).subtracting(allViews).map(\.rawValue).sorted()
        var problems: [String] = []
        if !unknownSources.isEmpty {
            problems.append("no source \(unknownSources.map { "\"\($0)\"" }.joined(separator: ", ")) (sources: \(all.map(\.rawValue).joined(separator: ", ")))")
        }
        if !unknownViews.isEmpty {
            problems.append("no view \(unknownViews.map { "\"\($0)\"" }.joined(separator: ", ")) (views: \(allViews.map(\.rawValue).joined(separator: ", ")))")
        }
        return problems.isEmpty ? nil : "subscribe: " + problems.joined(separator: "; ")
    }

    /// Which sources the engine must keep fresh for this subscription (widened by the core to the views'
    /// sources and the templates' inputs).
    var demand: Demand {
        guard let sources, let views else { return .everything }  // every view watches nearly every source anyway
        return .subscribed(sources: sources, views: views)
    }
}

extension OutputLine {
    /// A line every consumer whose subscription takes it reads as it is (`Subscription.takes`); the others
    /// are answers owed to one consumer, or say the ids each subscription sees.
    var isRoutedBySubscription: Bool {
        switch self {
        case .source, .view, .removed, .bye: true
        case .hello, .reloaded, .ack, .error: false
        }
    }
}

extension Demand {
    /// What every consumer together watches: everything if one of them does, else the union.
    static func union(of subscriptions: some Sequence<Subscription>) -> Demand {
        var sources: Set<SourceID> = []
        var views: Set<ViewID> = []
        for subscription in subscriptions {
            guard case .subscribed(let more, let moreViews) = subscription.demand else { return .everything }
            sources.formUnion(more)
            views.formUnion(moreViews)
        }
        return .subscribed(sources: sources, views: views)
    }
}

/// Who reads which line: the consumers' subscriptions, and the answers each is owed.
///
/// Pure, owned by the loop. Control lines' ids are a consumer's own, and two clients may both send `"id":1`;
/// the core and the reload machine see each as an id unique in the engine (`replyID`), and `route` turns an
/// answer back into the consumer's id and sends it to that consumer alone. The state lines an op causes go
/// to every subscriber.
struct Fanout {
    private(set) var subscriptions: OrderedDictionary<ConsumerID, Subscription> = [:]
    /// Engine-wide id of an answer still owed → who asked, with its own id.
    private var owed: [ControlID: (consumer: ConsumerID, id: ControlID)] = [:]
    private var nextReply = 1
    /// The configuration's canonical path, told in each client's `hello` (not on stdout, whose reader started
    /// the engine with it).
    let configuration: String?

    init(configuration: String? = nil) {
        self.configuration = configuration.map { SocketPath.canonical($0) ?? $0 }
    }

    var demand: Demand { Demand.union(of: subscriptions.values) }

    /// The demand once a consumer with `subscription` has joined too.
    func demand(adding subscription: Subscription) -> Demand {
        Demand.union(of: Array(subscriptions.values) + [subscription])
    }
    var isEmpty: Bool { subscriptions.isEmpty }

    mutating func join(_ consumer: ConsumerID, _ subscription: Subscription) {
        subscriptions[consumer] = subscription
    }

    /// The consumer is gone: nothing more is sent to it, and answers owed to it are dropped when they come.
    mutating func leave(_ consumer: ConsumerID) {
        subscriptions.removeValue(forKey: consumer)
        owed = owed.filter { $0.value.consumer != consumer }
    }

    /// The engine-wide ids under which the core answers `ids`, a consumer's own.
    mutating func replyIDs(for consumer: ConsumerID, _ ids: [ControlID]) -> [ControlID] {
        ids.map { id in
            let reply = ControlID.number(JSONNumber(nextReply))
            nextReply += 1
            owed[reply] = (consumer, id)
            return reply
        }
    }

    /// Each consumer's share of one turn's `lines`, in order. `answering`: the consumer whose control line
    /// the lines answer; an `error` without an id goes to it alone (its malformed line is nobody else's
    /// business), and to everyone when nil (a refused SIGHUP reload). `only`: a joining consumer's hello and
    /// snapshot, which no one else reads.
    mutating func route(
        _ lines: [OutputLine], answering: ConsumerID? = nil, only: ConsumerID? = nil
    ) -> [(consumer: ConsumerID, lines: [OutputLine])] {
        // `hammock run`'s case, on the path of every line: one consumer that reads everything, no answer owed
        // (so no id to turn back), and stdout's `hello` carries no configuration: every line goes as it is.
        if subscriptions.count == 1, owed.isEmpty, subscriptions.keys[0] == .standardOutput,
            subscriptions.values[0].isEverything, only == nil || only == .standardOutput
        {
            return [(.standardOutput, lines)]
        }
        // A turn of state lines only (a source changed, and the views it is in): each consumer reads the
        // lines its subscription takes, as they are, and one that reads everything shares the turn's array.
        // The path of every change a shared engine fans out, with no table built per turn.
        if lines.allSatisfy(\.isRoutedBySubscription) {
            var batches: [(consumer: ConsumerID, lines: [OutputLine])] = []
            batches.reserveCapacity(only == nil ? subscriptions.count : 1)
            for (consumer, subscription) in subscriptions where only == nil || only == consumer {
                if subscription.isEverything {
                    batches.append((consumer, lines))
                    continue
                }
                let taken = lines.filter { subscription.takes($0) }
                if !taken.isEmpty { batches.append((consumer, taken)) }
            }
            return batches
        }
        var batches: OrderedDictionary<ConsumerID, [OutputLine]> = [:]
        func send(_ line: OutputLine, to consumer: ConsumerID) {
            guard only == nil || only == consumer, subscriptions[consumer] != nil else { return }
            batches[consumer, default: []].append(line)
        }
        for line in lines {
            switch line {
            case .ack(let reply):
                if let owner = owed.removeValue(forKey: reply) { send(.ack(id: owner.id), to: owner.consumer) }
            case .error(let message, let reply?):
                if let owner = owed.removeValue(forKey: reply) {
                    send(.error(message: message, id: owner.id), to: owner.consumer)
                }
            case .error(_, nil):
                if let answering { send(line, to: answering) } else { for consumer in subscriptions.keys { send(line, to: consumer) } }
            case .source, .view, .removed:
                for (consumer, subscription) in subscriptions where subscription.takes(line) { send(line, to: consumer) }
            case .hello(let sources, let views, let version, _):
                for (consumer, subscription) in subscriptions {
                    let (sources, views) = subscription.filter(sources: sources, views: views)
                    let configuration = consumer == .standardOutput ? nil : configuration
                    send(.hello(sources: sources, views: views, version: version, configuration: configuration), to: consumer)
                }
            case .reloaded(let sources, let views):
                for (consumer, subscription) in subscriptions {
                    let (sources, views) = subscription.filter(sources: sources, views: views)
                    send(.reloaded(sources: sources, views: views), to: consumer)
                }
            case .bye:
                for consumer in subscriptions.keys { send(line, to: consumer) }
            }
        }
        return batches.map { ($0.key, $0.value) }
    }
}
