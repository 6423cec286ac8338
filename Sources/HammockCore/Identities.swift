/// The names the engine passes around, each its own type so that a view's id cannot be handed where a
/// source's is wanted, nor a kind where either is. Each is written and read as the plain string (or number)
/// it wraps (`RawRepresentable`'s `Codable`), so no line on the wire changes; string literals make them in
/// tests and configuration code (`"s\(index)"` too, through the default string interpolation). Text from
/// outside (YAML, control lines, the plugin protocol) becomes one with `SourceID(text)` where it is read,
/// and goes back out as `rawValue` where it is written.

/// A name of the configuration, typed by what it names (`Tag`): `SourceID`, `ViewID`, `Kind`.
public struct Name<Tag>: RawRepresentable, Hashable, Comparable, Sendable, Codable, ExpressibleByStringLiteral,
    ExpressibleByStringInterpolation, CustomStringConvertible, CustomDebugStringConvertible
{
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public var description: String { rawValue }
    /// Quoted, as a `String`'s: a list of names reads `["a", "b"]`, as the list of their texts did.
    public var debugDescription: String { rawValue.debugDescription }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// What each `Name` names; never made, only written in a type.
public enum SourceName {}
public enum ViewName {}
public enum KindName {}
public enum BudgetTag {}

/// A source's `id` in the configuration.
public typealias SourceID = Name<SourceName>
/// A view's `id` in the configuration.
public typealias ViewID = Name<ViewName>
/// A source's `kind`: which loader (a plugin, or the built-in `fake`) loads it.
public typealias Kind = Name<KindName>
/// A shared budget's name under `limits:`, which a source's `limit:` names.
public typealias BudgetName = Name<BudgetTag>

/// One load of one source, numbered by the core from 1 in the order it sends them; a loader's answer names
/// it, so an answer to a load that was cancelled or timed out is known as such.
public struct LoadID: RawRepresentable, Hashable, Comparable, Sendable, Codable, ExpressibleByIntegerLiteral,
    CustomStringConvertible
{
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    public init(integerLiteral value: Int) { rawValue = value }
    public var description: String { String(rawValue) }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The id after this one.
    public var next: LoadID { LoadID(rawValue + 1) }
}
