/// The keys every source has, whatever its kind; every other key of a source belongs to its kind.
///
/// One list for the configuration reader (which reads them, and lets `defaults:` set the inheritable
/// ones) and for every kind's option checks (which must not call them unknown).
public enum CommonSourceKey: String, CaseIterable, Sendable {
    case kind, refresh, at, expiration, retry, timeout, select, cache, keep
    case respectServer = "respect-server"
    case limit

    /// Whether `defaults:` may set it for every source. A source's `kind` and `select` are its own.
    public var isInheritable: Bool {
        switch self {
        case .kind, .select: false
        case .refresh, .at, .expiration, .retry, .timeout, .cache, .keep, .respectServer, .limit: true
        }
    }

    /// Every common key's name, as written in YAML.
    public static let names = allCases.map(\.rawValue)
    /// The keys `defaults:` accepts.
    public static let inheritableNames = allCases.filter(\.isInheritable).map(\.rawValue)
}
