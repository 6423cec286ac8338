/// Who watches which sources. `hammock run` watches everything; `hammock serve` watches what its clients
/// subscribed to (the engine passes the union of every connection's subscription).
public enum Demand: Sendable, Equatable {
    case everything
    case subscribed(sources: Set<SourceID>, views: Set<ViewID>)
}
